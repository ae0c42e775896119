"""apply_rope and RotaryEmbedding: references, properties, dtypes, caches, errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import (
    LinearScaling,
    Llama3Scaling,
    NTKScaling,
    RotaryEmbedding,
    YarnScaling,
    apply_rope,
    rope_frequencies,
)

FAST = settings(max_examples=50, deadline=None)
SCALINGS = [
    None,
    LinearScaling(4.0),
    NTKScaling(4.0),
    YarnScaling(4.0, 64),
    Llama3Scaling(8.0, 1.0, 4.0, 64),
]


# ---------------------------------------------------------------------------
# Independent references, in float64
# ---------------------------------------------------------------------------


def reference_half(x, positions, inv_freq, scale=1.0):
    """Hugging Face's formula: ``x * cos + rotate_half(x) * sin`` with ``cos = [c, c]``."""
    x = x.double()
    angles = positions.double()[..., None] * inv_freq.double()
    emb = torch.cat((angles, angles), dim=-1)
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * emb.cos() + rotated * emb.sin()) * scale


def reference_interleaved(x, positions, inv_freq, scale=1.0):
    """Meta's Llama formula: complex pairs ``(x[2i] + j x[2i+1]) * exp(j p theta_i)``."""
    pairs = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)).contiguous())
    angles = positions.double()[..., None] * inv_freq.double()
    rotated = pairs * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(rotated).flatten(-2) * scale


def half_to_interleaved(dim):
    """``perm``: ``x[..., perm]`` puts feature ``i`` at ``2i`` and ``i + dim/2`` at ``2i+1``."""
    h = dim // 2
    return torch.stack((torch.arange(h), torch.arange(h) + h), dim=-1).flatten()


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


# ---------------------------------------------------------------------------
# Against the references
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scaling", SCALINGS, ids=repr)
@pytest.mark.parametrize(
    ("layout", "reference"), [("half", reference_half), ("interleaved", reference_interleaved)]
)
@pytest.mark.parametrize("dim", [2, 8, 64, 128])
def test_matches_reference(dim, layout, reference, scaling):
    x = randn(2, 3, 17, dim, dtype=torch.float64)
    positions = torch.arange(17) * 7
    inv = rope_frequencies(dim, base=500.0, scaling=scaling)
    scale = scaling.attention_factor if isinstance(scaling, YarnScaling) else 1.0
    out = apply_rope(x, positions, base=500.0, layout=layout, scaling=scaling)
    torch.testing.assert_close(out, reference(x, positions, inv, scale), rtol=1e-12, atol=1e-12)


def test_float32_equals_hugging_face_float32_numerics():
    # HF: inv_freq and angles in float32, q * cos + rotate_half(q) * sin in float32
    x = randn(2, 4, 300, 64)
    positions = torch.arange(300)
    inv = rope_frequencies(64)
    angles = positions.float()[:, None] * inv
    emb = torch.cat((angles, angles), dim=-1)
    rotated = torch.cat((-x[..., 32:], x[..., :32]), dim=-1)
    expected = x * emb.cos() + rotated * emb.sin()
    torch.testing.assert_close(apply_rope(x, positions), expected, rtol=1e-6, atol=1e-6)


