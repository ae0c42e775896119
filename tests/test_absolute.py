"""Tests of the sinusoidal encodings and the absolute embedding tables."""

from __future__ import annotations

import math

import mpmath
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import (
    LearnedPositionalEmbedding,
    SinusoidalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal,
)

FAST = settings(max_examples=40, deadline=None)


# --------------------------------------------------------------------------
# References, written from the formulas (not from posenc).


def paper_pe(p: float, d: int, base: float = 10000.0) -> list[float]:
    """Vaswani et al. (2017), section 3.5, for even ``d``, one element at a time:
    PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d))."""
    row = []
    for col in range(d):
        i = col // 2
        angle = p / base ** (2 * i / d)
        row.append(math.sin(angle) if col % 2 == 0 else math.cos(angle))
    return row


def exact_pe(
    positions: list[float], d: int, base: float = 10000.0, endpoint: bool = False
) -> torch.Tensor:
    """The interleaved encoding in 40-digit arithmetic (mpmath), as float64."""
    n = d // 2
    rows = []
    with mpmath.workdps(40):
        freqs = [
            mpmath.mpf(base) ** (-mpmath.mpf(i) / (n - 1 if endpoint else n)) for i in range(n)
        ]
        for p in positions:
            row = [0.0] * d
            for i, w in enumerate(freqs):
                angle = mpmath.mpf(p) * w
                row[2 * i] = float(mpmath.sin(angle))
                row[2 * i + 1] = float(mpmath.cos(angle))
            rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


# --------------------------------------------------------------------------
# The formula.


@pytest.mark.parametrize("d", [2, 4, 6, 16, 64])
@pytest.mark.parametrize("base", [10000.0, 500.0])
def test_interleaved_matches_the_paper_element_by_element(d: int, base: float) -> None:
    positions = [0, 1, 2, 3, 17, 100, 511, 4096, -5, -1000]
    expected = torch.tensor([paper_pe(p, d, base) for p in positions], dtype=torch.float64)
    got = sinusoidal(torch.tensor(positions), d, base=base, dtype=torch.float64)
    assert got.shape == (len(positions), d) and got.dtype == torch.float64
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [2, 8, 10, 32])
def test_concat_puts_all_sines_before_all_cosines(d: int) -> None:
    n = d // 2
    positions = [0.0, 1.0, 2.5, 77.0, -3.25, 12345.0]
    expected = torch.zeros(len(positions), d, dtype=torch.float64)
    for r, p in enumerate(positions):
        for i in range(n):
            w = 10000.0 ** (-i / n)
            expected[r, i] = math.sin(p * w)
            expected[r, n + i] = math.cos(p * w)
    got = sinusoidal(torch.tensor(positions), d, layout="concat", dtype=torch.float64)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [4, 5, 8, 33])
@pytest.mark.parametrize("base", [10000.0, 1.0e4 / 3.0])
def test_endpoint_matches_the_log_timescale_increment(d: int, base: float) -> None:
    # tensor2tensor / AllenNLP: inverse timescale i = exp(-i * log(max/min) / (n - 1)).
    n = d // 2
    increment = math.log(base) / (n - 1)
    positions = [0, 1, 9, 250, 3000]
    expected = torch.zeros(len(positions), d, dtype=torch.float64)
    for r, p in enumerate(positions):
        for i in range(n):
            inv_timescale = math.exp(-i * increment)
            expected[r, i] = math.sin(p * inv_timescale)
            expected[r, n + i] = math.cos(p * inv_timescale)
    got = sinusoidal(
        torch.tensor(positions), d, base=base, layout="concat", endpoint=True, dtype=torch.float64
    )
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    # The slowest frequency is exactly 1 / base (the sine of the last column pair).
    p = torch.tensor([1.0])
    slow = sinusoidal(p, d, base=base, layout="concat", endpoint=True, dtype=torch.float64)
    assert slow[0, n - 1].item() == pytest.approx(math.sin(1.0 / base), abs=1e-15)


@pytest.mark.parametrize("d", [1, 3, 5, 9, 65])
@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_odd_dim_leaves_the_last_column_zero(d: int, layout: str) -> None:
    positions = torch.arange(-20, 300)
    odd = sinusoidal(positions, d, layout=layout, dtype=torch.float64)
    assert odd.shape == (320, d)
    assert torch.all(odd[:, -1] == 0)
    if d > 1:  # the other columns are the encoding of dim - 1
        even = sinusoidal(positions, d - 1, layout=layout, dtype=torch.float64)
        assert torch.equal(odd[:, :-1], even)


def test_dim_one_is_all_zeros() -> None:
    assert torch.equal(sinusoidal(torch.arange(4), 1), torch.zeros(4, 1))


