"""RoPE frequency scalings for context extension.

Each scaling is a frozen dataclass that holds and validates its settings,
plus one pure function ``(scaling, dim, base) -> (inv_freq, attention_factor)``
registered in :data:`ROPE_PARAMETER_FUNCTIONS`. Adding a scaling is adding
a dataclass and one function to that table.

The functions reproduce, operation for operation in float32, the ``inv_freq``
that Hugging Face transformers' rope initialisation functions
(``modeling_rope_utils.py``) produce for the same settings, so a model
trained with those numerics sees the same frequencies here.

Notation: ``dim`` is the number of rotated features (even), ``h = dim // 2``
the number of frequencies, ``theta_i = base ** (-2i / dim)`` for
``i = 0 .. h-1`` the unscaled inverse frequencies, ``s`` the scaling factor.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from posenc._checks import check_base, check_even, check_positive_float, check_size

__all__ = [
    "ROPE_PARAMETER_FUNCTIONS",
    "LinearScaling",
    "Llama3Scaling",
    "NTKScaling",
    "RopeScaling",
    "YarnScaling",
    "check_scaling",
    "rope_parameters",
]


# ---------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------


def _set(obj: object, name: str, value: object) -> None:
    """Normalise a field of a frozen dataclass from ``__post_init__``."""
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class LinearScaling:
    """Position interpolation: every frequency divided by ``factor``.

    Positions are squeezed by ``s`` so that a context ``s`` times longer than
    the training context maps into the trained range of angles:
    ``theta_i' = theta_i / s``. Chen, Wong, Chen and Tian, "Extending Context
    Window of Large Language Models via Positional Interpolation", 2023
    (arXiv:2306.15595); found independently by kaiokendev (SuperHOT, 2023).
    Hugging Face ``rope_type="linear"``.

    Args:
        factor (float): the scaling factor ``s``, finite and > 0.

    Raises:
        ValueError: if ``factor`` is not finite or not > 0.
        TypeError: if ``factor`` is not a real number.
    """

    factor: float

    def __post_init__(self) -> None:
        _set(self, "factor", check_positive_float("factor", self.factor))


@dataclass(frozen=True)
class NTKScaling:
    """NTK-aware scaling: a larger base, ``base * factor ** (dim / (dim - 2))``.

    The base is raised so that the lowest frequency ``theta_{h-1}`` is
    divided by exactly ``s`` while the highest, ``theta_0 = 1``, stays; the
    frequencies in between are divided by ``s ** (2i / (dim - 2))``
    (bloc97, "NTK-Aware Scaled RoPE allows LLaMA models to have extended
    (8k+) context size without any fine-tuning", r/LocalLLaMA, 2023). This
    is the static form with a fixed factor; Hugging Face's ``"dynamic"``
    variant (emozilla) recomputes the factor from the current sequence
    length and is not provided here. For ``dim == 2`` the only frequency is
    1 whatever the base, so it is left unchanged (the exponent
    ``dim / (dim - 2)`` is undefined there).

    Args:
        factor (float): the scaling factor ``s``, finite and > 0.

    Raises:
        ValueError: if ``factor`` is not finite or not > 0.
        TypeError: if ``factor`` is not a real number.
    """

    factor: float

    def __post_init__(self) -> None:
        _set(self, "factor", check_positive_float("factor", self.factor))


@dataclass(frozen=True)
class YarnScaling:
    """YaRN: interpolate low frequencies, keep high ones, ramp in between.

    Peng, Quesnelle, Fan and Shippole, "YaRN: Efficient Context Window
    Extension of Large Language Models", 2023 (arXiv:2309.00071). Frequency
    ``i`` turns ``r_i = L * theta_i / (2 pi)`` times over the original
    context ``L``. Frequencies that turn more than ``beta_fast`` times are
    kept (extrapolated), those that turn fewer than ``beta_slow`` times are
    divided by ``s`` (interpolated), and a linear ramp over the frequency
    index blends the two in between:

    - correction index for ``r`` rotations:
      ``d(r) = dim * ln(L / (2 pi r)) / (2 ln base)``;
    - ``low = max(floor(d(beta_fast)), 0)``,
      ``high = min(ceil(d(beta_slow)), dim - 1)`` (rounded outward, as in the
      paper's code and Hugging Face's default ``truncate=True``; the upper
      clamp is ``dim - 1`` as there, although only ``h - 1`` matters);
    - ``ramp_i = clamp((i - low) / (high - low), 0, 1)`` (``high`` is nudged
      by 0.001 when ``low == high``);
    - ``theta_i' = theta_i / s * ramp_i + theta_i * (1 - ramp_i)``.

    The attention factor ``0.1 * ln(s) + 1`` (1.0 when ``s <= 1``) multiplies
    the rotated queries and keys, so the attention logits scale by its square
    (the paper's ``sqrt(1/t)``).

    Args:
        factor (float): the scaling factor ``s``, finite and > 0.
        original_max_positions (int): ``L``, the context length the model was
            trained with, >= 1.
        beta_fast (float): rotations above which a frequency is kept;
            finite, > 0 and > ``beta_slow``. Default 32.
        beta_slow (float): rotations below which a frequency is fully
            interpolated; finite and > 0. Default 1.

    Raises:
        ValueError: if a setting is out of range, or ``beta_fast <= beta_slow``.
        TypeError: if ``original_max_positions`` is not an integer, or a
            float setting is not a real number.
    """

    factor: float
    original_max_positions: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0

    def __post_init__(self) -> None:
        _set(self, "factor", check_positive_float("factor", self.factor))
        _set(
            self,
            "original_max_positions",
            check_size("original_max_positions", self.original_max_positions),
        )
        _set(self, "beta_fast", check_positive_float("beta_fast", self.beta_fast))
        _set(self, "beta_slow", check_positive_float("beta_slow", self.beta_slow))
        if self.beta_fast <= self.beta_slow:
            raise ValueError(
                f"beta_fast must be greater than beta_slow, got beta_fast={self.beta_fast}, "
                f"beta_slow={self.beta_slow}"
            )

    @property
    def attention_factor(self) -> float:
        """``0.1 * ln(factor) + 1``, or 1.0 when ``factor <= 1``."""
        return _yarn_attention_factor(self.factor)


@dataclass(frozen=True)
class Llama3Scaling:
    """Llama 3.1's frequency-dependent interpolation.

    Meta, Llama 3.1 model card and reference code (``apply_scaling`` in
    ``meta-llama/llama-models``); "The Llama 3 Herd of Models", 2024
    (arXiv:2407.21783). With wavelength ``lambda_i = 2 pi / theta_i`` and
    ``L`` the original context:

    - ``lambda_i < L / high_freq_factor`` (high frequencies): unchanged;
    - ``lambda_i > L / low_freq_factor`` (low frequencies): ``theta_i / s``;
    - otherwise ``theta_i' = (1 - g) * theta_i / s + g * theta_i`` with
      ``g = (L / lambda_i - low_freq_factor) / (high_freq_factor - low_freq_factor)``.

    The defaults are the Llama 3.1 settings (with ``base=500000``).

    Args:
        factor (float): the scaling factor ``s``, finite and > 0. Default 8.
        low_freq_factor (float): finite, > 0 and < ``high_freq_factor``.
            Default 1.
        high_freq_factor (float): finite and > 0. Default 4.
        original_max_positions (int): ``L``, >= 1. Default 8192.

    Raises:
        ValueError: if a setting is out of range, or
            ``low_freq_factor >= high_freq_factor``.
        TypeError: if ``original_max_positions`` is not an integer, or a
            float setting is not a real number.
    """

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_positions: int = 8192

    def __post_init__(self) -> None:
        _set(self, "factor", check_positive_float("factor", self.factor))
        _set(self, "low_freq_factor", check_positive_float("low_freq_factor", self.low_freq_factor))
        _set(
            self,
            "high_freq_factor",
            check_positive_float("high_freq_factor", self.high_freq_factor),
        )
        _set(
            self,
            "original_max_positions",
            check_size("original_max_positions", self.original_max_positions),
        )
        if self.low_freq_factor >= self.high_freq_factor:
            raise ValueError(
                f"low_freq_factor must be less than high_freq_factor, got "
                f"low_freq_factor={self.low_freq_factor}, high_freq_factor={self.high_freq_factor}"
            )


RopeScaling = LinearScaling | NTKScaling | YarnScaling | Llama3Scaling
"""Any of the scalings."""


# ---------------------------------------------------------------------------
# Pure functions: (scaling, dim, base) -> (inv_freq (h,) float32 on CPU, attention_factor)
# ---------------------------------------------------------------------------


def _base_powers(dim: int, base: float) -> torch.Tensor:
    """``base ** (2i / dim)`` for ``i = 0 .. dim//2 - 1``, shape ``(dim // 2,)``.

    Formed in float32 exactly as Hugging Face forms it (float32 exponent
    ``2i / dim``, float32 power), so that the inverse frequencies agree to
    the last bit rather than within a tolerance.
    """
    exponents = torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim  # (h,)
    return base**exponents


def _default_parameters(scaling: None, dim: int, base: float) -> tuple[torch.Tensor, float]:
    """Unscaled RoPE (Su et al. 2021): ``theta_i = base ** (-2i / dim)``."""
    return 1.0 / _base_powers(dim, base), 1.0


def _linear_parameters(scaling: LinearScaling, dim: int, base: float) -> tuple[torch.Tensor, float]:
    """Position interpolation: ``theta_i / s``."""
    inv_freq, _ = _default_parameters(None, dim, base)
    return inv_freq / scaling.factor, 1.0


def _ntk_parameters(scaling: NTKScaling, dim: int, base: float) -> tuple[torch.Tensor, float]:
    """NTK-aware: the unscaled formula with ``base * s ** (dim / (dim - 2))``."""
    if dim == 2:  # a single frequency, base ** 0 == 1 for every base
        return _default_parameters(None, dim, base)
    new_base = base * scaling.factor ** (dim / (dim - 2))
    return _default_parameters(None, dim, new_base)


def _yarn_attention_factor(factor: float) -> float:
    return 1.0 if factor <= 1.0 else 0.1 * math.log(factor) + 1.0


def _yarn_correction_index(rotations: float, dim: int, base: float, context: int) -> float:
    """The (fractional) frequency index that turns ``rotations`` times over ``context``."""
    return dim * math.log(context / (2 * math.pi * rotations)) / (2 * math.log(base))


def _yarn_parameters(scaling: YarnScaling, dim: int, base: float) -> tuple[torch.Tensor, float]:
    """YaRN: a ramp over the frequency index between interpolation and extrapolation."""
    context = scaling.original_max_positions
    low = math.floor(_yarn_correction_index(scaling.beta_fast, dim, base, context))
    high = math.ceil(_yarn_correction_index(scaling.beta_slow, dim, base, context))
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # a step instead of a ramp; avoids dividing by zero

    # ramp: 0 where frequencies are kept, 1 where they are divided by s; shape (h,)
    index = torch.arange(dim // 2, dtype=torch.float32, device="cpu")
    ramp = ((index - low) / (high - low)).clamp(0.0, 1.0)
    keep = 1.0 - ramp

    powers = _base_powers(dim, base)  # (h,)
    extrapolated = 1.0 / powers
    interpolated = 1.0 / (scaling.factor * powers)
    inv_freq = interpolated * (1.0 - keep) + extrapolated * keep
    return inv_freq, _yarn_attention_factor(scaling.factor)


def _llama3_parameters(scaling: Llama3Scaling, dim: int, base: float) -> tuple[torch.Tensor, float]:
    """Llama 3.1: keep high frequencies, divide low ones by s, blend the band between."""
    inv_freq, _ = _default_parameters(None, dim, base)  # (h,)
    context = scaling.original_max_positions
    low_ff, high_ff, factor = scaling.low_freq_factor, scaling.high_freq_factor, scaling.factor

    wavelength = 2 * math.pi / inv_freq
    long_wave = wavelength > context / low_ff  # low frequencies
    short_wave = wavelength < context / high_ff  # high frequencies

    # the blend weight runs from 0 at wavelength L / low_ff to 1 at L / high_ff
    smooth = (context / wavelength - low_ff) / (high_ff - low_ff)
    blended = (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
    out = torch.where(long_wave, inv_freq / factor, inv_freq)
    medium = ~long_wave & ~short_wave
    return torch.where(medium, blended, out), 1.0


ROPE_PARAMETER_FUNCTIONS: dict[type, Callable[[object, int, float], tuple[torch.Tensor, float]]] = {
    type(None): _default_parameters,
    LinearScaling: _linear_parameters,
    NTKScaling: _ntk_parameters,
    YarnScaling: _yarn_parameters,
    Llama3Scaling: _llama3_parameters,
}
"""One function per scaling type (``type(None)``: unscaled), each mapping
``(scaling, dim, base)`` to ``(inv_freq, attention_factor)`` with ``inv_freq``
a float32 CPU tensor of shape ``(dim // 2,)``."""


def check_scaling(scaling: object) -> RopeScaling | None:
    """Return ``scaling`` if it is ``None`` or one of the scaling dataclasses.

    Raises:
        TypeError: for anything else (a Hugging Face ``rope_scaling`` dict
            included: build the dataclass from it instead).
    """
    if type(scaling) not in ROPE_PARAMETER_FUNCTIONS:
        names = ", ".join(t.__name__ for t in ROPE_PARAMETER_FUNCTIONS if t is not type(None))
        raise TypeError(f"scaling must be None or one of {names}, got {type(scaling).__name__}")
    return scaling  # type: ignore[return-value]


def rope_parameters(
    dim: int, *, base: float = 10000.0, scaling: RopeScaling | None = None
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention factor of (scaled) RoPE.

    Args:
        dim (int): number of rotated features, even and >= 2.
        base (float): frequency base, finite and > 1. Default 10000.
        scaling (RopeScaling | None): a scaling, or ``None`` for plain RoPE.

    Returns:
        tuple[torch.Tensor, float]: ``inv_freq`` of shape ``(dim // 2,)``,
        float32 on the CPU, and the factor that multiplies the rotated
        vectors (1.0 except for YaRN).

    Raises:
        ValueError: if ``dim`` is odd or < 2, or ``base`` is not finite or <= 1.
        TypeError: if ``scaling`` is not ``None`` or a scaling dataclass.
    """
    dim = check_even("dim", dim)
    base = check_base(base)
    scaling = check_scaling(scaling)
    return ROPE_PARAMETER_FUNCTIONS[type(scaling)](scaling, dim, base)