def test_unit_vector_turns_by_position_times_frequency():
    # half layout: e_i goes to cos(p theta_i) e_i + sin(p theta_i) e_{i + dim/2}
    dim, p = 8, 3.0
    inv = rope_frequencies(dim).double()
    x = torch.eye(dim, dtype=torch.float64)  # row i: e_i
    out = apply_rope(x, torch.tensor(p, dtype=torch.float64))
    for i in range(dim // 2):
        expected = torch.zeros(dim, dtype=torch.float64)
        expected[i] = math.cos(p * inv[i])
        expected[i + dim // 2] = math.sin(p * inv[i])
        torch.testing.assert_close(out[i], expected)
    out = apply_rope(x, torch.tensor(p, dtype=torch.float64), layout="interleaved")
    for i in range(dim // 2):
        expected = torch.zeros(dim, dtype=torch.float64)
        expected[2 * i] = math.cos(p * inv[i])
        expected[2 * i + 1] = math.sin(p * inv[i])
        torch.testing.assert_close(out[2 * i], expected)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

positions_st = st.integers(-(2**16), 2**16)


@FAST
@given(
    dim=st.sampled_from([2, 4, 16, 64]),
    layout=st.sampled_from(["half", "interleaved"]),
    p=positions_st,
    seed=st.integers(0, 2**16),
)
def test_keeps_norms(dim, layout, p, seed):
    x = randn(5, dim, dtype=torch.float64, seed=seed)
    out = apply_rope(x, torch.tensor(p), layout=layout)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=0)


@FAST
@given(
    m=positions_st,
    n=positions_st,
    shift=positions_st,
    layout=st.sampled_from(["half", "interleaved"]),
    scaling=st.sampled_from(SCALINGS),
    seed=st.integers(0, 2**16),
)
def test_dot_product_depends_only_on_offset(m, n, shift, layout, scaling, seed):
    q, k = randn(2, 32, dtype=torch.float64, seed=seed)
    kw = {"layout": layout, "scaling": scaling}
    pos = torch.tensor
    score = apply_rope(q, pos(m), **kw) @ apply_rope(k, pos(n), **kw)
    shifted = apply_rope(q, pos(m + shift), **kw) @ apply_rope(k, pos(n + shift), **kw)
    assert shifted.item() == pytest.approx(score.item(), rel=1e-9, abs=1e-9)
    # and it is the score of q at m - n against the unrotated key
    scale = scaling.attention_factor if isinstance(scaling, YarnScaling) else 1.0
    relative = apply_rope(q, pos(m - n), **kw) @ k * scale
    assert relative.item() == pytest.approx(score.item(), rel=1e-9, abs=1e-9)


@FAST
@given(
    p=st.floats(-1e5, 1e5, allow_nan=False),
    layout=st.sampled_from(["half", "interleaved"]),
    seed=st.integers(0, 2**16),
)
def test_rotating_back_is_the_identity(p, layout, seed):
    x = randn(3, 16, dtype=torch.float64, seed=seed)
    p = torch.tensor(p, dtype=torch.float64)
    back = apply_rope(apply_rope(x, p, layout=layout), -p, layout=layout)
    torch.testing.assert_close(back, x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dim", [2, 6, 64])
def test_half_and_interleaved_are_one_permutation_apart(dim):
    # apply_rope(x, "half") == apply_rope(x[..., perm], "interleaved")[..., argsort(perm)]
    # with perm = [0, h, 1, h+1, ...]: Hugging Face's permutation of Meta's q/k weights.
    perm = half_to_interleaved(dim)
    inverse = torch.argsort(perm)
    x = randn(4, 9, dim)
    positions = torch.arange(9) * 11
    half = apply_rope(x, positions, layout="half")
    interleaved = apply_rope(x[..., perm], positions, layout="interleaved")
    torch.testing.assert_close(interleaved[..., inverse], half, rtol=0, atol=0)
    if dim > 2:  # a different pairing: without the permutation they differ
        assert not torch.allclose(apply_rope(x, positions, layout="interleaved"), half)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("dim", "rotary_dim"), [(64, 16), (64, 64), (96, 24), (256, 64), (8, 2)])
def test_rotary_dim_rotates_the_head_and_passes_the_tail(dim, rotary_dim, layout):
    x = randn(2, 5, dim)
    positions = torch.arange(5) + 100
    out = apply_rope(x, positions, layout=layout, rotary_dim=rotary_dim)
    assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])
    head = apply_rope(x[..., :rotary_dim], positions, layout=layout)
    torch.testing.assert_close(out[..., :rotary_dim], head, rtol=0, atol=0)
    # the frequencies are those of rope_frequencies(rotary_dim), paired i with i + rotary_dim/2
    reference = reference_half if layout == "half" else reference_interleaved
    expected = reference(x[..., :rotary_dim], positions, rope_frequencies(rotary_dim))
    torch.testing.assert_close(out[..., :rotary_dim].double(), expected, rtol=1e-4, atol=1e-4)