@pytest.mark.parametrize(
    "positions",
    [
        torch.tensor(3),
        torch.arange(6, dtype=torch.int32).reshape(2, 3),
        torch.arange(24, dtype=torch.int16).reshape(2, 3, 4),
        torch.tensor([[0.5, -1.25]], dtype=torch.float32),
        torch.tensor([7], dtype=torch.uint8),
        torch.empty(0, dtype=torch.long),
        torch.empty(2, 0, dtype=torch.long),
    ],
)
def test_any_shape_and_integer_or_float_positions(positions: torch.Tensor) -> None:
    got = sinusoidal(positions, 6, dtype=torch.float64)
    assert got.shape == (*positions.shape, 6)
    flat = positions.reshape(-1).double().tolist()
    expected = torch.tensor([paper_pe(p, 6) for p in flat], dtype=torch.float64).reshape(got.shape)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_negative_positions_flip_the_sines() -> None:
    p = torch.arange(1, 500)
    pos = sinusoidal(p, 32, dtype=torch.float64)
    neg = sinusoidal(-p, 32, dtype=torch.float64)
    torch.testing.assert_close(neg[:, 0::2], -pos[:, 0::2], rtol=0, atol=1e-12)
    torch.testing.assert_close(neg[:, 1::2], pos[:, 1::2], rtol=0, atol=1e-12)


def test_float_positions_carry_gradients() -> None:
    p = torch.tensor([0.0, 1.5, 40.0], dtype=torch.float64, requires_grad=True)
    d = 8
    sinusoidal(p, d, dtype=torch.float64).sum().backward()
    n = d // 2
    w = torch.tensor([10000.0 ** (-i / n) for i in range(n)], dtype=torch.float64)
    # d/dp [sin(p w) + cos(p w)] = w (cos(p w) - sin(p w)), summed over i.
    angle = p.detach()[:, None] * w
    expected = (w * (angle.cos() - angle.sin())).sum(-1)
    torch.testing.assert_close(p.grad, expected)


# --------------------------------------------------------------------------
# Properties.


def rotation(k: float, d: int) -> torch.Tensor:
    """R(k): block-diagonal 2x2 rotations made only from PE(k) itself.

    With s = sin(k w), c = cos(k w), the block [[c, s], [-s, c]] maps the pair
    (sin(p w), cos(p w)) to (sin((p+k) w), cos((p+k) w)).
    """
    pe_k = sinusoidal(torch.tensor(k, dtype=torch.float64), d, dtype=torch.float64)
    blocks = [
        torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        for s, c in zip(pe_k[0::2].tolist(), pe_k[1::2].tolist(), strict=True)
    ]
    return torch.block_diag(*blocks)


@FAST
@given(
    k=st.integers(-3000, 3000) | st.floats(-300.0, 300.0),
    ps=st.lists(st.integers(-(10**5), 10**5) | st.floats(-1e4, 1e4), min_size=3, max_size=6),
    half=st.integers(1, 24),
)
def test_shift_is_one_rotation_for_every_position(k: float, ps: list[float], half: int) -> None:
    d = 2 * half
    r = rotation(k, d)  # built from k only, then applied to several positions
    p = torch.tensor(ps, dtype=torch.float64)
    shifted = sinusoidal(p + k, d, dtype=torch.float64)  # (m, d)
    rotated = sinusoidal(p, d, dtype=torch.float64) @ r.T  # (m, d)
    torch.testing.assert_close(rotated, shifted, rtol=0, atol=1e-9)
    # A rotation: R(k) R(k)^T = I, so the norm of an encoding never changes.
    torch.testing.assert_close(r @ r.T, torch.eye(d, dtype=torch.float64), rtol=0, atol=1e-12)


@FAST
@given(
    p=st.integers(-(10**5), 10**5),
    q=st.integers(-(10**5), 10**5),
    shift=st.integers(-(10**5), 10**5),
    d=st.integers(2, 64),
)
def test_dot_product_depends_only_on_the_offset(p: int, q: int, shift: int, d: int) -> None:
    pe = sinusoidal(torch.tensor([p, q, p + shift, q + shift]), d, dtype=torch.float64)
    dot = pe[0] @ pe[1]
    torch.testing.assert_close(pe[2] @ pe[3], dot, rtol=0, atol=1e-9)
    # ... and equals sum_i cos((p - q) w_i).
    n = d // 2
    expected = sum(math.cos((p - q) * 10000.0 ** (-i / n)) for i in range(n))
    assert dot.item() == pytest.approx(expected, abs=1e-9)


