"""RoPE frequencies and their scalings against formulas rebuilt here.

Each reference below is written from the papers / model card (or, for the
float32 bit pattern, from Hugging Face's published formula) in float64
Python, independently of ``posenc.scaling``.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    RotaryEmbedding,
    YarnScaling,
    apply_rope,
    llama4_attention_temperature,
    rope_frequencies,
)

DIMS = list(range(2, 258, 2))
BASES = [10.0, 10000.0, 500000.0, 1e6]
FAST = settings(max_examples=60, deadline=None)


# ---------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------


def theta(dim: int, base: float) -> torch.Tensor:
    """Exact ``base ** (-2i / dim)`` in float64, shape ``(dim // 2,)``."""
    i = torch.arange(dim // 2, dtype=torch.float64)
    return base ** (-2 * i / dim)


def hf_default_inv_freq(dim: int, base: float) -> torch.Tensor:
    """Hugging Face's unscaled ``inv_freq`` formula, float32 as it forms it."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def yarn_ramp(
    dim: int, base: float, original: int, beta_fast: float, beta_slow: float, truncate: bool = True
) -> list[float]:
    """YaRN's ramp over the frequency index (Peng et al. 2023, sec. 3.2, and its code).

    0 where a frequency is kept (extrapolated), 1 where it is divided by the factor.
    """

    def correction_index(rotations: float) -> float:
        # index d at which theta_d turns `rotations` times over `original` positions:
        # original * base ** (-2d / dim) / (2 pi) = rotations
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_index(beta_fast), correction_index(beta_slow)
    if truncate:  # rounded outward to whole indices
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    return [min(max((i - low) / (high - low), 0.0), 1.0) for i in range(dim // 2)]


def yarn_reference(
    dim: int,
    base: float,
    factor: float,
    original: int,
    beta_fast: float,
    beta_slow: float,
    truncate: bool = True,
) -> torch.Tensor:
    """YaRN's frequencies in float64."""
    ramp = yarn_ramp(dim, base, original, beta_fast, beta_slow, truncate)
    ramp = torch.tensor(ramp, dtype=torch.float64)
    t = theta(dim, base)
    return t / factor * ramp + t * (1 - ramp)


def llama3_reference(
    dim: int, base: float, factor: float, low: float, high: float, original: int
) -> torch.Tensor:
    """Llama 3.1 ``apply_scaling`` (Meta's reference code / model card), in float64."""
    out = []
    for t in theta(dim, base).tolist():
        wavelen = 2 * math.pi / t
        if wavelen < original / high:
            out.append(t)
        elif wavelen > original / low:
            out.append(t / factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            out.append((1 - smooth) * t / factor + smooth * t)
    return torch.tensor(out, dtype=torch.float64)


def hf_style_yarn_float32(
    dim: int, base: float, factor: float, original: int, beta_fast: float, beta_slow: float
) -> torch.Tensor:
    """The YaRN blend as Hugging Face forms it in float32 (``truncate=True``)."""
    keep = 1 - torch.tensor(yarn_ramp(dim, base, original, beta_fast, beta_slow))
    powers = base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)
    return (1.0 / (factor * powers)) * (1 - keep) + (1.0 / powers) * keep


def hf_style_llama3_float32(
    dim: int, base: float, factor: float, low: float, high: float, original: int
) -> torch.Tensor:
    """The Llama 3.1 rule in float32 on Hugging Face's float32 ``inv_freq``."""
    inv = hf_default_inv_freq(dim, base)
    wavelen = 2 * math.pi / inv
    smooth = (original / wavelen - low) / (high - low)
    blended = (1 - smooth) * inv / factor + smooth * inv
    out = torch.where(wavelen > original / low, inv / factor, blended)
    return torch.where(wavelen < original / high, inv, out)


def randn64(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).abs() / b.double().abs()).max().item()


# ---------------------------------------------------------------------------
# Unscaled frequencies
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("base", BASES)
def test_frequencies_match_hugging_face_and_exact_formula(base):
    for dim in DIMS:
        inv = rope_frequencies(dim, base=base)
        assert inv.shape == (dim // 2,)
        assert inv.dtype == torch.float32
        torch.testing.assert_close(inv, hf_default_inv_freq(dim, base), rtol=1e-6, atol=0)
        assert rel_err(inv, theta(dim, base)) < 1e-6


def test_frequencies_known_values():
    torch.testing.assert_close(
        rope_frequencies(8), torch.tensor([1.0, 0.1, 0.01, 0.001]), rtol=1e-6, atol=0
    )
    assert rope_frequencies(2, base=123.0).tolist() == [1.0]


# ---------------------------------------------------------------------------
# Linear (position interpolation) and NTK-aware
# ---------------------------------------------------------------------------


@FAST
@given(
    dim=st.sampled_from(DIMS),
    base=st.sampled_from(BASES),
    factor=st.floats(0.25, 64.0),
)
def test_linear_scaling_divides_every_frequency(dim, base, factor):
    inv = rope_frequencies(dim, base=base, scaling=LinearScaling(factor))
    assert rel_err(inv, theta(dim, base) / factor) < 1e-6


@FAST
@given(
    dim=st.sampled_from(DIMS[1:]),
    base=st.sampled_from(BASES),
    factor=st.floats(0.5, 64.0),
)
def test_ntk_scaling_is_a_base_change(dim, base, factor):
    inv = rope_frequencies(dim, base=base, scaling=NTKScaling(factor))
    new_base = base * factor ** (dim / (dim - 2))
    assert rel_err(inv, theta(dim, new_base)) < 2e-6
    # the defining property: the highest frequency stays, the lowest is divided by s
    assert inv[0].item() == 1.0
    assert rel_err(inv[-1:], theta(dim, base)[-1:] / factor) < 2e-6
    # and frequency i is divided by s ** (2i / (dim - 2))
    i = torch.arange(dim // 2, dtype=torch.float64)
    assert rel_err(inv, theta(dim, base) / factor ** (2 * i / (dim - 2))) < 2e-6


def test_ntk_scaling_dim_2_keeps_the_single_frequency():
    assert rope_frequencies(2, scaling=NTKScaling(8.0)).tolist() == [1.0]


def test_linear_snapshot():
    inv = rope_frequencies(8, scaling=LinearScaling(4.0))
    torch.testing.assert_close(inv, torch.tensor([0.25, 0.025, 0.0025, 0.00025]))


# ---------------------------------------------------------------------------
# YaRN
# ---------------------------------------------------------------------------


def test_yarn_snapshot_dim128_base1e4_factor4_original4096():
    # correction indices: d(32) = 128 ln(4096 / (64 pi)) / (2 ln 1e4) = 20.944 -> floor 20,
    # d(1) = 128 ln(4096 / (2 pi)) / (2 ln 1e4) = 45.027 -> ceil 46; ramp (i - 20) / 26
    inv = rope_frequencies(128, base=10000.0, scaling=YarnScaling(4.0, 4096)).double()
    t = theta(128, 10000.0)
    assert rel_err(inv[:21], t[:21]) < 1e-6  # i <= 20: extrapolated (kept)
    assert rel_err(inv[46:], t[46:] / 4) < 1e-6  # i >= 46: interpolated (divided by 4)
    ramp = (torch.arange(21, 46, dtype=torch.float64) - 20) / 26
    assert rel_err(inv[21:46], t[21:46] / 4 * ramp + t[21:46] * (1 - ramp)) < 1e-6
    # a few values by hand: theta_i * (1 - 3 ramp / 4)
    expected = {
        21: 0.047292038501684786,  # ramp 1/26
        33: 0.005412277021000409,  # ramp 1/2: 0.625 * 10000 ** (-33/64)
        45: 0.0004294025889973583,  # ramp 25/26
        46: 0.000333380358040831,  # ramp 1
    }
    for i, value in expected.items():
        assert inv[i].item() == pytest.approx(value, rel=1e-6), i
    assert YarnScaling(4.0, 4096).attention_factor == pytest.approx(1.1386294361119890)


@FAST
@given(
    dim=st.sampled_from([8, 16, 32, 64, 80, 96, 128, 256]),
    base=st.sampled_from(BASES),
    factor=st.floats(0.5, 64.0),
    original=st.integers(1, 10**7),
    betas=st.tuples(st.floats(0.25, 64.0), st.floats(0.25, 64.0)).filter(
        lambda b: b[0] > b[1] * 1.01
    ),
)
def test_yarn_matches_paper_formula(dim, base, factor, original, betas):
    beta_fast, beta_slow = betas
    scaling = YarnScaling(factor, original, beta_fast=beta_fast, beta_slow=beta_slow)
    inv = rope_frequencies(dim, base=base, scaling=scaling)
    ref = yarn_reference(dim, base, factor, original, beta_fast, beta_slow)
    assert rel_err(inv, ref) < 2e-6
    hf = hf_style_yarn_float32(dim, base, factor, original, beta_fast, beta_slow)
    torch.testing.assert_close(inv, hf, rtol=1e-6, atol=0)
    # every frequency lies between its interpolated and its extrapolated value
    t = theta(dim, base)
    lo, hi = torch.minimum(t, t / factor), torch.maximum(t, t / factor)
    assert bool((inv.double() >= lo * (1 - 2e-6)).all() and (inv.double() <= hi * (1 + 2e-6)).all())


def test_yarn_interpolated_and_extrapolated_bands():
    # Which dims are kept and which are divided, for the DeepSeek-V3-like setting
    # dim=64, base=10000, s=40, L=4096: d(32) = 10.47 -> 10, d(1) = 22.51 -> 23.
    inv = rope_frequencies(64, scaling=YarnScaling(40.0, 4096)).double()
    t = theta(64, 10000.0)
    kept = torch.isclose(inv, t, rtol=1e-6, atol=0)
    divided = torch.isclose(inv, t / 40, rtol=1e-6, atol=0)
    assert kept.nonzero().flatten().tolist() == list(range(11))
    assert divided.nonzero().flatten().tolist() == list(range(23, 32))
    # the ramp is linear in the index in between
    gamma = (inv[11:23] - t[11:23] / 40) / (t[11:23] - t[11:23] / 40)
    torch.testing.assert_close(gamma, 1 - (torch.arange(11, 23).double() - 10) / 13)


def test_yarn_equal_bounds_become_a_step():
    # original=2: both correction indices are in (-1, 0], so low == high == 0 and the
    # ramp becomes a step at 0.001: frequency 0 kept, the others divided.
    scaling = YarnScaling(4.0, 2, beta_fast=1.0, beta_slow=0.5)
    inv = rope_frequencies(16, scaling=scaling).double()
    t = theta(16, 10000.0)
    assert rel_err(inv[:1], t[:1]) < 1e-6
    assert rel_err(inv[1:], t[1:] / 4) < 1e-6


@pytest.mark.parametrize(
    ("factor", "expected"),
    [(0.5, 1.0), (1.0, 1.0), (2.0, 0.1 * math.log(2) + 1), (40.0, 0.1 * math.log(40) + 1)],
)
def test_yarn_attention_factor(factor, expected):
    assert YarnScaling(factor, 4096).attention_factor == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------------
# Llama 3.1
# ---------------------------------------------------------------------------


def test_llama3_card_settings():
    # factor 8, low_freq_factor 1, high_freq_factor 4, original 8192, base 500000, dim 128
    inv = rope_frequencies(128, base=500000.0, scaling=Llama3Scaling()).double()
    t = theta(128, 500000.0)
    wavelen = 2 * math.pi / t
    high_band = wavelen < 8192 / 4
    low_band = wavelen > 8192 / 1
    mid_band = ~high_band & ~low_band
    assert high_band.nonzero().flatten().tolist() == list(range(29))
    assert mid_band.nonzero().flatten().tolist() == list(range(29, 35))
    assert low_band.nonzero().flatten().tolist() == list(range(35, 64))
    assert rel_err(inv[high_band], t[high_band]) < 1e-6  # high frequencies unchanged
    assert rel_err(inv[low_band], t[low_band] / 8) < 1e-6  # low frequencies divided by 8
    # the band between is strictly between the two
    assert bool((inv[mid_band] < t[mid_band]).all() and (inv[mid_band] > t[mid_band] / 8).all())
    assert rel_err(inv, llama3_reference(128, 500000.0, 8.0, 1.0, 4.0, 8192)) < 1e-6
    # hand values: g = (8192 / wavelen - 1) / 3, theta * ((1 - g) / 8 + g)
    assert inv[29].item() == pytest.approx(0.002166570763503359, rel=1e-6)
    assert inv[32].item() == pytest.approx(0.0005248461609929547, rel=1e-6)
    assert inv[34].item() == pytest.approx(0.0001785078127679964, rel=1e-6)


@FAST
@given(
    dim=st.sampled_from([8, 32, 64, 128, 256]),
    base=st.sampled_from(BASES),
    factor=st.floats(1.0, 64.0),
    freq_factors=st.tuples(st.floats(0.1, 8.0), st.floats(0.1, 8.0)).filter(
        lambda f: f[0] < f[1] * 0.99
    ),
    original=st.integers(16, 10**6),
)
def test_llama3_properties(dim, base, factor, freq_factors, original):
    low, high = freq_factors
    scaling = Llama3Scaling(factor, low, high, original)
    inv = rope_frequencies(dim, base=base, scaling=scaling).double()
    t = theta(dim, base)
    # scaled frequencies stay within [theta / factor, theta]
    assert bool((inv <= t * (1 + 2e-6)).all() and (inv >= t / factor * (1 - 2e-6)).all())
    # and a frequency never ends up above a higher one (the order of wavelengths is kept)
    assert bool((inv[1:] <= inv[:-1] * (1 + 2e-6)).all())
    # Hugging Face forms the blend in float32: equal to that within rtol 1e-6 ...
    hf = hf_style_llama3_float32(dim, base, factor, low, high, original)
    torch.testing.assert_close(inv.float(), hf, rtol=1e-6, atol=0)
    # ... and to the exact float64 rule within float32 rounding of the blend weight
    # g = (L / wavelen - low) / (high - low), whose error (a few ulps of high / (high - low))
    # the blend amplifies by up to `factor`
    ref = llama3_reference(dim, base, factor, low, high, original)
    tolerance = 1e-6 + 4 * 2**-24 * high / (high - low) * factor
    assert rel_err(inv, ref) < tolerance


# ---------------------------------------------------------------------------
# Construction checks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
@pytest.mark.parametrize(
    "make",
    [
        LinearScaling,
        NTKScaling,
        lambda f: YarnScaling(f, 4096),
        lambda f: Llama3Scaling(factor=f),
    ],
)
def test_factor_must_be_finite_and_positive(make, bad):
    with pytest.raises(ValueError, match=r"^factor must be a finite number greater than 0, got"):
        make(bad)


def test_factor_type():
    with pytest.raises(TypeError, match=r"^factor must be a real number"):
        LinearScaling("2")


@pytest.mark.parametrize(
    "make", [lambda n: YarnScaling(4.0, n), lambda n: Llama3Scaling(8.0, 1.0, 4.0, n)]
)
def test_original_max_positions_at_least_one(make):
    with pytest.raises(
        ValueError, match=r"^original_max_positions must be a positive integer, got 0"
    ):
        make(0)
    with pytest.raises(ValueError, match=r"^original_max_positions must be a positive integer"):
        make(-5)
    with pytest.raises(TypeError, match=r"^original_max_positions must be an integer"):
        make(4096.0)


def test_yarn_betas():
    with pytest.raises(
        ValueError,
        match=r"^beta_fast must be greater than beta_slow, got beta_fast=1.0, beta_slow=32.0",
    ):
        YarnScaling(4.0, 4096, beta_fast=1.0, beta_slow=32.0)
    with pytest.raises(ValueError, match=r"^beta_fast must be greater than beta_slow"):
        YarnScaling(4.0, 4096, beta_fast=2.0, beta_slow=2.0)
    with pytest.raises(ValueError, match=r"^beta_slow must be a finite number greater than 0"):
        YarnScaling(4.0, 4096, beta_slow=-1.0)
    with pytest.raises(ValueError, match=r"^beta_fast must be a finite number greater than 0"):
        YarnScaling(4.0, 4096, beta_fast=math.nan)


def test_llama3_freq_factors():
    with pytest.raises(
        ValueError,
        match=r"^low_freq_factor must be less than high_freq_factor, "
        r"got low_freq_factor=4.0, high_freq_factor=1.0",
    ):
        Llama3Scaling(low_freq_factor=4.0, high_freq_factor=1.0)
    with pytest.raises(ValueError, match=r"^low_freq_factor must be less than high_freq_factor"):
        Llama3Scaling(low_freq_factor=2.0, high_freq_factor=2.0)
    with pytest.raises(
        ValueError, match=r"^low_freq_factor must be a finite number greater than 0"
    ):
        Llama3Scaling(low_freq_factor=0.0)
    with pytest.raises(
        ValueError, match=r"^high_freq_factor must be a finite number greater than 0"
    ):
        Llama3Scaling(high_freq_factor=math.inf)


def test_scalings_are_frozen_normalised_and_comparable():
    s = YarnScaling(4, 4096)
    assert s.factor == 4.0 and isinstance(s.factor, float)
    assert s == YarnScaling(4.0, 4096) and hash(s) == hash(YarnScaling(4.0, 4096))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.factor = 2.0  # type: ignore[misc]
    assert Llama3Scaling() == Llama3Scaling(8.0, 1.0, 4.0, 8192)


# ---------------------------------------------------------------------------
# rope_frequencies' own checks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [3, 7, 129])
def test_odd_dim(dim):
    with pytest.raises(ValueError, match=rf"^dim must be even, got {dim}"):
        rope_frequencies(dim)


@pytest.mark.parametrize("dim", [0, -2])
def test_dim_too_small(dim):
    with pytest.raises(ValueError, match=r"^dim must be an integer >= 2"):
        rope_frequencies(dim)


@pytest.mark.parametrize("base", [1.0, 0.5, -10.0, math.nan, math.inf])
def test_bad_base(base):
    with pytest.raises(ValueError, match=r"^base must be a finite number greater than 1, got"):
        rope_frequencies(8, base=base)


@pytest.mark.parametrize("scaling", [{"rope_type": "linear", "factor": 2.0}, 2.0, "yarn"])
def test_unknown_scaling_type(scaling):
    with pytest.raises(
        TypeError,
        match=r"^scaling must be None or one of "
        r"LinearScaling, NTKScaling, YarnScaling, Llama3Scaling, DynamicNTKScaling, "
        r"LongRopeScaling, ProportionalScaling, got",
    ):
        rope_frequencies(8, scaling=scaling)


# ---------------------------------------------------------------------------
# Version 0.2: references in float64, written from the papers and model cards
# ---------------------------------------------------------------------------


def rotate_reference(x, positions, freqs, scale=1.0, layout="half"):
    """Rotate pair ``i`` of ``x`` by ``positions * freqs[i]``, one pair at a time, in float64.

    ``freqs`` has shape ``(..., h)`` broadcasting against ``positions[..., None]``.
    """
    x = x.double()
    h = x.shape[-1] // 2
    angles = positions.double()[..., None] * freqs.double()  # (..., h)
    out = x.clone()
    for i in range(h):
        a, b = (i, i + h) if layout == "half" else (2 * i, 2 * i + 1)
        c, s = angles[..., i].cos(), angles[..., i].sin()
        out[..., a] = x[..., a] * c - x[..., b] * s
        out[..., b] = x[..., b] * c + x[..., a] * s
    return out * scale


def dynamic_reference(dim, base, factor, original, n):
    """emozilla's dynamic NTK in float64: the NTK-aware base for ``s n / L - (s - 1)``."""
    if n <= original:
        return theta(dim, base)
    effective = factor * n / original - (factor - 1)
    return theta(dim, base * effective ** (dim / (dim - 2)))


# ---------------------------------------------------------------------------
# Dynamic NTK
# ---------------------------------------------------------------------------


def test_dynamic_ntk_by_hand():
    # s = 2, L = 100, n = 200: factor 2 * 2 - 1 = 3, base 10000 * 3 ** (4 / 2) = 90000,
    # frequencies 1 and 90000 ** -0.5 = 1 / 300
    inv = rope_frequencies(4, scaling=DynamicNTKScaling(2.0, 100), seq_len=200)
    assert inv[0].item() == 1.0
    assert inv[1].item() == pytest.approx(1 / 300, rel=1e-6)
    # at and below the original length: the unscaled frequencies, bit for bit
    for n in [0, 1, 99, 100]:
        assert torch.equal(
            rope_frequencies(4, scaling=DynamicNTKScaling(2.0, 100), seq_len=n),
            rope_frequencies(4),
        )


@FAST
@given(
    dim=st.sampled_from(DIMS[1:]),
    base=st.sampled_from(BASES),
    factor=st.floats(0.5, 64.0),
    original=st.integers(1, 10000),
    n=st.integers(0, 100000),
)
def test_dynamic_ntk_matches_formula(dim, base, factor, original, n):
    scaling = DynamicNTKScaling(factor, original)
    inv = rope_frequencies(dim, base=base, scaling=scaling, seq_len=n)
    assert rel_err(inv, dynamic_reference(dim, base, factor, original, n)) < 2e-6


@pytest.mark.parametrize("n", [300, 1000, 12345])
def test_dynamic_ntk_is_static_ntk_with_the_length_factor(n):
    dim, factor, original = 64, 4.0, 256
    dynamic = rope_frequencies(64, scaling=DynamicNTKScaling(factor, original), seq_len=n)
    static = rope_frequencies(dim, scaling=NTKScaling(factor * n / original - (factor - 1)))
    torch.testing.assert_close(dynamic, static, rtol=1e-6, atol=0)


def test_dynamic_ntk_dim_2_keeps_the_single_frequency():
    assert rope_frequencies(2, scaling=DynamicNTKScaling(8.0, 4), seq_len=100).tolist() == [1.0]


def test_dynamic_ntk_length_from_positions():
    scaling = DynamicNTKScaling(4.0, 64)
    x = randn64(2, 3, 5, 16)
    for positions in [
        torch.arange(5),
        torch.tensor([0, 7, 63, 2, 1]),
        torch.tensor([3, 300, 1, 2, 0]),
    ]:
        n = int(positions.max()) + 1
        expected = rotate_reference(x, positions, dynamic_reference(16, 10000.0, 4.0, 64, n))
        got = apply_rope(x, positions, scaling=scaling)
        # float32 frequencies (relative error ~6e-8) times positions up to 300
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=3e-5)
        # the module, on its cache (n <= 64) or directly (n > 64)
        q, k = RotaryEmbedding(16, scaling=scaling)(x, x.flip(0), positions)
        torch.testing.assert_close(q, got, rtol=0, atol=1e-12)
        torch.testing.assert_close(k, apply_rope(x.flip(0), positions, scaling=scaling))
    # below the original length: plain RoPE
    assert torch.equal(
        apply_rope(x, torch.arange(5), scaling=scaling), apply_rope(x, torch.arange(5))
    )


def test_explicit_seq_len_overrides_the_positions():
    scaling = DynamicNTKScaling(4.0, 64)
    x = randn64(1, 5, 16)
    positions = torch.arange(5)  # largest + 1 = 5, but the sequence is 1000 long (a KV cache)
    expected = rotate_reference(x, positions, dynamic_reference(16, 10000.0, 4.0, 64, 1000))
    torch.testing.assert_close(apply_rope(x, positions, scaling=scaling, seq_len=1000), expected)
    q, _ = RotaryEmbedding(16, scaling=scaling)(x, x, positions, seq_len=1000)
    torch.testing.assert_close(q, expected)
    # ignored by scalings that do not depend on the length
    assert torch.equal(apply_rope(x, positions, seq_len=1000), apply_rope(x, positions))


def test_length_dependent_module_keeps_dtype_and_float32_cache():
    scaling = DynamicNTKScaling(2.0, 32)
    rope = RotaryEmbedding(8, scaling=scaling)
    for dtype in [torch.float16, torch.bfloat16, torch.float32, torch.float64]:
        x = randn64(1, 2, 40, 8).to(dtype)
        q, k = rope(x, x, torch.arange(40))
        assert q.dtype == k.dtype == dtype
        torch.testing.assert_close(q, apply_rope(x, torch.arange(40), scaling=scaling))


def test_length_dependent_on_meta_infers_shapes():
    with torch.device("meta"):
        x = torch.empty(2, 3, 7, 16)
        out = apply_rope(x, torch.arange(7), scaling=DynamicNTKScaling(2.0, 4))
        q, k = RotaryEmbedding(16, scaling=LongRopeScaling([1.0] * 8, [2.0] * 8, 4, factor=2.0))(
            x, x, torch.arange(7)
        )
    assert out.shape == q.shape == k.shape == x.shape and out.device.type == "meta"


# ---------------------------------------------------------------------------
# LongRoPE
# ---------------------------------------------------------------------------


def longrope_lists(h, seed=0):
    g = torch.Generator().manual_seed(seed)
    short = (1 + 0.2 * torch.rand(h, generator=g, dtype=torch.float64)).tolist()
    long = (1 + 30 * torch.rand(h, generator=g, dtype=torch.float64)).tolist()
    return short, long


def test_longrope_phi3_attention_factor_by_hand():
    # Phi-3-mini-128k: L = 4096, 131072 / 4096 = 32: sqrt(1 + ln 32 / ln 4096) = sqrt(1 + 5/12)
    short, long = longrope_lists(48)
    expected = math.sqrt(17 / 12)
    assert LongRopeScaling(short, long, 4096, max_positions=131072).attention_factor == (
        pytest.approx(expected, rel=1e-15)
    )
    assert LongRopeScaling(short, long, 4096, factor=32).attention_factor == pytest.approx(
        expected, rel=1e-15
    )
    s = LongRopeScaling(short, long, 4096, max_positions=131072)
    assert s.factor == 32.0
    # factor <= 1: no attention scaling; an explicit attention factor wins
    assert LongRopeScaling(short, long, 4096, factor=1.0).attention_factor == 1.0
    assert LongRopeScaling(short, long, 4096, factor=0.5).attention_factor == 1.0
    assert (
        LongRopeScaling(short, long, 4096, factor=32, attention_factor=1.5).attention_factor == 1.5
    )
    # an explicit factor wins over max_positions, as in Hugging Face
    assert LongRopeScaling(short, long, 4096, factor=4, max_positions=131072).factor == 4.0


@pytest.mark.parametrize("dim", [2, 16, 96, 128])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_longrope_matches_formula(dim, base):
    short, long = longrope_lists(dim // 2, seed=dim)
    scaling = LongRopeScaling(short, long, 1000, factor=8.0)
    t = theta(dim, base)
    for n in [0, 1, 999, 1000]:
        inv = rope_frequencies(dim, base=base, scaling=scaling, seq_len=n)
        assert rel_err(inv, t / torch.tensor(short, dtype=torch.float64)) < 2e-6, n
    for n in [1001, 5000, 10**9]:
        inv = rope_frequencies(dim, base=base, scaling=scaling, seq_len=n)
        assert rel_err(inv, t / torch.tensor(long, dtype=torch.float64)) < 2e-6, n


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_longrope_rotation_and_attention_factor(layout):
    short, long = longrope_lists(8, seed=3)
    scaling = LongRopeScaling(short, long, 16, factor=4.0)
    scale = math.sqrt(1 + math.log(4.0) / math.log(16))
    x = randn64(2, 3, 20, 16)
    t = theta(16, 10000.0)
    for n in [10, 16, 17, 20]:
        positions = torch.arange(n)
        divisors = torch.tensor(long if n > 16 else short, dtype=torch.float64)
        expected = rotate_reference(x[..., :n, :], positions, t / divisors, scale, layout)
        got = apply_rope(x[..., :n, :], positions, scaling=scaling, layout=layout)
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
        xn = x[..., :n, :]
        q, _ = RotaryEmbedding(16, scaling=scaling, layout=layout)(xn, xn, positions)
        torch.testing.assert_close(q, got, rtol=0, atol=1e-12)
        # the norm of every pair grows by the attention factor, short and long alike
        torch.testing.assert_close(got.norm(dim=-1), x[..., :n, :].norm(dim=-1) * scale)


def test_longrope_with_rotary_dim_uses_rotary_dim_frequencies():
    short, long = longrope_lists(12, seed=5)
    scaling = LongRopeScaling(short, long, 8, factor=2.0)
    x = randn64(1, 10, 32)
    got = apply_rope(x, torch.arange(10), scaling=scaling, rotary_dim=24)
    freqs = theta(24, 10000.0) / torch.tensor(long, dtype=torch.float64)
    expected = rotate_reference(x[..., :24], torch.arange(10), freqs, scaling.attention_factor)
    torch.testing.assert_close(got[..., :24], expected, rtol=1e-6, atol=1e-6)
    assert torch.equal(got[..., 24:], x[..., 24:])


def test_longrope_factor_lists_must_fit_the_dimension():
    scaling = LongRopeScaling([1.0] * 8, [2.0] * 8, 64, factor=2.0)
    assert rope_frequencies(16, scaling=scaling, seq_len=0).shape == (8,)
    with pytest.raises(
        ValueError,
        match=r"^short_factor must have dim // 2 = 16 numbers \(one per frequency of the 32 "
        r"rotated features\), got 8",
    ):
        rope_frequencies(32, scaling=scaling, seq_len=0)
    with pytest.raises(ValueError, match=r"^short_factor must have dim // 2 = 4 numbers"):
        apply_rope(torch.zeros(3, 8), torch.arange(3), scaling=scaling)
    with pytest.raises(ValueError, match=r"^short_factor must have dim // 2 = 12 numbers"):
        apply_rope(torch.zeros(3, 32), torch.arange(3), scaling=scaling, rotary_dim=24)
    with pytest.raises(ValueError, match=r"^short_factor must have dim // 2 = 4 numbers"):
        RotaryEmbedding(8, scaling=scaling)


def test_longrope_bad_settings():
    with pytest.raises(
        ValueError,
        match=r"^short_factor and long_factor must have the same length .*, got 4 and 3",
    ):
        LongRopeScaling([1.0] * 4, [1.0] * 3, 64, factor=2.0)
    with pytest.raises(ValueError, match=r"^short_factor must have one number per frequency"):
        LongRopeScaling([], [], 64, factor=2.0)
    for bad in [0.0, -1.0, math.nan, math.inf]:
        with pytest.raises(
            ValueError, match=r"^long_factor\[1\] must be a finite number greater than 0"
        ):
            LongRopeScaling([1.0, 1.0], [1.0, bad], 64, factor=2.0)
    with pytest.raises(TypeError, match=r"^short_factor\[0\] must be a real number"):
        LongRopeScaling(["1", 1.0], [1.0, 1.0], 64, factor=2.0)
    with pytest.raises(TypeError, match=r"^long_factor must be a sequence of numbers"):
        LongRopeScaling([1.0], 2.0, 64, factor=2.0)
    with pytest.raises(
        ValueError, match=r"^LongRopeScaling needs factor, max_positions or attention_factor"
    ):
        LongRopeScaling([1.0], [1.0], 64)
    with pytest.raises(ValueError, match=r"^original_max_positions must be >= 2 for the default"):
        LongRopeScaling([1.0], [1.0], 1, factor=2.0)
    with pytest.raises(ValueError, match=r"^original_max_positions must be a positive integer"):
        LongRopeScaling([1.0], [1.0], 0, factor=2.0)
    with pytest.raises(ValueError, match=r"^max_positions must be a positive integer"):
        LongRopeScaling([1.0], [1.0], 64, max_positions=0)
    with pytest.raises(ValueError, match=r"^attention_factor must be a finite number greater"):
        LongRopeScaling([1.0], [1.0], 64, attention_factor=-1.0)
    with pytest.raises(ValueError, match=r"^factor must be a finite number greater than 0"):
        LongRopeScaling([1.0], [1.0], 64, factor=math.nan)
    # the optional numbers are keyword-only (API contract): no silent mix-up
    with pytest.raises(TypeError, match="positional argument"):
        LongRopeScaling([1.0], [1.0], 64, 2.0)  # type: ignore[misc]


def test_longrope_is_frozen_hashable_and_normalised():
    a = LongRopeScaling([1, 2], torch.tensor([3.0, 4.0]), 64, factor=2)
    assert a.short_factor == (1.0, 2.0) and a.long_factor == (3.0, 4.0)
    assert a == LongRopeScaling((1.0, 2.0), (3.0, 4.0), 64, factor=2.0)
    assert hash(a) == hash(LongRopeScaling((1.0, 2.0), (3.0, 4.0), 64, factor=2.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.factor = 3.0  # type: ignore[misc]


# ---------------------------------------------------------------------------
# Length-dependent scalings need a length
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scaling",
    [DynamicNTKScaling(2.0, 64), LongRopeScaling([1.0] * 4, [2.0] * 4, 64, factor=2.0)],
    ids=lambda s: type(s).__name__,
)
def test_seq_len_is_required_by_length_dependent_scalings(scaling):
    name = type(scaling).__name__
    with pytest.raises(ValueError, match=rf"^seq_len is required with {name}: its frequencies"):
        rope_frequencies(8, scaling=scaling)
    for bad in [-1, -0.5, math.inf, math.nan]:
        with pytest.raises(ValueError, match=r"^seq_len must be a finite number >= 0"):
            rope_frequencies(8, scaling=scaling, seq_len=bad)
        with pytest.raises(ValueError, match=r"^seq_len must be a finite number >= 0"):
            apply_rope(torch.zeros(2, 8), torch.arange(2), scaling=scaling, seq_len=bad)
        with pytest.raises(ValueError, match=r"^seq_len must be a finite number >= 0"):
            RotaryEmbedding(8, scaling=scaling)(
                torch.zeros(2, 8), torch.zeros(2, 8), torch.arange(2), seq_len=bad
            )
    for bad in [True, "10", 10j]:
        with pytest.raises(TypeError, match=r"^seq_len must be a number"):
            rope_frequencies(8, scaling=scaling, seq_len=bad)


# ---------------------------------------------------------------------------
# YaRN with DeepSeek's mscale
# ---------------------------------------------------------------------------


def get_mscale(s, m=1.0):
    """DeepSeek-V2's ``yarn_get_mscale`` (arXiv:2405.04434, its reference code)."""
    return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0


@pytest.mark.parametrize(
    "factor, mscale, mscale_all_dim, expected",
    [
        (40.0, 1.0, 1.0, 1.0),  # DeepSeek-V3
        (40.0, 0.707, 0.707, 1.0),  # DeepSeek-V2
        (40.0, 1.0, 0.5, (0.1 * math.log(40) + 1) / (0.05 * math.log(40) + 1)),
        (4.0, 0.5, 1.0, (0.05 * math.log(4) + 1) / (0.1 * math.log(4) + 1)),
        (1.0, 2.0, 1.0, 1.0),  # factor <= 1: no scaling
        (0.5, 2.0, 1.0, 1.0),
    ],
)
def test_yarn_mscale_attention_factor(factor, mscale, mscale_all_dim, expected):
    s = YarnScaling(factor, 4096, mscale=mscale, mscale_all_dim=mscale_all_dim)
    assert s.attention_factor == pytest.approx(expected, rel=1e-15)
    assert s.attention_factor == pytest.approx(
        get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim), rel=1e-15
    )
    # the frequencies are YaRN's whatever the mscale
    assert torch.equal(
        rope_frequencies(64, scaling=s), rope_frequencies(64, scaling=YarnScaling(factor, 4096))
    )


def test_yarn_mscale_multiplies_the_rotation():
    s = YarnScaling(40.0, 64, mscale=1.0, mscale_all_dim=0.5)
    x = randn64(2, 9, 16)
    expected = rotate_reference(
        x, torch.arange(9), yarn_reference(16, 10000.0, 40.0, 64, 32.0, 1.0), s.attention_factor
    )
    got = apply_rope(x, torch.arange(9), scaling=s)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)  # float32 frequencies
    q, _ = RotaryEmbedding(16, scaling=s)(x, x, torch.arange(9))
    torch.testing.assert_close(q, got, rtol=0, atol=1e-12)


def test_yarn_mscale_errors():
    with pytest.raises(
        ValueError,
        match=r"^mscale and mscale_all_dim must be given together .*, got mscale=1.0, "
        r"mscale_all_dim=None",
    ):
        YarnScaling(4.0, 4096, mscale=1.0)
    with pytest.raises(ValueError, match=r"^mscale and mscale_all_dim must be given together"):
        YarnScaling(4.0, 4096, mscale_all_dim=1.0)
    with pytest.raises(ValueError, match=r"^mscale must be a finite number greater than 0"):
        YarnScaling(4.0, 4096, mscale=0.0, mscale_all_dim=1.0)
    with pytest.raises(ValueError, match=r"^mscale_all_dim must be a finite number greater than 0"):
        YarnScaling(4.0, 4096, mscale=1.0, mscale_all_dim=math.nan)
    assert YarnScaling(4, 4096, mscale=1, mscale_all_dim=1).mscale == 1.0


# ---------------------------------------------------------------------------
# p-RoPE (proportional)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dim, fraction, kept",
    [(512, 0.25, 64), (64, 0.3, 9), (64, 0.5, 16), (64, 1.0, 32), (8, 0.1, 0), (6, 0.75, 2)],
)
def test_proportional_keeps_the_first_frequencies(dim, fraction, kept):
    # k = int(fraction * dim // 2): 0.3 * 64 = 19.2, // 2 -> 9; 0.75 * 6 = 4.5, // 2 -> 2
    for factor in [1.0, 2.0, 8.0]:
        inv = rope_frequencies(dim, base=1e6, scaling=ProportionalScaling(fraction, factor))
        expected = theta(dim, 1e6)[:kept] / factor
        assert inv.shape == (dim // 2,)
        if kept:
            assert rel_err(inv[:kept], expected) < 1e-6
        assert torch.all(inv[kept:] == 0)


def test_proportional_leaves_the_low_pairs_unrotated():
    x = randn64(2, 7, 64)
    positions = torch.arange(7) * 10
    got = apply_rope(x, positions, scaling=ProportionalScaling(0.25))  # 8 of 32 pairs rotate
    t = theta(64, 10000.0)
    t[8:] = 0
    torch.testing.assert_close(got, rotate_reference(x, positions, t), rtol=1e-6, atol=1e-5)
    passing = torch.cat([torch.arange(8, 32), torch.arange(40, 64)])  # layout "half"
    assert torch.equal(got[..., passing], x[..., passing])
    # interleaved pairs: features 16..63 pass
    got = apply_rope(x, positions, scaling=ProportionalScaling(0.25), layout="interleaved")
    assert torch.equal(got[..., 16:], x[..., 16:])
    assert not torch.allclose(got[..., :16], x[..., :16])


def test_proportional_differs_from_rotary_dim():
    """Both rotate 8 of 32 pairs; GPT-NeoX's rotary_dim spreads them over the whole spectrum."""
    dim, base = 64, 10000.0
    p_rope = rope_frequencies(dim, base=base, scaling=ProportionalScaling(0.25))[:8]
    partial = rope_frequencies(16, base=base)  # rotary_dim=16: base ** (-2i / 16)
    assert p_rope[0] == partial[0] == 1.0
    # p-RoPE's lowest kept frequency is base ** (-14/64) = 0.133; rotary_dim's base ** (-14/16)
    assert p_rope[-1].item() == pytest.approx(base ** (-14 / 64), rel=1e-6)
    assert partial[-1].item() == pytest.approx(base ** (-14 / 16), rel=1e-6)
    # and the rotations differ: in the frequencies and in the pairs (i, i + 32) vs (i, i + 8)
    x = randn64(5, dim)
    positions = torch.arange(5)
    a = apply_rope(x, positions, scaling=ProportionalScaling(0.25))
    b = apply_rope(x, positions, rotary_dim=16)
    assert (a - b).abs().max() > 0.1
    # with the interleaved layout both rotate features 0..15; only the frequencies differ
    a = apply_rope(x, positions, scaling=ProportionalScaling(0.25), layout="interleaved")
    b = apply_rope(x, positions, rotary_dim=16, layout="interleaved")
    assert torch.equal(a[..., 16:], b[..., 16:])
    assert torch.equal(a[..., :2], b[..., :2])  # frequency 1 in both
    assert (a[..., 2:16] - b[..., 2:16]).abs().max() > 0.1


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.01, 2.0, math.nan, math.inf])
def test_proportional_fraction_range(bad):
    with pytest.raises(ValueError, match=r"^fraction must be in \(0, 1\], got"):
        ProportionalScaling(bad)


