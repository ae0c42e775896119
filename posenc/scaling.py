"""RoPE frequency scalings for context extension, and Llama 4's attention temperature.

Each scaling is a frozen dataclass that holds and validates its settings,
plus one pure function
``(scaling, dim, base, seq_len) -> (inv_freq, attention_factor)``
registered in :data:`ROPE_PARAMETER_FUNCTIONS`. Adding a scaling is adding
a dataclass and one function to that table.

Two scalings depend on the length of the sequence being processed
(:class:`DynamicNTKScaling`, :class:`LongRopeScaling`); the others ignore
``seq_len``. :func:`rope_parameters` requires ``seq_len`` for the two and
raises ``ValueError`` without it; :func:`posenc.apply_rope` and
:class:`posenc.RotaryEmbedding` take it from the positions (largest position
+ 1, as Hugging Face does) unless it is given.

The functions reproduce, operation for operation in float32, the ``inv_freq``
that Hugging Face transformers' rope initialisation functions
(``modeling_rope_utils.py``) produce for the same settings when they are
called with the length as a Python number, so a model trained with those
numerics sees the same frequencies here. One exception: inside a model,
Hugging Face's ``dynamic_rope_update`` passes the length to the dynamic NTK
function as a tensor (``torch.max(position_ids) + 1``), so its new base is
formed in float32, not in Python floats as here; with transformers 5.24.0
the frequencies then differ in some pairs by one or two float32 ulps
(relative 1.4e-7 at most) at some lengths (``T = 5000`` and ``12345`` with
``s = 1``, ``12345`` with ``s = 2``) and agree bit for bit at others (``2L``,
``4L``, ``8L``, ``4097``, with ``L = 4096``).

Notation: ``dim`` is the number of rotated features (even), ``h = dim // 2``
the number of frequencies, ``theta_i = base ** (-2i / dim)`` for
``i = 0 .. h-1`` the unscaled inverse frequencies, ``s`` the scaling factor,
``L`` the original (training) context length, ``n`` the current sequence
length.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from numbers import Real

import torch

from posenc._checks import (
    check_base,
    check_bool,
    check_even,
    check_positions,
    check_positive_float,
    check_size,
)

__all__ = [
    "ROPE_PARAMETER_FUNCTIONS",
    "DynamicNTKScaling",
    "LinearScaling",
    "Llama3Scaling",
    "LongRopeScaling",
    "NTKScaling",
    "ProportionalScaling",
    "RopeScaling",
    "YarnScaling",
    "canonical_seq_len",
    "check_scaling",
    "check_seq_len",
    "is_length_dependent",
    "llama4_attention_temperature",
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
    is the static form with a fixed factor; :class:`DynamicNTKScaling` is
    Hugging Face's ``"dynamic"`` variant (emozilla), which recomputes the
    factor from the current sequence length. For ``dim == 2`` the only frequency is
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
      clamp is ``dim - 1`` as there, although only ``h - 1`` matters). With
      ``truncate=False`` (Hugging Face's option, gpt-oss's setting) the
      correction indices are not rounded: ``low = max(d(beta_fast), 0)``,
      ``high = min(d(beta_slow), dim - 1)``;
    - ``ramp_i = clamp((i - low) / (high - low), 0, 1)`` (``high`` is nudged
      by 0.001 when ``low == high``);
    - ``theta_i' = theta_i / s * ramp_i + theta_i * (1 - ramp_i)``.

    The attention factor ``0.1 * ln(s) + 1`` (1.0 when ``s <= 1``) multiplies
    the rotated queries and keys, so the attention logits scale by its square
    (the paper's ``sqrt(1/t)``). A given ``attention_factor`` replaces it
    (Hugging Face's ``attention_factor`` key), and after construction the
    field holds the factor in use.

    DeepSeek-V2 and V3 (DeepSeek-AI, arXiv:2405.04434 and arXiv:2412.19437)
    generalise it with ``get_mscale(s, m) = 0.1 * m * ln(s) + 1`` (1.0 when
    ``s <= 1``): given ``mscale`` and ``mscale_all_dim``, the attention
    factor is ``get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)``, as
    Hugging Face's ``"yarn"`` computes it (DeepSeek-V3: ``s = 40``,
    ``mscale = mscale_all_dim = 1``, so the factor is 1). DeepSeek's attention
    then multiplies its softmax scale by ``get_mscale(s, mscale_all_dim) ** 2``
    (Hugging Face ``DeepseekV3Attention``; not part of this scaling), so the
    rotary part of the logits scales by ``get_mscale(s, mscale) ** 2`` in
    all, and the part that is not rotated (multi-head latent attention's
    ``qk_nope`` features) by ``get_mscale(s, mscale_all_dim) ** 2``.

    Args:
        factor (float): the scaling factor ``s``, finite and > 0.
        original_max_positions (int): ``L``, the context length the model was
            trained with, >= 1.
        beta_fast (float): rotations above which a frequency is kept;
            finite, > 0 and > ``beta_slow``. Default 32.
        beta_slow (float): rotations below which a frequency is fully
            interpolated; finite and > 0. Default 1.
        mscale (float | None): DeepSeek's numerator ``m``; finite and > 0,
            given together with ``mscale_all_dim``. Default ``None``.
        mscale_all_dim (float | None): DeepSeek's denominator ``m``; finite
            and > 0, given together with ``mscale``. Default ``None``.
        truncate (bool): keyword-only; round the correction range outward
            (``True``, the default) or keep it fractional (``False``).
        attention_factor (float | None): keyword-only; the factor that
            multiplies the rotated vectors, finite and > 0. Default: from
            ``factor`` (and ``mscale``, ``mscale_all_dim``) as above.

    Raises:
        ValueError: if a setting is out of range, ``beta_fast <= beta_slow``,
            or only one of ``mscale`` and ``mscale_all_dim`` is given.
        TypeError: if ``original_max_positions`` is not an integer, a float
            setting is not a real number, or ``truncate`` is not a bool.
    """

    factor: float
    original_max_positions: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = field(default=True, kw_only=True)
    attention_factor: float | None = field(default=None, kw_only=True)

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
        if (self.mscale is None) != (self.mscale_all_dim is None):
            raise ValueError(
                f"mscale and mscale_all_dim must be given together (DeepSeek's attention "
                f"factor is their ratio), got mscale={self.mscale}, "
                f"mscale_all_dim={self.mscale_all_dim}"
            )
        if self.mscale is not None:
            _set(self, "mscale", check_positive_float("mscale", self.mscale))
            _set(
                self, "mscale_all_dim", check_positive_float("mscale_all_dim", self.mscale_all_dim)
            )
        _set(self, "truncate", check_bool("truncate", self.truncate))
        if self.attention_factor is not None:
            factor = check_positive_float("attention_factor", self.attention_factor)
        elif self.mscale is None:  # 0.1 ln(s) + 1
            factor = _yarn_attention_factor(self.factor)
        else:  # DeepSeek: get_mscale(s, mscale) / get_mscale(s, mscale_all_dim)
            factor = _get_mscale(self.factor, self.mscale) / _get_mscale(
                self.factor, self.mscale_all_dim
            )
        _set(self, "attention_factor", factor)


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