@FAST
@given(
    positions=st.lists(st.integers(-(2**30), 2**30) | st.floats(-1e6, 1e6), min_size=1, max_size=8),
    d=st.integers(1, 80),
    endpoint=st.booleans(),
)
def test_layouts_are_one_fixed_permutation_apart(
    positions: list[float], d: int, endpoint: bool
) -> None:
    endpoint = endpoint and d >= 4
    n = d // 2
    # concat column j takes interleaved column perm[j]: sines 0, 2, 4, ..., cosines 1, 3, ...
    perm = [2 * i for i in range(n)] + [2 * i + 1 for i in range(n)] + ([d - 1] if d % 2 else [])
    p = torch.tensor(positions, dtype=torch.float64)
    inter = sinusoidal(p, d, endpoint=endpoint, dtype=torch.float64)
    concat = sinusoidal(p, d, layout="concat", endpoint=endpoint, dtype=torch.float64)
    assert torch.equal(concat, inter[:, perm])


def test_the_permutation_can_be_read_off_one_position() -> None:
    # Find, from one generic position, where each concat column sits in the
    # interleaved one; the same map must then hold for every position.
    d = 12
    generic = sinusoidal(torch.tensor([0.7312]), d, dtype=torch.float64)[0]
    concat = sinusoidal(torch.tensor([0.7312]), d, layout="concat", dtype=torch.float64)[0]
    perm = [int((generic == v).nonzero().item()) for v in concat]
    assert perm == [0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11]
    p = torch.linspace(-500, 500, 101, dtype=torch.float64)
    inter = sinusoidal(p, d, dtype=torch.float64)
    assert torch.equal(sinusoidal(p, d, layout="concat", dtype=torch.float64), inter[:, perm])


def test_frequencies_are_geometric_with_ratio_base_to_the_minus_two_over_d() -> None:
    d, base = 16, 10000.0
    # At a small position p, sin(p w) ~ p w, so asin(PE(p, 2i)) / p recovers w_i.
    p = 1e-3
    w = torch.asin(sinusoidal(torch.tensor([p]), d, dtype=torch.float64)[0, 0::2]) / p
    torch.testing.assert_close(
        w[1:] / w[:-1], torch.full((7,), base ** (-2 / d), dtype=torch.float64)
    )
    assert w[0].item() == pytest.approx(1.0)


# --------------------------------------------------------------------------
# Accuracy: angles in float64.

LARGE = [2**20, 2**20 - 1, 2**20 - 2, 2**19 + 1, 999_983, 2**18 + 3, 65_537, 12_345, 1, 0]


def sample_positions() -> list[int]:
    g = torch.Generator().manual_seed(0)
    return LARGE + torch.randint(0, 2**20 + 1, (90,), generator=g).tolist()


@pytest.mark.parametrize("base", [10000.0, 500000.0, 2.5])
def test_float32_output_within_1e6_of_exact_up_to_2_pow_20(base: float) -> None:
    positions = sample_positions()
    exact = exact_pe(positions, 64, base)
    got = sinusoidal(torch.tensor(positions), 64, base=base)
    assert got.dtype == torch.float32
    assert max_err(got, exact) <= 1e-6
    # The float64 result itself is far closer than that.
    assert (
        max_err(sinusoidal(torch.tensor(positions), 64, base=base, dtype=torch.float64), exact)
        < 1e-9
    )


@FAST
@given(
    positions=st.lists(
        st.integers(-(2**20), 2**20) | st.floats(-(2.0**20), 2.0**20), min_size=1, max_size=5
    ),
    d=st.integers(4, 48),
    base=st.floats(1.5, 1e6),
    endpoint=st.booleans(),
)
def test_random_positions_within_1e6_of_exact(
    positions: list[float], d: int, base: float, endpoint: bool
) -> None:
    d -= d % 2
    exact = exact_pe(positions, d, base, endpoint)
    p = torch.tensor(positions, dtype=torch.float64)
    assert max_err(sinusoidal(p, d, base=base, endpoint=endpoint), exact) <= 1e-6