def test_proportional_bad_types_and_factor():
    with pytest.raises(TypeError, match=r"^fraction must be a real number"):
        ProportionalScaling("0.5")
    with pytest.raises(TypeError, match=r"^fraction must be a real number"):
        ProportionalScaling(True)
    with pytest.raises(ValueError, match=r"^factor must be a finite number greater than 0"):
        ProportionalScaling(0.5, 0.0)
    assert ProportionalScaling(1) == ProportionalScaling(1.0, 1.0)


# ---------------------------------------------------------------------------
# Llama 4's attention temperature
# ---------------------------------------------------------------------------


def test_llama4_temperature_by_hand():
    p = torch.tensor([0, 8190, 8191, 16382, 16383, 24575, 8192 * 10 - 1])
    t = llama4_attention_temperature(p)
    expected = [1.0, 1.0, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3)]
    expected += [1 + 0.1 * math.log(4), 1 + 0.1 * math.log(11)]
    torch.testing.assert_close(t, torch.tensor(expected, dtype=torch.float32))


@FAST
@given(
    floor_scale=st.sampled_from([1, 4, 100, 8192, 2.5]),
    attn_scale=st.floats(0.0, 2.0),
    seed=st.integers(0, 100),
)
def test_llama4_temperature_matches_formula(floor_scale, attn_scale, seed):
    g = torch.Generator().manual_seed(seed)
    p = torch.randint(0, 2**20, (50,), generator=g)
    got = llama4_attention_temperature(p, floor_scale=floor_scale, attn_scale=attn_scale)
    expected = [
        math.log(math.floor((v + 1) / floor_scale) + 1) * attn_scale + 1 for v in p.tolist()
    ]
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float32))