@dataclass(frozen=True)
class DynamicNTKScaling:
    """Dynamic NTK scaling: the NTK-aware base, recomputed from the sequence length.

    emozilla, "Dynamically Scaled RoPE further increases performance of long
    context LLaMA with zero fine-tuning", r/LocalLLaMA, 2023; Hugging Face
    ``rope_type="dynamic"`` (``_compute_dynamic_ntk_parameters``). At a
    sequence length ``n > L`` the base becomes

    ``base * (s * n / L - (s - 1)) ** (dim / (dim - 2))``,

    the base of :class:`NTKScaling` with the factor ``s * n / L - (s - 1)``,
    which grows linearly from 1 at ``n = L`` with slope ``s / L``. At
    ``n <= L`` the frequencies are the unscaled ones, so a model keeps its
    trained frequencies on short inputs. ``dim == 2`` has a single
    frequency, 1 whatever the base, and it is left unchanged.

    The length ``n`` is an argument of the frequencies:
    ``rope_frequencies(dim, scaling=..., seq_len=n)`` requires it, and
    :func:`posenc.apply_rope` and :class:`posenc.RotaryEmbedding` take it
    from their positions (largest position + 1, as Hugging Face's
    ``dynamic_rope_update`` does) unless ``seq_len`` is given. Hugging
    Face's rotary module also keeps the frequencies of the longest sequence
    it has seen until the length falls below ``L`` again; here each call
    uses its own length, as Hugging Face's frequency function does.

    Args:
        factor (float): the slope factor ``s``, finite and > 0.
        original_max_positions (int): ``L``, the context length the model was
            trained with (Hugging Face's ``max_position_embeddings``), >= 1.

    Raises:
        ValueError: if ``factor`` is not finite or not > 0, or
            ``original_max_positions < 1``.
        TypeError: if ``original_max_positions`` is not an integer, or
            ``factor`` is not a real number.
    """

    factor: float
    original_max_positions: int

    def __post_init__(self) -> None:
        _set(self, "factor", check_positive_float("factor", self.factor))
        _set(
            self,
            "original_max_positions",
            check_size("original_max_positions", self.original_max_positions),
        )