def test_every_position_up_to_2_pow_20_within_1e6() -> None:
    # Dense: every position 0 .. 2**20 against an independent float64
    # computation (itself within 1e-9 of exact, as checked above).
    d = 8
    p = torch.arange(2**20 + 1)
    w = torch.tensor([10000.0 ** (-i / (d // 2)) for i in range(d // 2)], dtype=torch.float64)
    angle = p.double()[:, None] * w
    reference = torch.stack((angle.sin(), angle.cos()), -1).reshape(-1, d)
    assert max_err(sinusoidal(p, d), reference) <= 1e-6


def test_float32_angles_would_miss_the_bound() -> None:
    # The same formula with the angles formed in float32 is off by far more
    # than 1e-6 at large positions: this is why posenc forms them in float64.
    positions = sample_positions()
    d = 64
    exact = exact_pe(positions, d)
    w32 = torch.pow(torch.tensor(10000.0), -torch.arange(d // 2, dtype=torch.float32) / (d // 2))
    angle32 = torch.tensor(positions, dtype=torch.float32)[:, None] * w32
    naive = torch.stack((angle32.sin(), angle32.cos()), -1).reshape(-1, d)
    assert max_err(naive, exact) > 1e-3
    assert max_err(sinusoidal(torch.tensor(positions), d), exact) <= 1e-6


@pytest.mark.parametrize(
    ("dtype", "tol"),
    [(torch.float16, 2.0**-11), (torch.bfloat16, 2.0**-8), (torch.float64, 1e-9)],
)
def test_other_dtypes_round_once(dtype: torch.dtype, tol: float) -> None:
    # One rounding of the float64 value: at most half an ulp of a value in
    # [-1, 1], i.e. eps / 2 (1e-9 for float64, against the exact value).
    positions = [*LARGE, 3, 4, 5, 2047, 4096]
    got = sinusoidal(torch.tensor(positions), 32, dtype=dtype)
    assert got.dtype == dtype
    assert max_err(got, exact_pe(positions, 32)) <= tol


def test_large_positions_stay_small_in_memory() -> None:
    # 2**40 is just a number: nothing the size of 2**40 is ever built.
    p = torch.tensor([2**40, 2**40 + 1, -(2**40)])
    got = sinusoidal(p, 16, dtype=torch.float64)
    assert got.shape == (3, 16)
    # Beyond 2**20 the float64 angle's rounding grows with the position
    # (about 1e-4 at 2**40), still a faithful encoding.
    assert max_err(got, exact_pe(p.tolist(), 16)) < 1e-3


# --------------------------------------------------------------------------
# SinusoidalPositionalEncoding.


@pytest.mark.parametrize("offset", [0, 1, 37, 1000, 2**16 + 5, 2**40])
@pytest.mark.parametrize("batch_first", [True, False])
def test_encoding_module_adds_positions_offset_onwards(offset: int, batch_first: bool) -> None:
    m = SinusoidalPositionalEncoding(10, batch_first=batch_first)
    x = torch.randn(3, 7, 10)  # (b, s, d) or (s, b, d)
    seq = 7 if batch_first else 3
    pe = sinusoidal(torch.arange(offset, offset + seq), 10)  # (s, d)
    expected = x + (pe if batch_first else pe[:, None])
    torch.testing.assert_close(m(x, offset=offset), expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(m(x, offset), expected, rtol=0, atol=1e-6)


def test_encoding_module_cache_grows_geometrically_and_covers_zero_onwards() -> None:
    m = SinusoidalPositionalEncoding(6)
    assert m.cache.shape == (0, 6)  # lazily built
    sizes = []
    for step in range(3000):  # token-by-token decoding
        out = m(torch.zeros(1, 1, 6), offset=step)
        sizes.append(m.cache.shape[0])
    assert out[0, 0].tolist() == pytest.approx(sinusoidal(torch.tensor(2999), 6).tolist(), abs=1e-7)
    rebuilds = len(set(sizes))
    assert rebuilds <= 6, sorted(set(sizes))  # 256, 512, ..., 4096
    assert 3000 <= m.cache.shape[0] <= 6000
    torch.testing.assert_close(
        m.cache, sinusoidal(torch.arange(m.cache.shape[0]), 6), rtol=0, atol=1e-7
    )


def test_encoding_module_far_offset_is_computed_directly() -> None:
    m = SinusoidalPositionalEncoding(16)
    m(torch.zeros(1, 4, 16))
    rows = m.cache.shape[0]
    out = m(torch.zeros(2, 5, 16), offset=2**40)  # must not build a 2**40-row table
    assert m.cache.shape[0] == rows
    expected = sinusoidal(torch.arange(2**40, 2**40 + 5), 16)
    torch.testing.assert_close(out, expected.expand(2, 5, 16), rtol=0, atol=0)
    assert max_err(out[0], exact_pe(list(range(2**40, 2**40 + 5)), 16)) < 1e-3
    # Also past a large cache, just beyond the growth window.
    big = m.cache.shape[0] + 2**16 + 1
    m(torch.zeros(1, 1, 16), offset=big)
    assert m.cache.shape[0] == rows


def test_encoding_module_table_is_not_in_the_state_dict() -> None:
    m = SinusoidalPositionalEncoding(8, dropout=0.1)
    m(torch.zeros(2, 300, 8))
    assert m.cache.shape[0] >= 300
    # neither saved nor a buffer: DistributedDataParallel broadcasts buffers every step,
    # and caches of different lengths on different ranks would abort it (tests/test_ddp.py)
    assert dict(m.named_buffers()) == {}
    assert m.state_dict() == {}
    fresh = SinusoidalPositionalEncoding(8, dropout=0.1)
    fresh.load_state_dict(m.state_dict(), strict=True)


def test_encoding_module_dtypes() -> None:
    m = SinusoidalPositionalEncoding(12)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        x = torch.randn(2, 9, 12).to(dtype)
        out = m(x, offset=3)
        assert out.dtype == dtype
        expected = x + sinusoidal(torch.arange(3, 12), 12, dtype=dtype)
        torch.testing.assert_close(out, expected)
    # float64 input: a float64 encoding, not a float32 one widened.
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    out = m(x, offset=3)
    assert out.dtype == torch.float64
    expected = x + sinusoidal(torch.arange(3, 12), 12, dtype=torch.float64)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)
    assert m.cache.dtype == torch.float64
    # ... and the float64 cache still serves float32 input.
    x32 = torch.randn(2, 9, 12)
    torch.testing.assert_close(m(x32), x32 + sinusoidal(torch.arange(9), 12), rtol=0, atol=1e-7)


def test_encoding_module_survives_a_cast_of_its_buffers() -> None:
    m = SinusoidalPositionalEncoding(8)
    m(torch.zeros(1, 10, 8))
    m.half()  # casts the cache to float16; a float32 input must not get a float16 table
    x = torch.zeros(1, 10, 8)
    torch.testing.assert_close(m(x), sinusoidal(torch.arange(10), 8)[None], rtol=0, atol=1e-7)


@pytest.mark.parametrize(("shape", "batch_first"), [((5, 8), False), ((2, 5, 3, 8), True)])
def test_encoding_module_other_ranks(shape: tuple[int, ...], batch_first: bool) -> None:
    m = SinusoidalPositionalEncoding(8, batch_first=batch_first)
    x = torch.randn(shape)
    pe = sinusoidal(torch.arange(5), 8)
    expected = x + (pe if len(shape) == 2 else pe[:, None])
    torch.testing.assert_close(m(x), expected, rtol=0, atol=1e-6)


def test_encoding_module_empty_sequence_and_concat_endpoint() -> None:
    m = SinusoidalPositionalEncoding(9, layout="concat", endpoint=True)
    assert m(torch.zeros(3, 0, 9), offset=5).shape == (3, 0, 9)
    x = torch.randn(1, 4, 9)
    expected = x + sinusoidal(torch.arange(4), 9, layout="concat", endpoint=True)
    torch.testing.assert_close(m(x), expected, rtol=0, atol=1e-6)


def test_encoding_module_dropout() -> None:
    torch.manual_seed(0)
    m = SinusoidalPositionalEncoding(16, dropout=0.5)
    x = torch.randn(4, 32, 16)
    plain = x + sinusoidal(torch.arange(32), 16)
    out = m(x)  # training mode: each element is dropped or scaled by 1 / (1 - p)
    kept = out != 0
    assert 0.3 < kept.float().mean().item() < 0.7
    torch.testing.assert_close(out[kept], 2 * plain[kept])
    m.eval()
    torch.testing.assert_close(m(x), plain, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------
# SinusoidalEmbedding.


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
@pytest.mark.parametrize("endpoint", [False, True])
def test_embedding_table_is_the_encoding(layout: str, endpoint: bool) -> None:
    m = SinusoidalEmbedding(50, 12, layout=layout, endpoint=endpoint, base=100.0)
    positions = torch.tensor([[0, 49, 3], [7, 7, 20]])
    out = m(positions)
    assert out.shape == (2, 3, 12)
    expected = sinusoidal(positions, 12, base=100.0, layout=layout, endpoint=endpoint)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_embedding_padding_row_is_zero_and_the_rest_untouched() -> None:
    m = SinusoidalEmbedding(20, 8, padding_idx=5)
    table = m(torch.arange(20))
    assert torch.all(table[5] == 0)
    keep = [i for i in range(20) if i != 5]
    torch.testing.assert_close(table[keep], sinusoidal(torch.tensor(keep), 8), rtol=0, atol=0)


def test_embedding_learnable_scale_is_the_only_thing_trained() -> None:
    d = 16
    m = SinusoidalEmbedding(30, d, learnable_scale=True, padding_idx=0)
    params = dict(m.named_parameters())
    # [1], not 0-d: FSDP rejects scalar parameters
    assert list(params) == ["scale"] and params["scale"].shape == (1,)
    assert m.scale.item() == pytest.approx(d**-0.5)
    assert not m.table.requires_grad
    positions = torch.tensor([[1, 2, 3], [0, 29, 4]])
    out = m(positions)
    base = sinusoidal(positions, d)
    base[1, 0] = 0  # the padding row
    torch.testing.assert_close(out, base * d**-0.5)
    upstream = torch.randn_like(out)
    (out * upstream).sum().backward()
    torch.testing.assert_close(m.scale.grad, (base * upstream).sum().reshape(1))
    assert m.table.grad is None
    assert set(m.state_dict()) == {"scale"}


def test_embedding_without_scale_has_no_parameters() -> None:
    m = SinusoidalEmbedding(10, 4)
    assert list(m.parameters()) == [] and m.scale is None
    assert m.state_dict() == {}
    assert not m(torch.arange(10)).requires_grad


def test_embedding_scale_loads_from_a_checkpoint() -> None:
    a = SinusoidalEmbedding(10, 4, learnable_scale=True)
    with torch.no_grad():
        a.scale.fill_(3.0)
    b = SinusoidalEmbedding(10, 4, learnable_scale=True)
    b.load_state_dict(a.state_dict(), strict=True)
    torch.testing.assert_close(b(torch.arange(10)), 3.0 * sinusoidal(torch.arange(10), 4))


def test_embedding_loads_a_state_dict_with_a_0d_scale() -> None:
    """Earlier versions held ``scale`` as a 0-d parameter and saved it so."""
    saved = SinusoidalEmbedding(10, 4, learnable_scale=True, padding_idx=2)
    with torch.no_grad():
        saved.scale.fill_(0.37)
    old = {"scale": saved.scale.detach().clone().reshape(())}
    assert old["scale"].dim() == 0
    loaded = SinusoidalEmbedding(10, 4, learnable_scale=True, padding_idx=2)
    loaded.load_state_dict(old, strict=True)
    assert loaded.scale.shape == (1,) and loaded.scale.item() == saved.scale.item()
    positions = torch.tensor([[0, 2, 9], [5, 2, 1]])
    torch.testing.assert_close(loaded(positions), saved(positions), rtol=0, atol=0)
    expected = 0.37 * sinusoidal(positions, 4)
    expected[positions == 2] = 0
    torch.testing.assert_close(loaded(positions), expected)


def test_embedding_scale_keeps_the_table_dtype() -> None:
    # a [1] float32 scale would promote a float16 lookup; the 0-d view does not
    m = SinusoidalEmbedding(10, 4, learnable_scale=True)
    m.table = m.table.half()
    out = m(torch.arange(10))
    assert out.dtype == torch.float16 and out.shape == (10, 4)
    out.float().sum().backward()
    assert m.scale.grad.dtype == torch.float32 and m.scale.grad.shape == (1,)


@pytest.fixture
def process_group(tmp_path):
    """A single-process gloo group (world size 1) on the CPU, torn down afterwards."""
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("needs torch.distributed with gloo")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


class _ScaledHolder(torch.nn.Module):
    """A model holding a learnable-scale SinusoidalEmbedding, as a transformer's input does."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = SinusoidalEmbedding(32, 8, learnable_scale=True)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.proj(self.pos(positions))


def test_fully_shard_of_a_model_holding_a_learnable_scale(process_group) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(21)
    eager = _ScaledHolder()
    torch.manual_seed(21)
    model = _ScaledHolder()
    mesh = init_device_mesh("cpu", (1,))
    fully_shard(model.pos, mesh=mesh)  # children first, then the root
    fully_shard(model, mesh=mesh)
    positions = torch.tensor([0, 3, 31, 7, 7, 1])
    out = model(positions)
    torch.testing.assert_close(out, eager(positions), rtol=0, atol=0)
    out.square().sum().backward()
    eager(positions).square().sum().backward()
    grad = dict(model.named_parameters())["pos.scale"].grad
    assert grad is not None
    grad = grad.full_tensor() if hasattr(grad, "full_tensor") else grad
    torch.testing.assert_close(grad, eager.pos.scale.grad, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_embedding_accepts_every_integer_dtype(dtype: torch.dtype) -> None:
    m = SinusoidalEmbedding(10, 4)
    idx = torch.tensor([0, 9, 3], dtype=dtype)
    torch.testing.assert_close(m(idx), sinusoidal(idx.long(), 4), rtol=0, atol=0)
    assert m(torch.tensor(4, dtype=dtype)).shape == (4,)
    assert m(torch.empty(0, 2, dtype=dtype)).shape == (0, 2, 4)


# --------------------------------------------------------------------------
# LearnedPositionalEmbedding.


def test_learned_embedding_is_a_table_lookup_initialised_like_gpt2() -> None:
    torch.manual_seed(0)
    m = LearnedPositionalEmbedding(512, 64)
    assert abs(m.weight.std().item() - 0.02) < 0.001
    assert abs(m.weight.mean().item()) < 0.001
    positions = torch.tensor([[[0, 511]], [[5, 5]]])  # any shape
    out = m(positions)
    assert out.shape == (2, 1, 2, 64)
    assert torch.equal(out, m.weight[positions])
    assert set(m.state_dict()) == {"weight"}


def test_learned_embedding_padding_row_is_zero_without_gradient() -> None:
    m = LearnedPositionalEmbedding(8, 4, padding_idx=2)
    assert torch.all(m.weight[2] == 0)
    positions = torch.tensor([0, 2, 2, 3, 7])
    m(positions).pow(2).add(m(positions)).sum().backward()
    grad = m.weight.grad
    assert torch.all(grad[2] == 0)
    assert torch.all(grad[[0, 3, 7]] != 0)
    assert torch.all(grad[[1, 4, 5, 6]] == 0)


@pytest.mark.parametrize("bad", [-1, 8, 100])
@pytest.mark.parametrize("cls", [SinusoidalEmbedding, LearnedPositionalEmbedding])
def test_lookups_out_of_range_raise_index_error_naming_the_limit(cls: type, bad: int) -> None:
    m = cls(8, 4)
    with pytest.raises(IndexError, match=r"positions must lie in \[0, n_positions\) = \[0, 8\)"):
        m(torch.tensor([[0, 1], [bad, 2]]))
    with pytest.raises(IndexError, match=rf"got {bad}"):
        m(torch.tensor([bad]))


@pytest.mark.parametrize("cls", [SinusoidalEmbedding, LearnedPositionalEmbedding])
def test_lookups_need_integer_positions(cls: type) -> None:
    m = cls(8, 4)
    with pytest.raises(ValueError, match="positions must be an integer tensor"):
        m(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="positions must be an integer or floating-point tensor"):
        m(torch.tensor([True]))
    with pytest.raises(TypeError, match=r"positions must be a torch\.Tensor"):
        m([1, 2])


@pytest.mark.parametrize("cls", [SinusoidalEmbedding, LearnedPositionalEmbedding])
@pytest.mark.parametrize("padding_idx", [-1, 8, 9])
def test_padding_idx_outside_the_table(cls: type, padding_idx: int) -> None:
    with pytest.raises(ValueError, match=r"padding_idx must be in \[0, n_positions\) = \[0, 8\)"):
        cls(8, 4, padding_idx=padding_idx)


@pytest.mark.parametrize("cls", [SinusoidalEmbedding, LearnedPositionalEmbedding])
def test_padding_idx_type(cls: type) -> None:
    with pytest.raises(TypeError, match="padding_idx must be None or an integer"):
        cls(8, 4, padding_idx=True)
    with pytest.raises(TypeError, match="padding_idx must be None or an integer"):
        cls(8, 4, padding_idx=1.0)


# --------------------------------------------------------------------------
# Meta device.


def test_every_module_constructs_on_meta() -> None:
    with torch.device("meta"):
        modules = [
            SinusoidalPositionalEncoding(8, dropout=0.1),
            SinusoidalEmbedding(16, 8, padding_idx=0, learnable_scale=True),
            LearnedPositionalEmbedding(16, 8, padding_idx=3),
        ]
    for m in modules:
        assert all(t.device.type == "meta" for t in [*m.parameters(), *m.buffers()])
    enc, emb, learned = modules
    assert enc(torch.empty(2, 5, 8, device="meta"), offset=3).shape == (2, 5, 8)
    assert emb(torch.zeros(3, dtype=torch.long, device="meta")).shape == (3, 8)
    assert learned(torch.zeros(3, dtype=torch.long, device="meta")).shape == (3, 8)

    # Materialise, then initialise: the same as building on the CPU.
    for m in modules:
        m.to_empty(device="cpu")
        m.reset_parameters()
    x = torch.zeros(1, 4, 8)
    enc.eval()  # no dropout
    torch.testing.assert_close(enc(x), sinusoidal(torch.arange(4), 8)[None], rtol=0, atol=1e-7)
    expected = SinusoidalEmbedding(16, 8, padding_idx=0, learnable_scale=True)
    torch.testing.assert_close(emb(torch.arange(16)), expected(torch.arange(16)), rtol=0, atol=0)
    assert torch.all(learned.weight[3] == 0) and learned.weight.std().item() < 0.05


# --------------------------------------------------------------------------
# Bad arguments.


def p3() -> torch.Tensor:
    return torch.arange(3)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dim": 0}, ValueError, "dim must be a positive integer, got 0"),
        ({"dim": -4}, ValueError, "dim must be a positive integer, got -4"),
        ({"dim": 4.0}, TypeError, "dim must be an integer, got float"),
        ({"dim": True}, TypeError, "dim must be an integer, got bool"),
        ({"base": 1.0}, ValueError, "base must be a finite number greater than 1, got 1.0"),
        ({"base": 0.5}, ValueError, "base must be a finite number greater than 1"),
        ({"base": -10.0}, ValueError, "base must be a finite number greater than 1"),
        ({"base": math.nan}, ValueError, "base must be a finite number greater than 1, got nan"),
        ({"base": math.inf}, ValueError, "base must be a finite number greater than 1, got inf"),
        ({"base": "10000"}, TypeError, "base must be a real number"),
        (
            {"layout": "half"},
            ValueError,
            "layout must be one of 'interleaved', 'concat', got 'half'",
        ),
        ({"layout": None}, ValueError, "layout must be one of"),
        ({"dim": 3, "endpoint": True}, ValueError, r"dim must be >= 4 when endpoint=True.*got 3"),
        ({"dim": 2, "endpoint": True}, ValueError, r"dim must be >= 4 when endpoint=True.*got 2"),
        ({"endpoint": 1}, TypeError, "endpoint must be a bool"),
    ],
)
def test_bad_settings_everywhere(kwargs: dict, error: type, match: str) -> None:
    args = {"dim": 8, **kwargs}
    dim = args.pop("dim")
    with pytest.raises(error, match=match):
        sinusoidal(p3(), dim, **args)
    with pytest.raises(error, match=match):
        SinusoidalPositionalEncoding(dim, **args)
    with pytest.raises(error, match=match):
        SinusoidalEmbedding(10, dim, **args)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: sinusoidal([0, 1], 4), TypeError, "positions must be a torch.Tensor, got list"),
        (lambda: sinusoidal(3, 4), TypeError, "positions must be a torch.Tensor, got int"),
        (
            lambda: sinusoidal(torch.tensor([True]), 4),
            ValueError,
            "positions must be an integer or floating-point tensor, got dtype torch.bool",
        ),
        (
            lambda: sinusoidal(torch.tensor([1j]), 4),
            ValueError,
            "positions must be an integer or floating-point tensor",
        ),
        (
            lambda: sinusoidal(p3(), 4, dtype=torch.int64),
            ValueError,
            "dtype must be a floating-point torch.dtype, got torch.int64",
        ),
        (lambda: sinusoidal(p3(), 4, dtype="float32"), TypeError, "dtype must be a floating-point"),
        (
            lambda: SinusoidalEmbedding(0, 4),
            ValueError,
            "n_positions must be a positive integer, got 0",
        ),
        (
            lambda: LearnedPositionalEmbedding(-1, 4),
            ValueError,
            "n_positions must be a positive integer, got -1",
        ),
        (lambda: LearnedPositionalEmbedding(4, 0), ValueError, "dim must be a positive integer"),
        (lambda: LearnedPositionalEmbedding(4, 2.0), TypeError, "dim must be an integer"),
        (
            lambda: SinusoidalPositionalEncoding(4, dropout=1.5),
            ValueError,
            r"dropout must be a probability in \[0, 1\], got 1.5",
        ),
        (
            lambda: SinusoidalPositionalEncoding(4, dropout=math.nan),
            ValueError,
            r"dropout must be a probability in \[0, 1\], got nan",
        ),
        (
            lambda: SinusoidalPositionalEncoding(4, batch_first=None),
            TypeError,
            "batch_first must be a bool",
        ),
        (
            lambda: SinusoidalEmbedding(4, 4, learnable_scale=1),
            TypeError,
            "learnable_scale must be a bool",
        ),
    ],
)
def test_bad_arguments(call, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    ("x", "offset", "error", "match"),
    [
        (
            torch.zeros(2, 3, 8, dtype=torch.long),
            0,
            ValueError,
            "x must be a floating-point tensor",
        ),
        (
            torch.zeros(2, 3, 8, dtype=torch.bool),
            0,
            ValueError,
            "x must be a floating-point tensor",
        ),
        ([[0.0] * 8], 0, TypeError, "x must be a torch.Tensor"),
        (torch.zeros(2, 3, 7), 0, ValueError, r"x must have last dimension dim=8, got \(2, 3, 7\)"),
        (torch.zeros(8), 0, ValueError, r"x must have shape \(b, s, \.\.\., dim\), got \(8,\)"),
        (torch.zeros(3, 8), 0, ValueError, r"x must have shape \(b, s, \.\.\., dim\)"),
        (torch.zeros(2, 3, 8), -1, ValueError, "offset must be an integer >= 0, got -1"),
        (torch.zeros(2, 3, 8), 1.0, TypeError, "offset must be an integer, got float"),
        (torch.zeros(2, 3, 8), True, TypeError, "offset must be an integer, got bool"),
    ],
)
def test_bad_encoding_inputs(x, offset, error: type, match: str) -> None:
    m = SinusoidalPositionalEncoding(8)
    with pytest.raises(error, match=match):
        m(x, offset=offset)


def test_bad_encoding_input_sequence_first() -> None:
    m = SinusoidalPositionalEncoding(8, batch_first=False)
    with pytest.raises(ValueError, match=r"x must have shape \(s, \.\.\., dim\), got \(8,\)"):
        m(torch.zeros(8))