def test_llama4_temperature_dtype_shape_device():
    p = torch.arange(24).reshape(2, 3, 4) * 1000
    t = llama4_attention_temperature(p, floor_scale=4096)
    assert t.shape == (2, 3, 4) and t.dtype == torch.float32
    t64 = llama4_attention_temperature(p.double() + 0.5, floor_scale=4096)
    assert t64.dtype == torch.float64
    torch.testing.assert_close(t64, t.double(), rtol=1e-6, atol=0)  # + 0.5 crosses no step here
    assert llama4_attention_temperature(torch.empty(0, dtype=torch.int64)).shape == (0,)
    m = llama4_attention_temperature(torch.arange(5, device="meta"))
    assert m.device.type == "meta" and m.shape == (5,)


def test_llama4_temperature_errors():
    with pytest.raises(ValueError, match=r"^positions must be >= 0, got a minimum of -1"):
        llama4_attention_temperature(torch.tensor([3, -1]))
    with pytest.raises(ValueError, match=r"^positions must be an integer or floating-point"):
        llama4_attention_temperature(torch.tensor([True]))
    with pytest.raises(TypeError, match=r"^positions must be a torch.Tensor"):
        llama4_attention_temperature([1, 2])
    with pytest.raises(ValueError, match=r"^floor_scale must be a finite number greater than 0"):
        llama4_attention_temperature(torch.arange(3), floor_scale=0)
    for bad in [-0.1, math.nan, math.inf]:
        with pytest.raises(ValueError, match=r"^attn_scale must be a finite number >= 0"):
            llama4_attention_temperature(torch.arange(3), attn_scale=bad)
    with pytest.raises(TypeError, match=r"^attn_scale must be a real number"):
        llama4_attention_temperature(torch.arange(3), attn_scale="0.1")