def _check_factor_list(name: str, value: object) -> tuple[float, ...]:
    """A non-empty sequence of finite numbers > 0, as a tuple of floats."""
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(
            f"{name} must be a sequence of numbers (one per frequency), got {type(value).__name__}"
        )
    items = tuple(value)
    if not items:
        raise ValueError(f"{name} must have one number per frequency, got an empty sequence")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, Real):
            raise TypeError(
                f"{name}[{i}] must be a real number, got {type(item).__name__} {item!r}"
            )
        item = float(item)
        if not math.isfinite(item) or item <= 0:
            raise ValueError(f"{name}[{i}] must be a finite number greater than 0, got {item}")
        out.append(item)
    return tuple(out)


@dataclass(frozen=True)
class LongRopeScaling:
    """LongRoPE (Phi-3): a searched divisor per frequency, one set for short inputs, one for long.

    Ding, Zhang, Zhang, Xu, Shang, Xu, Yang and Yang, "LongRoPE: Extending
    LLM Context Window Beyond 2 Million Tokens", 2024 (arXiv:2402.13753),
    as used by Phi-3 (Abdin et al., "Phi-3 Technical Report", 2024,
    arXiv:2404.14219) and Hugging Face ``rope_type="longrope"``
    (``_compute_longrope_parameters``). An evolutionary search picks one
    rescale factor ``lambda_i`` per frequency, and

    ``theta_i' = theta_i / lambda_i``,

    with ``lambda = long_factor`` when the sequence length ``n`` exceeds
    ``L`` and ``lambda = short_factor`` otherwise. The rotated queries and
    keys are multiplied by the attention factor, by default
    ``sqrt(1 + ln(s) / ln(L))`` for ``s > 1`` and 1.0 for ``s <= 1``, where
    ``s`` is the context extension factor (Phi-3-mini-128k: 131072 / 4096
    = 32). The attention factor applies to short and long inputs alike.

    The length ``n`` is an argument of the frequencies, as for
    :class:`DynamicNTKScaling`: ``rope_frequencies`` requires
    ``seq_len=n``; :func:`posenc.apply_rope` and
    :class:`posenc.RotaryEmbedding` take it from their positions (largest
    position + 1) unless it is given.

    After construction ``factor`` and ``attention_factor`` hold the values in
    use: ``factor`` defaults to ``max_positions / original_max_positions``
    (Hugging Face derives it from ``max_position_embeddings`` the same way
    when the config has no ``factor``), and ``attention_factor`` to the
    default above.

    Args:
        short_factor (Sequence[float]): ``dim // 2`` divisors for ``n <= L``,
            each finite and > 0 (``dim``: the number of rotated features).
        long_factor (Sequence[float]): ``dim // 2`` divisors for ``n > L``.
        original_max_positions (int): ``L``, the context length the model was
            pre-trained with, >= 1 (>= 2 when the default attention factor
            needs ``ln(L)``).
        factor (float | None): keyword-only, the extension factor ``s``,
            finite and > 0.
        attention_factor (float | None): keyword-only, overrides the default
            attention factor; finite and > 0.
        max_positions (int | None): keyword-only, the extended context length (Hugging
            Face's ``max_position_embeddings``), >= 1; sets ``factor`` when
            ``factor`` is not given.

    Raises:
        ValueError: if a divisor is not finite or not > 0, the two lists
            differ in length, a setting is out of range, or none of
            ``factor``, ``max_positions`` and ``attention_factor`` is given
            (the attention factor would be undefined). A list whose length is
            not ``dim // 2`` raises when the frequencies are computed, where
            ``dim`` is known.
        TypeError: if a list is not a sequence of real numbers, or an
            integer setting is not an integer.
    """

    short_factor: tuple[float, ...]
    long_factor: tuple[float, ...]
    original_max_positions: int
    # keyword-only, as in the API contract: three optional numbers in a row
    # are too easy to pass in the wrong order
    factor: float | None = field(default=None, kw_only=True)
    attention_factor: float | None = field(default=None, kw_only=True)
    max_positions: int | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        short = _check_factor_list("short_factor", self.short_factor)
        long = _check_factor_list("long_factor", self.long_factor)
        if len(short) != len(long):
            raise ValueError(
                f"short_factor and long_factor must have the same length (dim // 2, one per "
                f"frequency), got {len(short)} and {len(long)}"
            )
        _set(self, "short_factor", short)
        _set(self, "long_factor", long)
        original = check_size("original_max_positions", self.original_max_positions)
        _set(self, "original_max_positions", original)
        if self.max_positions is not None:
            _set(self, "max_positions", check_size("max_positions", self.max_positions))
        if self.factor is not None:
            _set(self, "factor", check_positive_float("factor", self.factor))
        elif self.max_positions is not None:
            _set(self, "factor", self.max_positions / original)
        if self.attention_factor is not None:
            _set(
                self,
                "attention_factor",
                check_positive_float("attention_factor", self.attention_factor),
            )
            return
        if self.factor is None:
            raise ValueError(
                "LongRopeScaling needs factor, max_positions or attention_factor to set its "
                "attention factor, got none of them (Phi-3: max_positions="
                "max_position_embeddings)"
            )
        if self.factor <= 1.0:
            _set(self, "attention_factor", 1.0)
        elif original == 1:
            raise ValueError(
                "original_max_positions must be >= 2 for the default attention factor "
                "sqrt(1 + ln(factor) / ln(original_max_positions)), got 1; give attention_factor"
            )
        else:
            _set(
                self,
                "attention_factor",
                math.sqrt(1 + math.log(self.factor) / math.log(original)),
            )