def test_positions_broadcast():
    x = randn(2, 3, 5, 8)
    full = torch.arange(5).expand(2, 3, 5) + torch.tensor([0, 10])[:, None, None]
    expected = apply_rope(x, full)
    torch.testing.assert_close(apply_rope(x, full[:, :1, :]), expected, rtol=0, atol=0)  # (B, 1, S)
    torch.testing.assert_close(apply_rope(x[:1], torch.arange(5)), expected[:1], rtol=0, atol=0)
    scalar = apply_rope(x, torch.tensor(7))
    torch.testing.assert_close(scalar, apply_rope(x, torch.full((2, 3, 5), 7)), rtol=0, atol=0)


def test_empty_sequence():
    x = torch.empty(2, 3, 0, 8)
    assert apply_rope(x, torch.arange(0)).shape == (2, 3, 0, 8)
    q, k = RotaryEmbedding(8)(x, x[:, :1], torch.arange(0))
    assert q.shape == (2, 3, 0, 8) and k.shape == (2, 1, 0, 8)


def test_yarn_attention_factor_scales_norms():
    scaling = YarnScaling(16.0, 128)
    factor = 0.1 * math.log(16.0) + 1
    x = randn(4, 50, 32, dtype=torch.float64)
    out = apply_rope(x, torch.arange(50), scaling=scaling)
    torch.testing.assert_close(out.norm(dim=-1), factor * x.norm(dim=-1), rtol=1e-12, atol=0)
    # and no attention factor for the other scalings, or for YaRN with factor <= 1
    for other in (LinearScaling(16.0), NTKScaling(16.0), Llama3Scaling(), YarnScaling(1.0, 128)):
        out = apply_rope(x, torch.arange(50), scaling=other)
        torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=0)


# ---------------------------------------------------------------------------
# dtypes and accuracy
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [
        (torch.float64, 1e-13),
        # float32 angles p * theta: up to half an ulp of 63 rad, times |x| <= 4
        (torch.float32, 4 * 63 * 2**-24),
        # half precision: rotated in float32 and rounded once, so within half an ulp;
        # rotating in the low precision itself (cos, sin cast first) gives 1.2-1.6 ulp
        (torch.float16, 0.6 * torch.finfo(torch.float16).eps),
        (torch.bfloat16, 0.6 * torch.finfo(torch.bfloat16).eps),
    ],
)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_dtypes_keep_dtype_and_accuracy(dtype, tolerance, layout):
    x = randn(2, 4, 64, 64, dtype=dtype)
    positions = torch.arange(64)
    reference = reference_half if layout == "half" else reference_interleaved
    expected = reference(x.double(), positions, rope_frequencies(64))  # exact rotation of x
    out = apply_rope(x, positions, layout=layout)
    assert out.dtype == dtype
    err = ((out.double() - expected).abs() / expected.abs().clamp_min(1.0)).max().item()
    assert err < tolerance
    q, _ = RotaryEmbedding(64, layout=layout)(x, x, positions)
    assert q.dtype == dtype
    torch.testing.assert_close(q, out, rtol=0, atol=0)


def test_large_positions_float32_angle_error():
    # angles are formed in float32: the error grows like ulp(p * theta) ~ p * 6e-8
    x = randn(1, 2**12, 64)
    positions = torch.arange(2**20 - 2**12, 2**20)
    expected = reference_half(x, positions, rope_frequencies(64))
    err = (apply_rope(x, positions).double() - expected).abs().max().item()
    assert err < 2**20 * 2**-24 * 4
    # float64 positions form float64 angles: far more accurate
    out = apply_rope(x, positions.double())
    assert (out.double() - expected).abs().max().item() < 2e-6


