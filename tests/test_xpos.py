"""posenc.xpos against the formula of Sun et al. (2022): values, relativity, decay, numerics, errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import apply_rope, rope_frequencies
from posenc.xpos import apply_xpos, xpos_scale, xpos_zeta

FAST = settings(max_examples=40, deadline=None)
LAYOUTS = ("half", "interleaved")


# ---------------------------------------------------------------------------
# Independent references, in float64
# ---------------------------------------------------------------------------


def zeta_ref(dim, gamma=0.4):
    return [(2 * i / dim + gamma) / (1 + gamma) for i in range(dim // 2)]


def half_to_interleaved(dim):
    """``perm``: ``x[..., perm]`` puts feature ``i`` at ``2i`` and ``i + dim/2`` at ``2i+1``."""
    h = dim // 2
    return torch.stack((torch.arange(h), torch.arange(h) + h), dim=-1).flatten()


def reference(x, positions, sign, *, layout, center=0.0, gamma=0.4, scale_base=512.0, base=1e4):
    """Pair i as the complex number ``a + j b`` times ``exp(j p theta_i) zeta_i^(sign (p - c) / B)``."""
    dim = x.shape[-1]
    perm = half_to_interleaved(dim) if layout == "half" else torch.arange(dim)
    pairs = torch.view_as_complex(x.double()[..., perm].unflatten(-1, (-1, 2)).contiguous())
    theta = rope_frequencies(dim, base=base).double()  # float32 frequencies, as apply_rope
    p = positions.double()[..., None]
    zeta = torch.tensor(zeta_ref(dim, gamma), dtype=torch.float64)
    factor = zeta ** (sign * (p - center) / scale_base) * torch.polar(
        torch.ones_like(p * theta), p * theta
    )
    out = torch.view_as_real(pairs * factor).flatten(-2)
    return out[..., torch.argsort(perm)]


def relative_scores(q, k, delta, *, layout, gamma=0.4, scale_base=512.0):
    """``sum_i zeta_i^(delta/B) Re[q_i conj(k_i) e^(j delta theta_i)]`` for one pair of vectors."""
    dim = q.shape[-1]
    perm = half_to_interleaved(dim) if layout == "half" else torch.arange(dim)
    qc = torch.view_as_complex(q.double()[perm].unflatten(-1, (-1, 2)).contiguous())
    kc = torch.view_as_complex(k.double()[perm].unflatten(-1, (-1, 2)).contiguous())
    theta = rope_frequencies(dim).double()
    zeta = torch.tensor(zeta_ref(dim, gamma), dtype=torch.float64)
    d = delta.double()[..., None]
    terms = (qc * kc.conj() * torch.polar(torch.ones_like(d * theta), d * theta)).real
    return (zeta ** (d / scale_base) * terms).sum(-1)


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


# ---------------------------------------------------------------------------
# zeta and the scale
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [2, 8, 64, 128])
@pytest.mark.parametrize("gamma", [0.4, 0.1, 3.0])
def test_zeta_formula(dim, gamma):
    zeta = xpos_zeta(dim, gamma=gamma, dtype=torch.float64)
    assert zeta.shape == (dim // 2,) and zeta.dtype == torch.float64
    torch.testing.assert_close(zeta, torch.tensor(zeta_ref(dim, gamma), dtype=torch.float64))
    assert math.isclose(zeta[0], gamma / (1 + gamma))
    assert (zeta > 0).all() and (zeta < 1).all() and (zeta[1:] > zeta[:-1]).all()


@pytest.mark.parametrize("dim", [8, 64, 128])
def test_zeta_equals_torchscale_buffer(dim):
    torchscale = (torch.arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim)  # its "scale" buffer
    torch.testing.assert_close(xpos_zeta(dim), torchscale)
    assert xpos_zeta(dim).dtype == torch.float32


def test_scale_formula_shapes_and_dtypes():
    positions = torch.tensor([[0, 1, 5], [-3, 512, 2000]])
    scale = xpos_scale(16, positions)
    assert scale.shape == (2, 3, 8) and scale.dtype == torch.float32
    zeta = torch.tensor(zeta_ref(16), dtype=torch.float64)
    expected = zeta ** (positions.double()[..., None] / 512)
    torch.testing.assert_close(scale, expected.float())
    assert (scale[0, 0] == 1).all()  # position 0: no scaling
    wide = xpos_scale(16, positions.double() + 0.5, gamma=0.2, scale_base=64.0)
    assert wide.dtype == torch.float64
    zeta = torch.tensor(zeta_ref(16, 0.2), dtype=torch.float64)
    torch.testing.assert_close(wide, zeta ** ((positions.double()[..., None] + 0.5) / 64))


def test_scale_at_scale_base_is_zeta():
    torch.testing.assert_close(xpos_scale(32, torch.tensor(512)), xpos_zeta(32))
    torch.testing.assert_close(xpos_scale(32, torch.tensor(-512)), 1 / xpos_zeta(32))


def test_scale_with_infinite_base_is_one():
    assert (xpos_scale(8, torch.arange(-100, 100), scale_base=math.inf) == 1).all()


def test_scale_decays_monotonically_with_distance():
    distance = torch.arange(0, 5000)
    scale = xpos_scale(128, distance)  # (5000, 64): the factor zeta_i^(delta/B) of a score
    assert (scale[1:] < scale[:-1]).all()  # strictly falling in delta for every pair
    assert (scale[1:, 1:] > scale[1:, :-1]).all()  # slower for later pairs (delta > 0)
    assert (scale[:, 0] >= 0).all() and (scale <= 1).all()


def test_scale_plain_formula_leaves_float32_range():
    """No centring in xpos_scale: the limits quoted in its docstring."""
    scale = xpos_scale(128, torch.tensor([-36261, -36260, 35694, 35695, 42493, 42494]))[:, 0]
    tiny = torch.finfo(torch.float32).tiny
    assert math.isinf(scale[0]) and math.isfinite(scale[1])
    assert scale[2] >= tiny and 0 < scale[3] < tiny
    assert scale[4] > 0 and scale[5] == 0


# ---------------------------------------------------------------------------
# apply_xpos against the formula
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [2, 8, 64])
def test_apply_xpos_matches_reference(dim, layout):
    q, k = randn(2, 3, 11, dim, dtype=torch.float64)
    qp, kp = torch.arange(11) * 37, torch.arange(11) * 37 - 5
    center = 123.0
    q2, k2 = apply_xpos(q, k, qp, kp, layout=layout, center=center)
    torch.testing.assert_close(q2, reference(q, qp, 1.0, layout=layout, center=center))
    torch.testing.assert_close(k2, reference(k, kp, -1.0, layout=layout, center=center))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_xpos_is_rope_times_scale(layout):
    q, k = randn(2, 4, 9, 16, dtype=torch.float64)
    p = torch.arange(9) + 40
    q2, k2 = apply_xpos(q, k, p, layout=layout, gamma=0.7, scale_base=100.0, center=0.0)
    scale = xpos_scale(16, p.double(), gamma=0.7, scale_base=100.0)  # (9, 8)
    spread = torch.cat((scale, scale), -1) if layout == "half" else scale.repeat_interleave(2, -1)
    torch.testing.assert_close(q2, apply_rope(q, p, layout=layout) * spread)
    torch.testing.assert_close(k2, apply_rope(k, p, layout=layout) / spread)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_midpoint_center_is_the_midpoint_of_all_positions(layout):
    q, k = randn(2, 2, 6, 8, dtype=torch.float64)
    qp, kp = torch.tensor([10, 11, 12, 13, 14, 15]), torch.tensor([3, 4, 5, 6, 7, 8])
    expected = apply_xpos(q, k, qp, kp, layout=layout, center=9.0)  # (3 + 15) / 2
    got = apply_xpos(q, k, qp, kp, layout=layout, center="midpoint")
    for g, want in zip(got, expected, strict=True):
        torch.testing.assert_close(g, want, rtol=0, atol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_default_center_is_zero(layout):
    q, k = randn(2, 2, 6, 8)
    qp, kp = torch.tensor([10, 11, 12, 13, 14, 15]), torch.tensor([3, 4, 5, 6, 7, 8])
    expected = apply_xpos(q, k, qp, kp, layout=layout, center=0.0)
    for center in (None, 0):
        got = apply_xpos(q, k, qp, kp, layout=layout, center=center)
        for g, want in zip(got, expected, strict=True):
            torch.testing.assert_close(g, want, rtol=0, atol=0)
    torch.testing.assert_close(expected[0], reference(q, qp, 1.0, layout=layout).float())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("center", [None, 0.0, -700.0, 3000.5])
def test_scores_match_relative_formula(layout, center):
    dim = 32
    q, k = randn(2, dim, dtype=torch.float64, seed=3)
    p = torch.tensor([0, 1, 2, 50, 300, 301, 1000])
    q2, k2 = apply_xpos(q.expand(7, dim), k.expand(7, dim), p, layout=layout, center=center)
    scores = q2 @ k2.T  # [m, n]
    delta = p[:, None] - p[None, :]
    torch.testing.assert_close(scores, relative_scores(q, k, delta, layout=layout))


@pytest.mark.parametrize("layout", LAYOUTS)
@FAST
@given(
    m=st.integers(-3000, 3000),
    n=st.integers(-3000, 3000),
    shift=st.integers(-20000, 20000),
    seed=st.integers(0, 1000),
)
def test_score_depends_only_on_offset(m, n, shift, seed, layout):
    q, k = randn(2, 16, dtype=torch.float64, seed=seed)

    def score(a, b):
        q2, k2 = apply_xpos(q, k, torch.tensor(a), torch.tensor(b), layout=layout)
        return q2 @ k2

    torch.testing.assert_close(score(m, n), score(m + shift, n + shift), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_pair_gets_its_own_factor(layout):
    """A query and key living in pair i only: the xPos score is the RoPE score times zeta_i^(delta/B)."""
    dim = 16
    perm = half_to_interleaved(dim) if layout == "half" else torch.arange(dim)
    m, n = torch.tensor(900), torch.tensor(100)
    zeta = torch.tensor(zeta_ref(dim), dtype=torch.float64)
    for i in range(dim // 2):
        q = torch.zeros(dim, dtype=torch.float64)
        q[perm[2 * i]], q[perm[2 * i + 1]] = 0.6, -1.3
        k = torch.zeros(dim, dtype=torch.float64)
        k[perm[2 * i]], k[perm[2 * i + 1]] = 1.1, 0.4
        q2, k2 = apply_xpos(q, k, m, n, layout=layout)
        rope = apply_rope(q, m, layout=layout) @ apply_rope(k, n, layout=layout)
        torch.testing.assert_close(q2 @ k2, rope * zeta[i] ** (800 / 512))


def test_decay_is_monotone_for_aligned_query_and_key():
    """q = k in the slowest pair, n = m: the score at distance delta falls as delta grows."""
    dim = 8
    q = torch.zeros(dim, dtype=torch.float64)
    q[3], q[7] = 1.0, 0.0  # half layout: pair 3 is features 3 and 7
    delta = torch.arange(0, 2000)
    q2, _ = apply_xpos(q.expand(2000, dim), q.expand(2000, dim), delta, center=0.0)
    _, k0 = apply_xpos(q, q, torch.tensor(0), center=0.0)
    # remove the rotation: the factor alone is the score divided by cos(delta theta_3)
    theta = rope_frequencies(dim).double()[3]
    factor = (q2 @ k0) / torch.cos(delta.double() * theta)
    assert (factor[1:] < factor[:-1]).all()
    torch.testing.assert_close(
        factor, xpos_zeta(dim, dtype=torch.float64)[3] ** (delta.double() / 512)
    )


def test_non_causal_scores_grow():
    """m < n: every factor exceeds 1, so xPos amplifies keys in the future."""
    factor = xpos_scale(64, torch.tensor([-1000, -1]))
    assert (factor > 1).all()


# ---------------------------------------------------------------------------
# RoPE as the limit, the centre, and large positions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_infinite_scale_base_is_rope_exactly(layout, dtype):
    q, k = randn(2, 2, 3, 10, 16, dtype=dtype)
    p = torch.arange(10) * 13 + 7
    q2, k2 = apply_xpos(q, k, p, layout=layout, scale_base=math.inf)
    assert torch.equal(q2, apply_rope(q, p, layout=layout))
    assert torch.equal(k2, apply_rope(k, p, layout=layout))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_large_scale_base_approaches_rope(layout):
    q, k = randn(2, 3, 50, 32)
    p = torch.arange(50) * 100
    q2, k2 = apply_xpos(q, k, p, layout=layout, scale_base=1e12)
    torch.testing.assert_close(q2, apply_rope(q, p, layout=layout))
    torch.testing.assert_close(k2, apply_rope(k, p, layout=layout))
    q2, k2 = apply_xpos(q, k, p, layout=layout)  # B = 512 is visibly different
    assert not torch.allclose(q2, apply_rope(q, p, layout=layout), atol=1e-2)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_center_cancels_in_scores_but_not_in_vectors(layout):
    q, k = randn(2, 2, 20, 32, dtype=torch.float64)
    p = torch.arange(20) * 50
    a_q, a_k = apply_xpos(q, k, p, layout=layout, center=0.0)
    b_q, b_k = apply_xpos(q, k, p, layout=layout, center=777.0)
    torch.testing.assert_close(a_q @ a_k.mT, b_q @ b_k.mT)
    assert not torch.allclose(a_q, b_q)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_positions_up_to_2_16_in_float32(layout):
    """Causal scores over a span of 2**16 positions stay finite and accurate in float32."""
    dim = 128
    q, k = randn(2, dim, seed=7)
    p = torch.tensor([0, 1, 100, 20000, 36000, 50000, 65534, 65535], dtype=torch.float64)
    q2, k2 = apply_xpos(q.expand(8, dim), k.expand(8, dim), p, layout=layout, center="midpoint")
    assert q2.dtype == torch.float32 and torch.isfinite(q2).all() and torch.isfinite(k2).all()
    scores = (q2.double() @ k2.double().T).tril()  # m >= n
    expected = relative_scores(q, k, p[:, None] - p[None, :], layout=layout).tril()
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-5)
    # the diagonal is RoPE's m = n score, q . k, at every position
    torch.testing.assert_close(
        scores.diagonal(), (q.double() @ k.double()).expand(8), rtol=1e-5, atol=1e-5
    )


def test_center_zero_refuses_2_16_instead_of_breaking():
    """center=0 is the plain formula: at 2**16 the key scale would overflow and the query
    scale underflow (xpos_scale shows it); apply_xpos raises, naming center."""
    q, k = randn(2, 128, seed=1)
    p = torch.tensor(65535)
    assert not torch.isfinite(xpos_scale(128, -p)).all() and (xpos_scale(128, p) == 0).any()
    message = (
        r"^center=0.0 cannot give exact xPos scores for positions in \[65535, 65535\]: .*"
        r"float32's normal range for \|p - center\| > 35694 .* reach 65535. Pass a fixed "
        r"center near their middle \(e.g. center=65535\), the same in every call .*"
        r"center='midpoint'"
    )
    for center in (None, 0.0):
        with pytest.raises(ValueError, match=message):
            apply_xpos(q, k, p, center=center)
    q3, k3 = apply_xpos(q, k, p, center=65535)  # a centre near the positions: exact
    torch.testing.assert_close(q3 @ k3, q @ k)
    q4, k4 = apply_xpos(q, k, p, center="midpoint")
    torch.testing.assert_close(q4 @ k4, q @ k)


@pytest.mark.parametrize(
    ("dtype", "limit"), [(torch.float32, 35694), (torch.bfloat16, 35694), (torch.float16, 3966)]
)
def test_range_limit_follows_the_dtype(dtype, limit):
    q = randn(2, 64).to(dtype)
    for p in (limit, -limit):
        q2, k2 = apply_xpos(q, q, torch.tensor([p, 0]))  # at the limit: computed
        assert torch.isfinite(q2).all() and torch.isfinite(k2).all()
    with pytest.raises(ValueError, match=rf"for \|p - center\| > {limit} "):
        apply_xpos(q, q, torch.tensor([limit + 1, 0]))
    with pytest.raises(ValueError, match=rf"^center={-float(limit)} cannot.* reach {limit + 1}\."):
        apply_xpos(q, q, torch.tensor([1]), center=-limit)
    # the midpoint centres the span: twice the limit fits
    apply_xpos(q, q, torch.tensor([0, 2 * limit]), center="midpoint")
    with pytest.raises(ValueError, match=r"^center='midpoint' cannot"):
        apply_xpos(q, q, torch.tensor([0, 2 * limit + 2]), center="midpoint")
    # no decay, no limit
    apply_xpos(q, q, torch.tensor([10**9]), scale_base=math.inf)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("center", [None, 5000.0])
def test_prefill_then_decode_equals_one_call(layout, center):
    """A KV cache: keys encoded once and kept, queries encoded one step at a time. With the
    default centre the scores equal those of one call over the whole sequence (with the old
    default, each call's midpoint, they were about 1 % off after 12 steps)."""
    b, h, d, prompt, steps = 2, 3, 32, 20, 12
    q, k = randn(2, b, h, prompt + steps, d, seed=11)
    p = torch.arange(prompt + steps) + 4000
    kw = {"layout": layout, "center": center}

    def scores(q2, k2):  # in float64, so that only the encoded vectors can differ
        return q2.double() @ k2.double().mT

    full_q, full_k = apply_xpos(q, k, p, **kw)
    full = scores(full_q, full_k)  # (b, h, s, s)
    cache_q, cache_k = apply_xpos(q[..., :prompt, :], k[..., :prompt, :], p[:prompt], **kw)
    torch.testing.assert_close(scores(cache_q, cache_k), full[..., :prompt, :prompt])
    for t in range(prompt, prompt + steps):
        step_q, step_k = apply_xpos(q[..., t : t + 1, :], k[..., t : t + 1, :], p[t : t + 1], **kw)
        cache_k = torch.cat((cache_k, step_k), dim=-2)
        torch.testing.assert_close(
            scores(step_q, cache_k), full[..., t : t + 1, : t + 1], rtol=1e-12, atol=1e-12
        )
    torch.testing.assert_close(cache_k, full_k, rtol=0, atol=0)  # the same bits

    # each call's own midpoint (torchscale's centre) is what breaks a cache of encoded keys
    last_q, _ = apply_xpos(q[..., -1:, :], k[..., -1:, :], p[-1:], center="midpoint", layout=layout)
    _, mid_k = apply_xpos(
        q[..., :prompt, :], k[..., :prompt, :], p[:prompt], center="midpoint", layout=layout
    )
    wrong = scores(last_q, mid_k)  # centres 4031 and 4009.5
    right = full[..., -1:, :prompt]
    assert not torch.allclose(wrong, right, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kv_cache_with_a_fixed_center(layout):
    """Keys encoded once, queries one at a time: the same scores as one call, given one centre."""
    q, k = randn(2, 3, 12, 16)
    p = torch.arange(12) + 1000
    full_q, full_k = apply_xpos(q, k, p, layout=layout, center=0.0)
    for t in range(12):
        step_q, step_k = apply_xpos(
            q[:, t : t + 1], k[:, t : t + 1], p[t : t + 1], center=0.0, layout=layout
        )
        torch.testing.assert_close(step_q, full_q[:, t : t + 1])
        torch.testing.assert_close(step_k, full_k[:, t : t + 1])


def torchscale_like_scores(q, k):
    """torchscale's XPOS, rebuilt from its formula: interleaved pairs, exponent positions
    ``p - ceil(N/2)`` for N keys, rotation positions ``p``; q up-, k down-scaled."""
    n, dim = k.shape[-2], k.shape[-1]
    zeta = (torch.arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim)
    expo = torch.arange(-math.ceil(n / 2), n - math.ceil(n / 2)).float()  # N exponent positions
    scale = (zeta ** (expo[:, None] / 512)).repeat_interleave(2, -1)  # (N, d)
    theta = 1.0 / 10000 ** (torch.arange(0, dim // 2) / (dim // 2))
    angles = (torch.arange(n).float()[:, None] * theta).repeat_interleave(2, -1)

    def rot(x):  # (-x_{2i+1}, x_{2i}) pairs
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)

    q2 = (q * angles.cos() + rot(q) * angles.sin()) * scale
    k2 = (k * angles.cos() + rot(k) * angles.sin()) / scale
    return q2 @ k2.mT


@pytest.mark.parametrize("n", [1, 7, 64, 255])
def test_scores_equal_torchscale_convention(n):
    q, k = randn(2, 4, n, 32)
    q2, k2 = apply_xpos(q, k, torch.arange(n), layout="interleaved")
    torch.testing.assert_close(q2 @ k2.mT, torchscale_like_scores(q, k), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# Shapes, dtypes, broadcasting
# ---------------------------------------------------------------------------


def test_gqa_and_broadcast_positions():
    q = randn(2, 8, 5, 16)
    k = randn(2, 2, 9, 16, seed=1)
    qp = torch.tensor([[4, 5, 6, 7, 8], [0, 1, 2, 3, 4]])[:, None, :]  # (b, 1, s_q)
    kp = torch.arange(9)
    q2, k2 = apply_xpos(q, k, qp, kp)
    assert q2.shape == q.shape and k2.shape == k.shape
    for b in range(2):
        qb, kb = apply_xpos(q[b], k[b], qp[b, 0], kp)
        torch.testing.assert_close(
            q2[b] @ k2[b].repeat_interleave(4, 0).mT, qb @ kb.repeat_interleave(4, 0).mT
        )


@pytest.mark.parametrize(
    ("dtype", "tolerance"), [(torch.float16, 2e-3), (torch.bfloat16, 1e-2), (torch.float64, 1e-12)]
)
def test_dtype_is_kept(dtype, tolerance):
    q, k = randn(2, 3, 40, 32)
    p = torch.arange(40) * 10
    q2, k2 = apply_xpos(q.to(dtype), k.to(dtype), p)
    assert q2.dtype == k2.dtype == dtype
    ref_q, ref_k = apply_xpos(q.double(), k.double(), p)
    torch.testing.assert_close(q2.double(), ref_q, rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(k2.double(), ref_k, rtol=tolerance, atol=tolerance)


def test_empty_sequence():
    q, k = torch.empty(2, 0, 8), torch.empty(2, 0, 8)
    q2, k2 = apply_xpos(q, k, torch.arange(0))
    assert q2.shape == (2, 0, 8) and k2.shape == (2, 0, 8)


def test_fractional_and_negative_positions():
    q, k = randn(2, 6, 8, dtype=torch.float64)
    qp = torch.tensor([-3.5, -1.0, 0.0, 0.25, 7.0, 1e4], dtype=torch.float64)
    q2, k2 = apply_xpos(q, k, qp, center=2.0)
    torch.testing.assert_close(q2, reference(q, qp, 1.0, layout="half", center=2.0))
    torch.testing.assert_close(k2, reference(k, qp, -1.0, layout="half", center=2.0))


# ---------------------------------------------------------------------------
# Errors: one line, naming the argument and the expected range
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.0, -0.4, math.nan, math.inf])
def test_bad_gamma(gamma):
    q = torch.zeros(3, 8)
    with pytest.raises(ValueError, match=r"^gamma must be a finite number greater than 0, got"):
        apply_xpos(q, q, torch.arange(3), gamma=gamma)
    with pytest.raises(ValueError, match=r"^gamma must be"):
        xpos_zeta(8, gamma=gamma)
    with pytest.raises(ValueError, match=r"^gamma must be"):
        xpos_scale(8, torch.arange(3), gamma=gamma)


@pytest.mark.parametrize("scale_base", [0.0, -512.0, math.nan, -math.inf])
def test_bad_scale_base(scale_base):
    q = torch.zeros(3, 8)
    pattern = r"^scale_base must be a number greater than 0 \(math.inf turns the decay off\), got"
    with pytest.raises(ValueError, match=pattern):
        apply_xpos(q, q, torch.arange(3), scale_base=scale_base)
    with pytest.raises(ValueError, match=pattern):
        xpos_scale(8, torch.arange(3), scale_base=scale_base)


@pytest.mark.parametrize(
    ("name", "value"),
    [("gamma", True), ("scale_base", "512"), ("center", True), ("center", "middle")],
)
def test_wrong_types(name, value):
    q = torch.zeros(3, 8)
    with pytest.raises(TypeError, match=rf"^{name} must be a real number"):
        apply_xpos(q, q, torch.arange(3), **{name: value})


@pytest.mark.parametrize("center", [math.nan, math.inf])
def test_bad_center(center):
    q = torch.zeros(3, 8)
    with pytest.raises(ValueError, match=r"^center must be a finite number or 'midpoint', got"):
        apply_xpos(q, q, torch.arange(3), center=center)


def test_bad_sizes_and_layout():
    with pytest.raises(ValueError, match=r"^q.shape\[-1\] must be even, got 7"):
        apply_xpos(torch.zeros(3, 7), torch.zeros(3, 7), torch.arange(3))
    with pytest.raises(ValueError, match=r"^k must have the last dimension of q \(8\)"):
        apply_xpos(torch.zeros(3, 8), torch.zeros(3, 6), torch.arange(3))
    with pytest.raises(ValueError, match=r"^dim must be even, got 5"):
        xpos_zeta(5)
    with pytest.raises(ValueError, match=r"^dim must be even, got 9"):
        xpos_scale(9, torch.arange(3))
    with pytest.raises(
        ValueError, match=r"^layout must be one of 'half', 'interleaved', got 'neox'"
    ):
        apply_xpos(torch.zeros(3, 8), torch.zeros(3, 8), torch.arange(3), layout="neox")
    with pytest.raises(ValueError, match=r"^base must be a finite number greater than 1, got 1.0"):
        apply_xpos(torch.zeros(3, 8), torch.zeros(3, 8), torch.arange(3), base=1.0)
    with pytest.raises(ValueError, match=r"^q must have at least one dimension"):
        apply_xpos(torch.tensor(1.0), torch.zeros(8), torch.tensor(0))


def test_bad_tensors():
    with pytest.raises(
        ValueError, match=r"^q must be a floating-point tensor, got dtype torch.int64"
    ):
        apply_xpos(torch.zeros(3, 8, dtype=torch.long), torch.zeros(3, 8), torch.arange(3))
    with pytest.raises(TypeError, match=r"^k must be a torch.Tensor"):
        apply_xpos(torch.zeros(3, 8), [[0.0] * 8] * 3, torch.arange(3))
    with pytest.raises(
        ValueError, match=r"^q_positions must be an integer or floating-point tensor"
    ):
        apply_xpos(torch.zeros(3, 8), torch.zeros(3, 8), torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^positions must be an integer or floating-point tensor"):
        xpos_scale(8, torch.ones(3, dtype=torch.bool))


def test_positions_that_do_not_broadcast():
    q, k = torch.zeros(2, 4, 5, 8), torch.zeros(2, 4, 6, 8)
    with pytest.raises(
        ValueError, match=r"^q_positions of shape \(2, 5\) must broadcast to q.shape"
    ):
        apply_xpos(q, k, torch.zeros(2, 5), torch.arange(6))
    with pytest.raises(ValueError, match=r"^k_positions of shape \(5,\) must broadcast to k.shape"):
        apply_xpos(q, k, torch.arange(5), torch.arange(5))
    with pytest.raises(ValueError, match=r"^k_positions of shape \(5,\)"):
        apply_xpos(q, k, torch.arange(5))  # k_positions defaults to q_positions