@dataclass(frozen=True)
class ProportionalScaling:
    """p-RoPE: rotate the highest frequencies only and leave the lowest pairs unrotated.

    Barbero, Vitvitskyi, Perivolaropoulos, Pascanu and Velickovic, "Round
    and Round We Go! What makes Rotary Positional Encodings useful?", 2024
    (arXiv:2410.06205); Hugging Face ``rope_type="proportional"``
    (``_compute_proportional_rope_parameters``; Gemma 4's full-attention
    layers use ``partial_rotary_factor=0.25``). Of the ``h = dim // 2``
    frequencies ``theta_i = base ** (-2i / dim)``, the first
    ``k = int(fraction * dim // 2)`` are kept, divided by ``factor``, and
    the rest are set to 0, so their pairs are never rotated: they carry
    content ("semantic channels") and no position.

    This is not the same as ``rotary_dim`` (GPT-NeoX ``rotary_pct``), which
    rotates the first ``rotary_dim`` features with the frequencies of
    ``rope_frequencies(rotary_dim)``, ``base ** (-2i / rotary_dim)``: those
    run from 1 down to ``base ** (-(rotary_dim - 2) / rotary_dim)``, close to
    the full head's lowest ``base ** (-(dim - 2) / dim)`` only for a large
    ``rotary_dim`` (``base ** -0.5`` for ``rotary_dim = 4``), whereas p-RoPE
    keeps ``theta_0 .. theta_{k-1}`` of the full ``dim`` and so drops the
    lowest frequencies. The pairs also differ: with ``layout="half"`` p-RoPE
    rotates features ``i`` and ``i + dim/2`` for ``i < k``.

    Args:
        fraction (float): the share of frequencies kept, in ``(0, 1]``
            (Hugging Face's ``partial_rotary_factor``).
        factor (float): divides the kept frequencies (position
            interpolation on top), finite and > 0. Default 1.

    Raises:
        ValueError: if ``fraction`` is outside ``(0, 1]`` or ``factor`` is
            not finite or not > 0.
        TypeError: if a setting is not a real number.
    """

    fraction: float
    factor: float = 1.0

    def __post_init__(self) -> None:
        fraction = self.fraction
        if isinstance(fraction, bool) or not isinstance(fraction, Real):
            raise TypeError(
                f"fraction must be a real number, got {type(fraction).__name__} {fraction!r}"
            )
        fraction = float(fraction)
        if not 0.0 < fraction <= 1.0:  # also rejects nan
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        _set(self, "fraction", fraction)
        _set(self, "factor", check_positive_float("factor", self.factor))