# ---------------------------------------------------------------------------
# RotaryEmbedding
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scaling", SCALINGS, ids=repr)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_module_equals_function_with_gqa(layout, scaling):
    rope = RotaryEmbedding(32, base=500.0, layout=layout, scaling=scaling)
    q = randn(2, 8, 20, 32, seed=1)
    k = randn(2, 2, 20, 32, seed=2)  # grouped-query attention: 2 key heads for 8 query heads
    positions = (torch.arange(20) + torch.tensor([0, 300])[:, None])[:, None, :]  # (B, 1, S)
    rq, rk = rope(q, k, positions)
    kw = {"base": 500.0, "layout": layout, "scaling": scaling}
    torch.testing.assert_close(rq, apply_rope(q, positions, **kw), rtol=0, atol=0)
    torch.testing.assert_close(rk, apply_rope(k, positions, **kw), rtol=0, atol=0)


def test_module_cache_grows_geometrically_and_stays_exact():
    rope = RotaryEmbedding(16)
    start = rope.cos_cached.shape[0]
    assert rope.sin_cached.shape == (start, 8)
    q = randn(1, 2, 10, 16)
    rope(q, q, torch.arange(10))
    assert rope.cos_cached.shape[0] == start  # covered already
    for top, rows in [(start + 1, 2 * start), (5 * start, 5 * start), (5 * start + 1, 10 * start)]:
        positions = torch.arange(top - 10, top)
        rq, _ = rope(q, q, positions)
        assert rope.cos_cached.shape[0] == rows
        torch.testing.assert_close(rq, apply_rope(q, positions), rtol=0, atol=0)
    # a later small request is still right
    torch.testing.assert_close(rope(q, q, torch.arange(10))[0], apply_rope(q, torch.arange(10)))
    assert rope.state_dict() == {}


def test_module_partial_rotation_by_larger_heads():
    rope = RotaryEmbedding(16, layout="interleaved")
    q = randn(2, 4, 6, 64)
    k = randn(2, 1, 6, 48)
    positions = torch.arange(6)
    rq, rk = rope(q, k, positions)
    torch.testing.assert_close(rq, apply_rope(q, positions, rotary_dim=16, layout="interleaved"))
    torch.testing.assert_close(rk, apply_rope(k, positions, rotary_dim=16, layout="interleaved"))
    assert torch.equal(rq[..., 16:], q[..., 16:])


def test_module_direct_paths_equal_function():
    rope = RotaryEmbedding(16, scaling=YarnScaling(4.0, 32))
    q = randn(3, 5, 16)
    kw = {"scaling": YarnScaling(4.0, 32)}
    for positions in (
        torch.tensor([-3, 0, 5, 1000, 7]),  # negative: computed directly
        torch.tensor([0.5, 1.25, -2.0, 3.0, 1e6]),  # fractional
        torch.tensor([1, 2, 3, 4, 2**21]),  # beyond the cache bound
    ):
        rq, rk = rope(q, q, positions)
        torch.testing.assert_close(rq, apply_rope(q, positions, **kw), rtol=0, atol=0)
        torch.testing.assert_close(rk, rq, rtol=0, atol=0)
    assert rope.cos_cached.shape[0] == RotaryEmbedding.initial_cache_positions
    # float64 inputs take the float64 direct path
    q64 = q.double()
    rq, _ = rope(q64, q64, torch.arange(5))
    assert rq.dtype == torch.float64
    torch.testing.assert_close(rq, apply_rope(q64, torch.arange(5), **kw), rtol=0, atol=0)


def test_module_huge_position_allocates_nothing_large():
    rope = RotaryEmbedding(64)
    q = randn(1, 2, 3, 64)
    positions = torch.tensor([0, 2**40, 2**40 + 1])
    rq, _ = rope(q, q, positions)
    assert rope.cos_cached.shape[0] == RotaryEmbedding.initial_cache_positions
    assert torch.isfinite(rq).all()
    torch.testing.assert_close(rq, apply_rope(q, positions), rtol=0, atol=0)
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))