# ---------------------------------------------------------------------------
# YaRN's truncate option and an explicit attention factor (version 0.3)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dim, base, factor, original", [(64, 150000.0, 32.0, 4096), (128, 1e4, 4.0, 2048)]
)
def test_yarn_without_truncation_keeps_the_fractional_range(dim, base, factor, original):
    # gpt-oss (truncate=False): the ramp runs between the unrounded correction indices
    scaling = YarnScaling(factor, original, truncate=False)
    inv = rope_frequencies(dim, base=base, scaling=scaling)
    ref = yarn_reference(dim, base, factor, original, 32.0, 1.0, truncate=False)
    assert rel_err(inv, ref) < 2e-6
    rounded = rope_frequencies(dim, base=base, scaling=YarnScaling(factor, original))
    assert not torch.equal(inv, rounded)  # the rounding matters at these settings
    # outside the ramp the two agree: kept at the top, divided at the bottom
    torch.testing.assert_close(inv[:2], rounded[:2], rtol=0, atol=0)
    torch.testing.assert_close(inv[-2:], rounded[-2:], rtol=0, atol=0)
    assert scaling.attention_factor == YarnScaling(factor, original).attention_factor


def test_yarn_explicit_attention_factor():
    s = YarnScaling(4.0, 4096, attention_factor=1.5)
    assert s.attention_factor == 1.5
    # it replaces the default and DeepSeek's ratio alike; the frequencies do not change
    assert (
        YarnScaling(4.0, 4096, mscale=1.0, mscale_all_dim=0.5, attention_factor=2).attention_factor
        == 2.0
    )
    torch.testing.assert_close(
        rope_frequencies(64, scaling=s),
        rope_frequencies(64, scaling=YarnScaling(4.0, 4096)),
        rtol=0,
        atol=0,
    )
    x = torch.randn(2, 5, 64, dtype=torch.float64)
    p = torch.arange(5)
    torch.testing.assert_close(
        apply_rope(x, p, scaling=s),
        apply_rope(x, p, scaling=YarnScaling(4.0, 4096, attention_factor=1.0)) * 1.5,
    )
    # the computed default is stored, so equal settings compare equal
    assert YarnScaling(4.0, 4096) == YarnScaling(
        4.0, 4096, attention_factor=0.1 * math.log(4.0) + 1
    )


def test_yarn_truncate_and_attention_factor_errors():
    with pytest.raises(TypeError, match=r"^truncate must be a bool, got int 0"):
        YarnScaling(4.0, 4096, truncate=0)
    with pytest.raises(
        ValueError, match=r"^attention_factor must be a finite number greater than 0"
    ):
        YarnScaling(4.0, 4096, attention_factor=0.0)
    with pytest.raises(TypeError):
        YarnScaling(4.0, 4096, 32.0, 1.0, None, None, False)  # keyword-only