RopeScaling = (
    LinearScaling
    | NTKScaling
    | YarnScaling
    | Llama3Scaling
    | DynamicNTKScaling
    | LongRopeScaling
    | ProportionalScaling
)
"""Any of the scalings."""

# ---------------------------------------------------------------------------
# Pure functions: (scaling, dim, base, seq_len) -> (inv_freq (h,) float32 on CPU, attention_factor)
# ---------------------------------------------------------------------------

Parameters = tuple[torch.Tensor, float]


def _base_powers(dim: int, base: float) -> torch.Tensor:
    """``base ** (2i / dim)`` for ``i = 0 .. dim//2 - 1``, shape ``(dim // 2,)``.

    Formed in float32 exactly as Hugging Face forms it (float32 exponent
    ``2i / dim``, float32 power), so that the inverse frequencies agree to
    the last bit rather than within a tolerance.
    """
    exponents = torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim  # (h,)
    return base**exponents


def _default_parameters(scaling: None, dim: int, base: float, seq_len: float | None) -> Parameters:
    """Unscaled RoPE (Su et al. 2021): ``theta_i = base ** (-2i / dim)``."""
    return 1.0 / _base_powers(dim, base), 1.0


def _linear_parameters(
    scaling: LinearScaling, dim: int, base: float, seq_len: float | None
) -> Parameters:
    """Position interpolation: ``theta_i / s``."""
    inv_freq, _ = _default_parameters(None, dim, base, None)
    return inv_freq / scaling.factor, 1.0


def _ntk_parameters(
    scaling: NTKScaling, dim: int, base: float, seq_len: float | None
) -> Parameters:
    """NTK-aware: the unscaled formula with ``base * s ** (dim / (dim - 2))``."""
    if dim == 2:  # a single frequency, base ** 0 == 1 for every base
        return _default_parameters(None, dim, base, None)
    new_base = base * scaling.factor ** (dim / (dim - 2))
    return _default_parameters(None, dim, new_base, None)