def test_module_on_meta_device_and_rebuilt():
    with torch.device("meta"):
        rope = RotaryEmbedding(32, scaling=Llama3Scaling(8.0, 1.0, 4.0, 64))
    assert rope.cos_cached.is_meta and rope.sin_cached.is_meta
    assert rope.cos_cached.shape == (RotaryEmbedding.initial_cache_positions, 16)
    rope.to_empty(device="cpu")  # uninitialised memory: must not be used
    q = randn(2, 4, 10, 32)
    positions = torch.arange(10)
    rq, _ = rope(q, q, positions)
    expected = apply_rope(q, positions, scaling=Llama3Scaling(8.0, 1.0, 4.0, 64))
    torch.testing.assert_close(rq, expected, rtol=0, atol=0)
    assert rope.cos_cached.device.type == "cpu"


@FAST
@given(
    positions=st.lists(st.integers(0, 3000), min_size=1, max_size=40),
    layout=st.sampled_from(["half", "interleaved"]),
)
def test_module_cache_equals_direct_for_any_positions(positions, layout):
    rope = RotaryEmbedding(16, layout=layout, scaling=YarnScaling(8.0, 256))
    q = randn(3, len(positions), 24)
    positions = torch.tensor(positions)
    rq, _ = rope(q, q, positions)
    expected = apply_rope(q, positions, layout=layout, scaling=YarnScaling(8.0, 256), rotary_dim=16)
    torch.testing.assert_close(rq, expected, rtol=0, atol=0)


def test_module_with_meta_inputs_infers_shapes():
    with torch.device("meta"):
        rope = RotaryEmbedding(16)
        q, k = torch.empty(2, 8, 5, 32), torch.empty(2, 2, 5, 32)
        rq, rk = rope(q, k, torch.arange(5))
    assert rq.is_meta and rq.shape == q.shape and rk.shape == k.shape


def test_module_to_empty_never_leaves_garbage_in_the_cache():
    rope = RotaryEmbedding(32)
    q = randn(2, 10, 32)
    positions = torch.arange(300, 310)
    expected = apply_rope(q, positions)
    rope(q, q, positions)  # grows the cache to 512 rows
    assert dict(rope.named_buffers()) == {} and dict(rope.named_parameters()) == {}
    rope.to_empty(device="cpu")  # fresh, uninitialised storage for buffers: the cache is none
    assert rope.rot_cached.shape == (512, 2, 32)
    torch.testing.assert_close(rope(q, q, positions)[0], expected, rtol=0, atol=0)
    fresh = RotaryEmbedding(32)
    fresh.reserve(512)
    assert torch.equal(rope.rot_cached, fresh.rot_cached)


def test_module_survives_dtype_casts():
    rope = RotaryEmbedding(32).to(torch.bfloat16)  # casts the float buffers
    q = randn(2, 10, 32)
    rq, _ = rope(q, q, torch.arange(10))
    torch.testing.assert_close(rq, apply_rope(q, torch.arange(10)), rtol=0, atol=0)
    assert rope.cos_cached.dtype == torch.float32


def test_module_repr():
    assert repr(RotaryEmbedding(8, layout="interleaved")) == (
        "RotaryEmbedding(dim=8, base=10000.0, layout='interleaved', scaling=None)"
    )


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def test_odd_last_dim():
    with pytest.raises(ValueError, match=r"^x\.shape\[-1\] must be even, got 7"):
        apply_rope(torch.randn(3, 7), torch.arange(3))


@pytest.mark.parametrize("rotary_dim", [3, 0, -2, 10, 12])
def test_bad_rotary_dim(rotary_dim):
    with pytest.raises(
        ValueError, match=r"^rotary_dim must be (an even integer in \[2, 8\]|a positive integer)"
    ):
        apply_rope(torch.randn(3, 8), torch.arange(3), rotary_dim=rotary_dim)


def test_rotary_dim_range_message():
    with pytest.raises(
        ValueError,
        match=r"^rotary_dim must be an even integer in \[2, 8\] \(x\.shape\[-1\]\), got 10$",
    ):
        apply_rope(torch.randn(3, 8), torch.arange(3), rotary_dim=10)
    with pytest.raises(TypeError, match=r"^rotary_dim must be an integer"):
        apply_rope(torch.randn(3, 8), torch.arange(3), rotary_dim=4.0)


