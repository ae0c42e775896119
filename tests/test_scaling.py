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

from posenc import LinearScaling, Llama3Scaling, NTKScaling, YarnScaling, rope_frequencies

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
    dim: int, base: float, original: int, beta_fast: float, beta_slow: float
) -> list[float]:
    """YaRN's ramp over the frequency index (Peng et al. 2023, sec. 3.2, and its code).

    0 where a frequency is kept (extrapolated), 1 where it is divided by the factor.
    """

    def correction_index(rotations: float) -> float:
        # index d at which theta_d turns `rotations` times over `original` positions:
        # original * base ** (-2d / dim) / (2 pi) = rotations
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_index(beta_fast)), 0)
    high = min(math.ceil(correction_index(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    return [min(max((i - low) / (high - low), 0.0), 1.0) for i in range(dim // 2)]


def yarn_reference(
    dim: int, base: float, factor: float, original: int, beta_fast: float, beta_slow: float
) -> torch.Tensor:
    """YaRN's frequencies in float64."""
    ramp = torch.tensor(yarn_ramp(dim, base, original, beta_fast, beta_slow), dtype=torch.float64)
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