def _dynamic_ntk_parameters(
    scaling: DynamicNTKScaling, dim: int, base: float, seq_len: float | None
) -> Parameters:
    """Dynamic NTK: ``base * (s n / L - (s - 1)) ** (dim / (dim - 2))`` for ``n > L``."""
    context = scaling.original_max_positions
    if dim == 2 or seq_len is None or seq_len <= context:
        return _default_parameters(None, dim, base, None)
    # as Hugging Face's init function with an int seq_len: Python floats, then
    # a float32 power (its in-model tensor seq_len forms the base in float32)
    factor = scaling.factor
    new_base = base * ((factor * seq_len / context) - (factor - 1)) ** (dim / (dim - 2))
    return _default_parameters(None, dim, new_base, None)


def _get_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's ``0.1 * m * ln(s) + 1`` (1.0 when ``s <= 1``), as DeepSeek writes it."""
    if factor <= 1.0:
        return 1.0
    return 0.1 * mscale * math.log(factor) + 1.0


def _yarn_attention_factor(factor: float) -> float:
    return _get_mscale(factor)


def _yarn_correction_index(rotations: float, dim: int, base: float, context: int) -> float:
    """The (fractional) frequency index that turns ``rotations`` times over ``context``."""
    return dim * math.log(context / (2 * math.pi * rotations)) / (2 * math.log(base))


def _yarn_parameters(
    scaling: YarnScaling, dim: int, base: float, seq_len: float | None
) -> Parameters:
    """YaRN: a ramp over the frequency index between interpolation and extrapolation."""
    context = scaling.original_max_positions
    low = _yarn_correction_index(scaling.beta_fast, dim, base, context)
    high = _yarn_correction_index(scaling.beta_slow, dim, base, context)
    if scaling.truncate:  # rounded outward
        low, high = math.floor(low), math.ceil(high)
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
    return inv_freq, scaling.attention_factor


def _llama3_parameters(
    scaling: Llama3Scaling, dim: int, base: float, seq_len: float | None
) -> Parameters:
    """Llama 3.1: keep high frequencies, divide low ones by s, blend the band between."""
    inv_freq, _ = _default_parameters(None, dim, base, None)  # (h,)
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


def _longrope_parameters(
    scaling: LongRopeScaling, dim: int, base: float, seq_len: float | None
) -> Parameters:
    """LongRoPE: ``theta_i / lambda_i`` with the long divisors when ``n > L``."""
    h = dim // 2
    for name in ("short_factor", "long_factor"):
        n_factors = len(getattr(scaling, name))
        if n_factors != h:
            raise ValueError(
                f"{name} must have dim // 2 = {h} numbers (one per frequency of the {dim} "
                f"rotated features), got {n_factors}"
            )
    long = seq_len is not None and seq_len > scaling.original_max_positions
    divisors = torch.tensor(
        scaling.long_factor if long else scaling.short_factor, dtype=torch.float32, device="cpu"
    )  # (h,)
    # as Hugging Face: 1 / (lambda_i * base ** (2i / dim)) in float32
    assert scaling.attention_factor is not None  # set by __post_init__
    return 1.0 / (divisors * _base_powers(dim, base)), scaling.attention_factor