@pytest.mark.parametrize("layout", ["neox", "Half", None])
def test_bad_layout(layout):
    with pytest.raises(ValueError, match=r"^layout must be one of 'half', 'interleaved', got"):
        apply_rope(torch.randn(3, 8), torch.arange(3), layout=layout)
    with pytest.raises(ValueError, match=r"^layout must be one of 'half', 'interleaved', got"):
        RotaryEmbedding(8, layout=layout)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64])
def test_non_float_x(dtype):
    with pytest.raises(ValueError, match=r"^x must be a floating-point tensor, got dtype"):
        apply_rope(torch.zeros(3, 8, dtype=dtype), torch.arange(3))


def test_non_tensor_inputs():
    with pytest.raises(TypeError, match=r"^x must be a torch\.Tensor"):
        apply_rope([[1.0, 2.0]], torch.arange(1))
    with pytest.raises(TypeError, match=r"^positions must be a torch\.Tensor"):
        apply_rope(torch.randn(3, 8), [0, 1, 2])
    with pytest.raises(ValueError, match=r"^positions must be an integer or floating-point tensor"):
        apply_rope(torch.randn(3, 8), torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^x must have at least one dimension"):
        apply_rope(torch.tensor(1.0), torch.tensor(0))


@pytest.mark.parametrize("shape", [(2, 5), (5, 1), (4,), (1, 2, 3, 5)])
def test_non_broadcasting_positions_have_the_hint(shape):
    x = torch.randn(2, 3, 5, 8)  # (B, H, S, D)
    with pytest.raises(
        ValueError,
        match=r"^positions of shape .* must broadcast to x\.shape\[:-1\] = \(2, 3, 5\)"
        r".*\(B, 1, S\)",
    ):
        apply_rope(x, torch.zeros(shape, dtype=torch.long))


@pytest.mark.parametrize("base", [1.0, 0.0, math.nan, -math.inf])
def test_bad_base(base):
    with pytest.raises(ValueError, match=r"^base must be a finite number greater than 1"):
        apply_rope(torch.randn(3, 8), torch.arange(3), base=base)
    with pytest.raises(ValueError, match=r"^base must be a finite number greater than 1"):
        RotaryEmbedding(8, base=base)


def test_bad_scaling_type():
    with pytest.raises(TypeError, match=r"^scaling must be None or one of"):
        apply_rope(torch.randn(3, 8), torch.arange(3), scaling={"rope_type": "yarn"})
    with pytest.raises(TypeError, match=r"^scaling must be None or one of"):
        RotaryEmbedding(8, scaling=4.0)


@pytest.mark.parametrize("dim", [7, 0, -4])
def test_module_bad_dim(dim):
    with pytest.raises(ValueError, match=r"^dim must be (even|an integer >= 2)"):
        RotaryEmbedding(dim)


def test_module_head_size_smaller_than_dim():
    rope = RotaryEmbedding(64)
    with pytest.raises(
        ValueError,
        match=r"^q must have a head size \(last dimension\) of at least dim=64, "
        r"got shape \(2, 4, 32\)",
    ):
        rope(torch.randn(2, 4, 32), torch.randn(2, 4, 64), torch.arange(4))
    with pytest.raises(ValueError, match=r"^k must have a head size .* at least dim=64"):
        rope(torch.randn(2, 4, 64), torch.randn(2, 4, 32), torch.arange(4))


def test_module_bad_inputs():
    rope = RotaryEmbedding(8)
    q = torch.randn(2, 4, 5, 8)
    with pytest.raises(ValueError, match=r"^k must be a floating-point tensor"):
        rope(q, torch.zeros(2, 1, 5, 8, dtype=torch.long), torch.arange(5))
    with pytest.raises(ValueError, match=r"must broadcast to q\.shape\[:-1\].*\(B, 1, S\)"):
        rope(q, q, torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"must broadcast to k\.shape\[:-1\]"):
        rope(q, q[:, :, :1], torch.arange(5))
