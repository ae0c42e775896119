"""xPos: rotary position embedding with a per-pair exponential decay.

Sun, Dong, Patra, Ma, Huang, Benhaim, Chaudhary, Song and Wei, "A
Length-Extrapolatable Transformer", 2022 (arXiv:2212.10554); reference code in
torchscale, ``torchscale/component/xpos_relative_position.py``.

xPos rotates queries and keys exactly as RoPE does, then scales rotated pair
``i`` (``i = 0 .. d/2 - 1``) of a query at position ``m`` by
``zeta_i ** (m / B)`` and of a key at position ``n`` by ``zeta_i ** (-n / B)``,
with::

    zeta_i = (2i/d + gamma) / (1 + gamma)

The paper's equation writes the exponent with the position itself (``B = 1``)
and prints no value of ``gamma``; ``gamma = 0.4`` and ``B = scale_base = 512``
are torchscale's ``XPOS`` defaults, which posenc follows.

Scaling a pair commutes with rotating it, so the dot product of the query at
``m`` and the key at ``n`` is the RoPE score of each pair times
``zeta_i ** ((m - n) / B)``: it still depends on the positions only through
``m - n``, and for ``m > n`` every factor is below 1 and falls with the
distance (``0 < zeta_i < 1``). For ``m < n`` the factors exceed 1, so xPos is
meant for causal attention.

Conventions, compared with torchscale:

- Pairing. torchscale pairs features ``2i`` and ``2i + 1``
  (``layout="interleaved"`` here); ``layout="half"`` (the default, as in
  :func:`posenc.apply_rope`) pairs ``i`` with ``i + d/2``. Pair ``i`` always
  gets the frequency ``theta_i = base ** (-2i/d)`` and the decay ``zeta_i``.
- Centre. ``zeta_0 ** (m / B)`` leaves float32's normal range near
  ``|m| = 36000`` (``gamma = 0.4``, ``B = 512``; see :func:`xpos_scale`).
  torchscale therefore shifts the exponent: for ``N`` keys it uses
  ``zeta ** ((p - ceil(N/2)) / B)`` for queries and keys alike, while the
  rotation keeps ``p``, and it keeps the keys of its KV cache un-encoded and
  encodes all of them again with each new query, so that the shift is the
  same for every query and key of a score. Any common shift ``c`` cancels in
  every score, since ``(m - c) - (n - c) = m - n``; a shift that differs
  between the call that encoded a key and the call that encodes a query
  does not: the score is off by ``zeta_i ** ((c_q - c_k) / B)``, about 1 %
  per 4 positions of difference for pair 0.

  :func:`apply_xpos` therefore subtracts a fixed centre by default,
  ``center=0`` (the paper's formula as written), so that queries and keys
  encoded in different calls (a prefill, then decoding steps with a cache
  of encoded keys) give exactly the scores of one call. The price is range:
  the scales leave the dtype's normal range for ``|p - c|`` beyond a
  limit (35694 positions in float32 and bfloat16, 3966 in float16, with
  ``gamma = 0.4`` and ``B = 512``), and a call with positions beyond it
  raises a ``ValueError`` that names ``center`` rather than return scores
  that are no longer accurate. For longer sequences pass a fixed
  ``center`` near their middle, the same in every call.
  ``center="midpoint"`` is torchscale's behaviour: the midpoint of the
  smallest and largest of this call's query and key positions, so that
  ``|p - c|`` is at most half their span (causal spans up to about ``2 *
  35694`` positions in float32); it is exact only when every query and key
  of a score is encoded in the same call.

Numerics: the exponents ``(p - c) / B * ln(zeta_i)`` and the scales are formed
in float64 (float32 on devices without float64), the rotation comes from
:func:`posenc.apply_rope` in float32 (float64 for float64 input), the product
is formed there and cast back to the input's dtype. The range check above
keeps every scale within the normal range of the input's dtype (float16's
is narrow: at the limit a key entry is multiplied by up to 16384, and
float16's largest number is 65504); the scaled vectors themselves must be
representable too. bfloat16 has float32's range.

Host reads: the range check reads the largest ``|p - c|`` back to the host
once per call in eager mode (on a GPU, a synchronisation). Under
``torch.compile`` it is skipped (the values cannot be read while tracing),
so a compiled model must keep its positions within the range itself.

Shapes: ``b`` batch, ``n_h`` heads, ``s`` sequence, ``h_d`` head size
(``d``, even), ``h_d/2`` the number of pairs.
"""