def _proportional_parameters(
    scaling: ProportionalScaling, dim: int, base: float, seq_len: float | None
) -> Parameters:
    """p-RoPE: the first ``int(fraction * dim // 2)`` frequencies, / factor; the rest 0."""
    kept = int(scaling.fraction * dim // 2)
    # the kept powers alone, as Hugging Face forms them: torch's vectorised float32 pow can
    # round an element differently depending on the length of the tensor it sits in
    exponents = torch.arange(0, 2 * kept, 2, dtype=torch.int64, device="cpu").float() / dim
    inv_freq = torch.zeros(dim // 2, device="cpu")  # (h,)
    inv_freq[:kept] = 1.0 / base**exponents
    return inv_freq / scaling.factor, 1.0


ROPE_PARAMETER_FUNCTIONS: dict[type, Callable[[object, int, float, float | None], Parameters]] = {
    type(None): _default_parameters,
    LinearScaling: _linear_parameters,
    NTKScaling: _ntk_parameters,
    YarnScaling: _yarn_parameters,
    Llama3Scaling: _llama3_parameters,
    DynamicNTKScaling: _dynamic_ntk_parameters,
    LongRopeScaling: _longrope_parameters,
    ProportionalScaling: _proportional_parameters,
}
"""One function per scaling type (``type(None)``: unscaled), each mapping
``(scaling, dim, base, seq_len)`` to ``(inv_freq, attention_factor)`` with
``inv_freq`` a float32 CPU tensor of shape ``(dim // 2,)``. ``seq_len`` is
``None`` or the current sequence length; only the length-dependent scalings
(:data:`LENGTH_DEPENDENT`) read it."""

LENGTH_DEPENDENT: tuple[type, ...] = (DynamicNTKScaling, LongRopeScaling)
"""Scalings whose frequencies depend on the sequence length."""


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


def is_length_dependent(scaling: object) -> bool:
    """Whether the frequencies of ``scaling`` depend on the sequence length."""
    return type(scaling) in LENGTH_DEPENDENT


def check_seq_len(seq_len: object) -> float | int | None:
    """Return ``seq_len`` if it is ``None`` or a finite real number >= 0.

    Sequence lengths are integers in practice; a real number is accepted
    because the length taken from fractional positions (largest + 1) is one.

    Raises:
        TypeError: if ``seq_len`` is not a real number (``bool`` included).
        ValueError: if it is negative or not finite.
    """
    if seq_len is None:
        return None
    if isinstance(seq_len, bool) or not isinstance(seq_len, Real):
        raise TypeError(
            f"seq_len must be a number (the sequence length), got {type(seq_len).__name__} "
            f"{seq_len!r}"
        )
    if not math.isfinite(seq_len) or seq_len < 0:
        raise ValueError(
            f"seq_len must be a finite number >= 0 (the sequence length), got {seq_len}"
        )
    return seq_len


def canonical_seq_len(scaling: object, seq_len: float | None) -> float | None:
    """One representative length per distinct set of frequencies, for caching.

    ``None`` for scalings that ignore the length. For the length-dependent
    ones, every ``n <= original_max_positions`` maps to
    ``original_max_positions`` (the unscaled or short frequencies); above
    it, :class:`DynamicNTKScaling` keeps ``n`` and :class:`LongRopeScaling`
    maps every ``n`` to ``original_max_positions + 1`` (the long set).
    ``rope_parameters(..., seq_len=canonical_seq_len(s, n))`` equals
    ``rope_parameters(..., seq_len=n)``.
    """
    if not is_length_dependent(scaling) or seq_len is None:
        return None
    context = scaling.original_max_positions  # type: ignore[attr-defined]
    if seq_len <= context:
        return context
    return seq_len if isinstance(scaling, DynamicNTKScaling) else context + 1


def rope_parameters(
    dim: int,
    *,
    base: float = 10000.0,
    scaling: RopeScaling | None = None,
    seq_len: float | None = None,
) -> tuple[torch.Tensor, float]:
    """Inverse frequencies and attention factor of (scaled) RoPE.

    Args:
        dim (int): number of rotated features, even and >= 2.
        base (float): frequency base, finite and > 1. Default 10000.
        scaling (RopeScaling | None): a scaling, or ``None`` for plain RoPE.
        seq_len (float | None): the current sequence length, >= 0; required
            by :class:`DynamicNTKScaling` and :class:`LongRopeScaling`,
            ignored by the others.

    Returns:
        tuple[torch.Tensor, float]: ``inv_freq`` of shape ``(dim // 2,)``,
        float32 on the CPU, and the factor that multiplies the rotated
        vectors (1.0 except for YaRN and LongRoPE).

    Raises:
        ValueError: if ``dim`` is odd or < 2, ``base`` is not finite or <= 1,
            ``seq_len`` is negative or missing for a length-dependent
            scaling, or a LongRoPE factor list does not have ``dim // 2``
            entries.
        TypeError: if ``scaling`` is not ``None`` or a scaling dataclass.
    """
    dim = check_even("dim", dim)
    base = check_base(base)
    scaling = check_scaling(scaling)
    seq_len = check_seq_len(seq_len)
    if seq_len is None and is_length_dependent(scaling):
        raise ValueError(
            f"seq_len is required with {type(scaling).__name__}: its frequencies depend on "
            f"the sequence length (give seq_len=largest position + 1)"
        )
    return ROPE_PARAMETER_FUNCTIONS[type(scaling)](scaling, dim, base, seq_len)


# ---------------------------------------------------------------------------
# Llama 4's attention temperature for layers without positions
# ---------------------------------------------------------------------------


def llama4_attention_temperature(
    positions: torch.Tensor, *, floor_scale: float = 8192, attn_scale: float = 0.1
) -> torch.Tensor:
    """Llama 4's NoPE query scale, ``log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1``.

    Llama 4 (Meta, 2025) interleaves layers without positional encoding
    (NoPE) among its RoPE layers ("iRoPE"); in the NoPE layers the query at
    position ``p`` is multiplied by this temperature before the scores are
    taken, so the logits sharpen slowly, in steps of ``floor_scale``
    positions, as the context grows (Hugging Face ``Llama4TextAttention``,
    ``attn_temperature_tuning``). It is a fixed, stepwise scale of the query
    by its position, with a floor; Nakanishi's scalable softmax
    (arXiv:2501.19399), which Hugging Face's comment points to, instead
    multiplies the logits by ``s log n`` for ``n`` keys with a learned ``s``.
    It is 1 for ``p < floor_scale - 1`` and ``1 + attn_scale * ln 2`` from
    ``p = floor_scale - 1``.

    Computed as Hugging Face computes it: ``log1p(floor((p + 1) /
    floor_scale)) * attn_scale + 1`` in float32 (float64 for float64
    positions).

    Args:
        positions (torch.Tensor): integer or floating positions >= 0, any
            shape ``(...)``.
        floor_scale (float): the step, in positions; finite and > 0.
            Default 8192.
        attn_scale (float): the strength; finite and >= 0. Default 0.1.

    Returns:
        torch.Tensor: shape ``(...)`` of ``positions``, float32 (float64 for
        float64 positions), on the device of ``positions``; multiply the
        queries by ``temperature[..., None]``.

    Raises:
        TypeError: if ``positions`` is not a tensor or a setting is not a
            real number.
        ValueError: if ``positions`` is bool or complex or has a negative
            entry, ``floor_scale`` is not finite or not > 0, or
            ``attn_scale`` is not finite or negative.
    """
    positions = check_positions("positions", positions)
    floor_scale = check_positive_float("floor_scale", floor_scale)
    if isinstance(attn_scale, bool) or not isinstance(attn_scale, Real):
        raise TypeError(
            f"attn_scale must be a real number, got {type(attn_scale).__name__} {attn_scale!r}"
        )
    attn_scale = float(attn_scale)
    if not math.isfinite(attn_scale) or attn_scale < 0:
        raise ValueError(f"attn_scale must be a finite number >= 0, got {attn_scale}")
    if positions.numel() > 0 and positions.device.type != "meta":
        lowest = positions.min().item()
        if lowest < 0:
            raise ValueError(f"positions must be >= 0, got a minimum of {lowest}")
    dtype = torch.float64 if positions.dtype == torch.float64 else torch.float32
    p = positions.to(dtype)
    return torch.log1p(torch.floor((p + 1.0) / floor_scale)) * attn_scale + 1.0