from __future__ import annotations

import math
from numbers import Real

import torch

from posenc._checks import (
    broadcast_shapes,
    check_base,
    check_choice,
    check_even,
    check_float_tensor,
    check_positions,
    check_positive_float,
)
from posenc.rope import _LAYOUTS, apply_rope

__all__ = ["apply_xpos", "xpos_scale", "xpos_zeta"]


# ---------------------------------------------------------------------------
# Checks of the xPos settings
# ---------------------------------------------------------------------------


def _check_gamma(gamma: object) -> float:
    return check_positive_float("gamma", gamma)


def _check_scale_base(scale_base: object) -> float:
    """``scale_base`` is > 0 and not NaN; ``math.inf`` turns the decay off."""
    if isinstance(scale_base, bool) or not isinstance(scale_base, Real):
        raise TypeError(
            f"scale_base must be a real number, got {type(scale_base).__name__} {scale_base!r}"
        )
    value = float(scale_base)
    if math.isnan(value) or value <= 0:
        raise ValueError(
            f"scale_base must be a number greater than 0 (math.inf turns the decay off), "
            f"got {value}"
        )
    return value


_MIDPOINT = "midpoint"


def _check_center(center: object) -> float | str:
    """A finite number, or ``"midpoint"``; ``None`` is the default centre, 0."""
    if center is None:
        return 0.0
    if isinstance(center, str) and center == _MIDPOINT:
        return _MIDPOINT
    if isinstance(center, bool) or not isinstance(center, Real):
        raise TypeError(
            f"center must be a real number or 'midpoint', got {type(center).__name__} {center!r}"
        )
    value = float(center)
    if not math.isfinite(value):
        raise ValueError(f"center must be a finite number or 'midpoint', got {value}")
    return value


def _exact_range(gamma: float, scale_base: float, dtypes: tuple[torch.dtype, ...]) -> float:
    """The largest ``|p - c|`` at which every scale ``zeta_i ** (+-(p - c) / B)`` stays normal.

    Pair 0 decays fastest (``zeta_0 = gamma / (1 + gamma)``); its scale at
    ``|p - c| = r`` is ``exp(+-r |ln zeta_0| / B)``, which stays within
    ``[tiny, 1 / tiny]`` of the narrowest of ``dtypes`` up to
    ``r = B * ln(1 / tiny) / |ln zeta_0|``.
    """
    tiny = max(torch.finfo(dtype).tiny for dtype in dtypes)
    return scale_base * -math.log(tiny) / -math.log(gamma / (1 + gamma))


def _check_range(
    positions: tuple[torch.Tensor, ...],
    center: torch.Tensor,
    limit: float,
    described: object,
    dtypes: tuple[torch.dtype, ...],
    gamma: float,
    scale_base: float,
) -> None:
    """Raise unless every ``|p - c| <= limit`` (one read back to the host)."""
    far = [
        (p.to(center.device, center.dtype) - center).abs().amax() for p in positions if p.numel()
    ]
    if not far:
        return
    distance = float(torch.stack(far).max())
    if distance <= limit:
        return
    low = min(float(p.amin()) for p in positions if p.numel())
    high = max(float(p.amax()) for p in positions if p.numel())
    names = " and ".join(sorted({str(d).removeprefix("torch.") for d in dtypes}))
    raise ValueError(
        f"center={described!r} cannot give exact xPos scores for positions in "
        f"[{low:g}, {high:g}]: the scales zeta ** (+-(p - center) / scale_base) leave "
        f"{names}'s normal range for |p - center| > {limit:.0f} (gamma={gamma:g}, "
        f"scale_base={scale_base:g}), and these positions reach {distance:g}. Pass a fixed "
        f"center near their middle (e.g. center={round((low + high) / 2)}), the same in "
        f"every call whose queries and keys meet in one score (a KV cache), or "
        f"center='midpoint' to centre each call on its own positions (exact only when "
        f"every query and key of a score is encoded in the same call)"
    )


def _check_broadcast(positions: torch.Tensor, x: torch.Tensor, p_name: str, x_name: str) -> None:
    """Raise unless ``positions`` broadcasts to ``x.shape[:-1]``."""
    target = tuple(x.shape[:-1])
    try:
        ok = broadcast_shapes(positions.shape, target) == target
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"{p_name} of shape {tuple(positions.shape)} must broadcast to {x_name}.shape[:-1] = "
            f"{target}; e.g. (s,), or (b, 1, s) for {x_name} of shape (b, n_h, s, h_d)"
        )


def _wide(device: torch.device) -> torch.dtype:
    """The dtype of the exponents: float64 where the device has it."""
    return torch.float32 if device.type == "mps" else torch.float64


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------


def xpos_zeta(dim: int, *, gamma: float = 0.4, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The per-pair decay bases of xPos, ``zeta_i = (2i/dim + gamma) / (1 + gamma)``.

    ``gamma/(1+gamma) = zeta_0 < zeta_1 < ... < zeta_{dim/2-1} < 1``: the
    fastest-rotating pair decays fastest. With ``gamma = 0.4`` this is
    torchscale's ``(arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim)``.

    Args:
        dim (int): number of features of a query or key, even and >= 2.
        gamma (float): finite and > 0. Default 0.4 (torchscale's ``XPOS``; the paper prints no value).
        dtype (torch.dtype): floating dtype of the result. Default float32.

    Returns:
        torch.Tensor: shape ``(dim // 2,)``, on the CPU.

    Raises:
        ValueError: if ``dim`` is odd or < 2, or ``gamma`` is not finite or <= 0.
    """
    dim = check_even("dim", dim)
    gamma = _check_gamma(gamma)
    i = torch.arange(dim // 2, dtype=torch.float64)
    return ((2 * i / dim + gamma) / (1 + gamma)).to(dtype)


def xpos_scale(
    dim: int,
    positions: torch.Tensor,
    *,
    gamma: float = 0.4,
    scale_base: float = 512.0,
) -> torch.Tensor:
    """``zeta_i ** (positions / scale_base)``: the factor of pair ``i`` at each position.

    A query at ``m`` is scaled by ``xpos_scale(dim, m)``, a key at ``n`` by
    ``xpos_scale(dim, -n)``, so their score gains ``zeta_i ** ((m - n) / B)``.

    This is the plain formula, with no centring. In float32, with
    ``gamma = 0.4`` and ``B = 512`` (``zeta_0 = 2/7`` for every ``dim``), pair
    0 overflows to ``inf`` from position ``-36261`` down, and from ``35695``
    up it leaves the normal range (losing precision) and reaches ``0`` at
    ``42494``. :func:`apply_xpos` centres the positions so that this does not
    happen.

    Args:
        dim (int): number of features, even and >= 2.
        positions (torch.Tensor): integer or floating positions, any shape;
            negative and fractional values are allowed.
        gamma (float): finite and > 0. Default 0.4.
        scale_base (float): ``B``, > 0; ``math.inf`` gives all ones (no
            decay). Default 512.

    Returns:
        torch.Tensor: shape ``(*positions.shape, dim // 2)``, float64 for
        float64 positions, else float32; on the device of ``positions``.
        Formed in float64 (float32 on devices without it).

    Raises:
        TypeError: if ``positions`` is not a tensor.
        ValueError: if ``dim`` is odd or < 2, ``positions`` is boolean or
            complex, ``gamma`` is not finite or <= 0, or ``scale_base`` is
            NaN or <= 0.
    """
    dim = check_even("dim", dim)
    positions = check_positions("positions", positions)
    gamma = _check_gamma(gamma)
    scale_base = _check_scale_base(scale_base)
    wide = _wide(positions.device)
    out = torch.float64 if positions.dtype == torch.float64 else torch.float32
    log_zeta = xpos_zeta(dim, gamma=gamma, dtype=torch.float64).log().to(positions.device, wide)
    exponent = positions.to(wide)[..., None] / scale_base  # (..., 1)
    return torch.exp(exponent * log_zeta).to(out)  # (..., dim/2)


def _scale_features(
    positions: torch.Tensor,
    center: torch.Tensor,
    sign: float,
    log_zeta: torch.Tensor,
    scale_base: float,
    layout: str,
    dtype: torch.dtype,
) -> torch.Tensor:
    """``zeta_i ** (sign * (p - c) / B)`` spread over the features of pair ``i``.

    Returns:
        torch.Tensor: shape ``(*positions.shape, h_d)`` in ``dtype``.
    """
    exponent = sign * (positions.to(log_zeta.dtype) - center) / scale_base  # (...)
    scale = torch.exp(exponent[..., None] * log_zeta).to(dtype)  # (..., h_d/2)
    if layout == "half":
        return torch.cat((scale, scale), dim=-1)  # pair i: features i and i + h_d/2
    return scale.repeat_interleave(2, dim=-1)  # pair i: features 2i and 2i + 1


def apply_xpos(
    q: torch.Tensor,
    k: torch.Tensor,
    q_positions: torch.Tensor,
    k_positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "half",
    gamma: float = 0.4,
    scale_base: float = 512.0,
    center: float | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys as RoPE does and scale them by the xPos decay.

    ``q' = zeta ** ((m - c) / B) * apply_rope(q, m)`` and
    ``k' = zeta ** (-(n - c) / B) * apply_rope(k, n)``, pair by pair, so that
    ``q'_m . k'_n = sum_i zeta_i ** ((m - n) / B) * (RoPE score of pair i)``,
    whatever ``c`` is. ``scale_base=math.inf`` gives exactly
    ``(apply_rope(q, m), apply_rope(k, n))``.

    Args:
        q (torch.Tensor): queries, shape ``(..., h_d)``, e.g.
            ``(b, n_h, s_q, h_d)``; floating point, ``h_d`` even.
        k (torch.Tensor): keys, shape ``(..., h_d)`` with the same ``h_d``,
            e.g. ``(b, n_kv, s_k, h_d)`` (fewer heads: grouped-query attention).
        q_positions (torch.Tensor): integer or floating positions that
            broadcast to ``q.shape[:-1]``, e.g. ``(s_q,)`` or ``(b, 1, s_q)``.
        k_positions (torch.Tensor | None): the same for ``k``. Default:
            ``q_positions``.
        base (float): RoPE frequency base, finite and > 1. Default 10000.
        layout (str): ``"half"`` pairs feature ``i`` with ``i + h_d/2``;
            ``"interleaved"`` pairs ``2i`` with ``2i + 1`` (torchscale).
            Default ``"half"``.
        gamma (float): finite and > 0; ``zeta_i = (2i/h_d + gamma)/(1 + gamma)``.
            Default 0.4.
        scale_base (float): ``B``, > 0; ``math.inf`` turns the decay off.
            Default 512.
        center (float | str | None): the position ``c`` subtracted in the
            exponents (not in the rotation). A ``c`` shared by the query and
            the key of a score cancels; it only keeps the scales within
            floating-point range. A number: that fixed centre, the same in
            every call, so that keys cached from one call and queries of
            another give exact scores (a KV cache). ``None`` (default): 0,
            the paper's formula, exact with a KV cache for ``|p|`` up to
            the range limit (35694 in float32 with the default ``gamma``
            and ``scale_base``; see the module docstring). ``"midpoint"``:
            torchscale's behaviour, the midpoint of the smallest and
            largest of this call's query and key positions, for long
            sequences encoded in one call; scores between calls are then
            not exact.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: ``(q', k')`` with the shapes and
        dtypes of ``q`` and ``k``.

    Raises:
        TypeError: if a tensor argument is not a tensor, ``gamma`` or
            ``scale_base`` is not a real number, or ``center`` is neither a
            real number nor ``"midpoint"``.
        ValueError: if ``q`` or ``k`` is not floating point or is a scalar,
            ``h_d`` is odd or differs between ``q`` and ``k``, ``layout`` is
            unknown, ``base`` is not finite or <= 1, ``gamma`` is not finite
            or <= 0, ``scale_base`` is NaN or <= 0, ``center`` is not finite,
            the positions are boolean, complex or do not broadcast, or (in
            eager mode) a position lies farther from the centre than the
            scales allow in the dtype of ``q`` or ``k`` (the message names
            ``center`` and what to pass).

    Example:
        >>> q, k = torch.randn(2, 4, 8, 64)  # (n_h, s, h_d) each
        >>> q2, k2 = apply_xpos(q, k, torch.arange(8))
        >>> q2.shape
        torch.Size([4, 8, 64])
    """
    q = check_float_tensor("q", q)
    k = check_float_tensor("k", k)
    for name, t in (("q", q), ("k", k)):
        if t.dim() == 0:
            raise ValueError(
                f"{name} must have at least one dimension (the features), got a scalar"
            )
    dim = check_even("q.shape[-1]", q.shape[-1])
    if k.shape[-1] != dim:
        raise ValueError(
            f"k must have the last dimension of q ({dim}), got q {tuple(q.shape)} and "
            f"k {tuple(k.shape)}"
        )
    q_positions = check_positions("q_positions", q_positions)
    k_positions = (
        q_positions if k_positions is None else check_positions("k_positions", k_positions)
    )
    layout = check_choice("layout", layout, _LAYOUTS)
    base = check_base(base)
    gamma = _check_gamma(gamma)
    scale_base = _check_scale_base(scale_base)
    center_value = _check_center(center)
    _check_broadcast(q_positions, q, "q_positions", "q")
    _check_broadcast(k_positions, k, "k_positions", "k")

    q_positions = q_positions.to(q.device)
    k_positions = k_positions.to(k.device)
    wide = _wide(q.device)
    if center_value != _MIDPOINT:
        c = torch.tensor(center_value, dtype=wide, device=q.device)
    else:
        ends = [
            p.to(device=q.device, dtype=wide).aminmax()
            for p in (q_positions, k_positions)
            if p.numel() > 0
        ]
        if ends:
            low = torch.stack([e.min for e in ends]).min()
            high = torch.stack([e.max for e in ends]).max()
            c = (low + high) / 2  # |p - c| <= half the span of all positions
        else:
            c = torch.zeros((), dtype=wide, device=q.device)
    if (
        math.isfinite(scale_base)
        and q.device.type != "meta"
        and not torch.compiler.is_compiling()  # values cannot be read while tracing
    ):
        dtypes = (q.dtype, k.dtype)
        limit = _exact_range(gamma, scale_base, dtypes)
        _check_range((q_positions, k_positions), c, limit, center_value, dtypes, gamma, scale_base)
    log_zeta = xpos_zeta(dim, gamma=gamma, dtype=torch.float64).log().to(q.device, wide)

    def encode(x: torch.Tensor, positions: torch.Tensor, sign: float) -> torch.Tensor:
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        rotated = apply_rope(x.to(compute), positions, base=base, layout=layout)  # (..., h_d)
        scale = _scale_features(
            positions,
            c.to(x.device),
            sign,
            log_zeta.to(x.device),
            scale_base,
            layout,
            compute,
        )  # (*positions.shape, h_d)
        return (rotated * scale).to(x.dtype)

    return encode(q, q_positions, 1.0), encode(k, k_positions, -1.0)
