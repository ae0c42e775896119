"""Rotary position embedding (RoPE).

Su, Lu, Pan, Murtadha, Wen and Liu, "RoFormer: Enhanced Transformer with
Rotary Position Embedding", 2021 (arXiv:2104.09864). Feature pairs of a
query or key at position ``p`` are rotated by the angles ``p * theta_i``,
``theta_i = base ** (-2i / dim)``, so that the dot product of a query at
``m`` and a key at ``n`` depends on ``m - n`` only.

Two pairings are in use, and they are the same rotation up to a fixed
permutation of the features:

- ``layout="half"`` pairs feature ``i`` with ``i + dim/2`` (GPT-NeoX,
  Hugging Face ``rotate_half``);
- ``layout="interleaved"`` pairs ``2i`` with ``2i + 1`` (RoFormer, GPT-J,
  Meta's Llama, torchtune).

``apply_rope(x, layout="half")`` equals
``apply_rope(x[..., perm], layout="interleaved")[..., argsort(perm)]`` with
``perm = [0, h, 1, h+1, ..., h-1, 2h-1]`` (``h = dim // 2``); this is the
permutation Hugging Face applies to Meta's query and key weights when it
converts Llama checkpoints.

Numerics: the inverse frequencies are float32 (as Hugging Face forms them),
the angles ``p * theta_i`` are formed in float32, or in float64 when the
positions or the input are float64, and the rotation runs in float32
(float64 for float64 input); the result is cast back to the input's dtype.

Shapes: ``b`` batch, ``n_h`` heads, ``s`` sequence, ``h_d`` head size,
``r`` the number of rotated features (``rotary_dim`` or the module's
``dim``), ``r/2`` the number of frequencies.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc._checks import (
    check_base,
    check_choice,
    check_even,
    check_float_tensor,
    check_positions,
    check_size,
)
from posenc.scaling import RopeScaling, check_scaling, rope_parameters

__all__ = ["RotaryEmbedding", "apply_rope", "rope_frequencies"]

_LAYOUTS = ("half", "interleaved")


def rope_frequencies(
    dim: int, *, base: float = 10000.0, scaling: RopeScaling | None = None
) -> torch.Tensor:
    """Inverse frequencies of RoPE, ``base ** (-2i / dim)``, optionally scaled.

    Equal (to the last bit on the CPU) to the ``inv_freq`` that Hugging Face
    transformers' rope initialisation functions produce for the same
    settings.

    Args:
        dim (int): number of rotated features, even and >= 2.
        base (float): frequency base, finite and > 1. Default 10000.
        scaling (RopeScaling | None): ``LinearScaling``, ``NTKScaling``,
            ``YarnScaling``, ``Llama3Scaling`` or ``None``. YaRN's attention
            factor is not part of the frequencies; :func:`apply_rope` and
            :class:`RotaryEmbedding` apply it.

    Returns:
        torch.Tensor: shape ``(dim // 2,)``, float32, on the CPU.

    Raises:
        ValueError: if ``dim`` is odd or < 2, or ``base`` is not finite or <= 1.
        TypeError: if ``scaling`` is not one of the scalings or ``None``.
    """
    inv_freq, _ = rope_parameters(dim, base=base, scaling=scaling)
    return inv_freq


# ---------------------------------------------------------------------------
# Building blocks shared by the function and the module
# ---------------------------------------------------------------------------


def _check_broadcast(positions: torch.Tensor, x: torch.Tensor, x_name: str) -> None:
    """Raise unless ``positions`` broadcasts to ``x.shape[:-1]``."""
    target = tuple(x.shape[:-1])
    try:
        ok = tuple(torch.broadcast_shapes(positions.shape, target)) == target
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} must broadcast to {x_name}.shape[:-1] = "
            f"{target}; note: Hugging Face position_ids of shape (B, S) must be given as "
            f"(B, 1, S), e.g. position_ids[:, None, :], for {x_name} of shape (B, H, S, D)"
        )


def _check_rotary_dim(rotary_dim: object, dim: int) -> int:
    if rotary_dim is None:
        return dim
    value = check_size("rotary_dim", rotary_dim)
    if value % 2 or not 2 <= value <= dim:
        raise ValueError(
            f"rotary_dim must be an even integer in [2, {dim}] (x.shape[-1]), got {value}"
        )
    return value


def _angle_dtype(positions: torch.Tensor, *tensors: torch.Tensor) -> torch.dtype:
    """float64 when the positions or any input are float64, else float32."""
    wide = positions.dtype == torch.float64 or any(t.dtype == torch.float64 for t in tensors)
    return torch.float64 if wide else torch.float32


def _cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, scale: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``scale * cos(p * theta)`` and ``scale * sin(p * theta)``.

    Args:
        positions (torch.Tensor): shape ``(...)``, on the target device.
        inv_freq (torch.Tensor): shape ``(r/2,)``, float32, same device.
        scale (float): YaRN's attention factor, else 1.
        dtype (torch.dtype): the dtype in which the angles are formed.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: each of shape ``(..., r/2)`` in ``dtype``.
    """
    angles = positions.to(dtype)[..., None] * inv_freq.to(dtype)  # (..., r/2)
    cos, sin = angles.cos(), angles.sin()
    if scale != 1.0:
        cos, sin = cos * scale, sin * scale
    return cos, sin


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """Rotate the first ``r = 2 * cos.shape[-1]`` features of ``x``; pass the rest.

    Args:
        x (torch.Tensor): shape ``(..., h_d)``, floating point, ``h_d >= r``.
        cos (torch.Tensor): shape broadcastable to ``(..., r/2)``.
        sin (torch.Tensor): same shape as ``cos``.
        layout (str): ``"half"`` or ``"interleaved"``.

    Returns:
        torch.Tensor: shape and dtype of ``x``.
    """
    rot = 2 * cos.shape[-1]
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = cos.to(compute), sin.to(compute)
    xr = x[..., :rot].to(compute)  # (..., r)
    if layout == "half":
        x1, x2 = xr.chunk(2, dim=-1)  # (..., r/2) each: features i and i + r/2
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    else:
        pairs = xr.unflatten(-1, (rot // 2, 2))  # (..., r/2, 2): features 2i and 2i + 1
        x1, x2 = pairs[..., 0], pairs[..., 1]
        out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    out = out.to(x.dtype)  # (..., r)
    if rot < x.shape[-1]:
        out = torch.cat((out, x[..., rot:]), dim=-1)
    return out


# ---------------------------------------------------------------------------
# Public function
# ---------------------------------------------------------------------------


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    base: float = 10000.0,
    layout: str = "half",
    scaling: RopeScaling | None = None,
    rotary_dim: int | None = None,
) -> torch.Tensor:
    """Rotate the last axis of ``x`` by the angles ``positions * rope_frequencies(...)``.

    For frequency ``i`` and the pair ``(a, b)`` it acts on (see ``layout``),
    ``a' = a cos(p theta_i) - b sin(p theta_i)`` and
    ``b' = b cos(p theta_i) + a sin(p theta_i)``, then the result is
    multiplied by YaRN's attention factor when ``scaling`` is a
    ``YarnScaling`` (q and k both, so the logits scale by its square).

    Args:
        x (torch.Tensor): shape ``(..., dim)``, e.g. ``(b, n_h, s, h_d)``;
            floating point, ``dim`` even.
        positions (torch.Tensor): integer or floating positions whose shape
            broadcasts to ``x.shape[:-1]``, e.g. ``(s,)``, or ``(b, 1, s)``
            for ``x`` of shape ``(b, n_h, s, h_d)`` (Hugging Face's
            ``position_ids[:, None, :]``). Any value: negative, fractional
            and large positions are computed directly.
        base (float): frequency base, finite and > 1. Default 10000.
        layout (str): ``"half"`` pairs feature ``i`` with ``i + r/2``
            (GPT-NeoX, Hugging Face); ``"interleaved"`` pairs ``2i`` with
            ``2i + 1`` (RoFormer, GPT-J, Meta's Llama). Default ``"half"``.
        scaling (RopeScaling | None): a frequency scaling, or ``None``.
        rotary_dim (int | None): rotate only the first ``r = rotary_dim``
            features, with the frequencies ``rope_frequencies(rotary_dim)``,
            and pass the rest through (GPT-NeoX ``rotary_pct``, GPT-J).
            Even, in ``[2, dim]``. Default: all ``dim`` features.

    Returns:
        torch.Tensor: shape and dtype of ``x``.

    Raises:
        TypeError: if ``x`` or ``positions`` is not a tensor, or ``scaling``
            is not one of the scalings.
        ValueError: if ``x`` is not floating point or its last dimension is
            odd, ``rotary_dim`` is odd or outside ``[2, dim]``, ``layout`` is
            unknown, ``base`` is not finite or <= 1, or ``positions`` does not
            broadcast to ``x.shape[:-1]``.
    """
    x = check_float_tensor("x", x)
    if x.dim() == 0:
        raise ValueError(
            "x must have at least one dimension (the features to rotate), got a scalar"
        )
    dim = check_even("x.shape[-1]", x.shape[-1])
    positions = check_positions("positions", positions)
    layout = check_choice("layout", layout, _LAYOUTS)
    rot = _check_rotary_dim(rotary_dim, dim)
    inv_freq, attention_factor = rope_parameters(rot, base=base, scaling=scaling)
    _check_broadcast(positions, x, "x")

    positions = positions.to(x.device)
    angle_dtype = _angle_dtype(positions, x)
    cos, sin = _cos_sin(positions, inv_freq.to(x.device), attention_factor, angle_dtype)
    return _rotate(x, cos, sin, layout)


# ---------------------------------------------------------------------------
# Module
# ---------------------------------------------------------------------------


class RotaryEmbedding(nn.Module):
    """RoPE for queries and keys, with a cos/sin cache that grows on demand.

    ``forward(q, k, positions)`` equals ``apply_rope`` on ``q`` and on ``k``
    with ``rotary_dim=dim``. Integer positions in ``[0, max_cache_positions)``
    are looked up in a cache of ``cos`` and ``sin`` for the contiguous range
    ``0 .. n-1``; the cache grows geometrically to cover the largest position
    seen. Anything else (negative, fractional or larger positions, float64
    inputs) is computed directly, so a position of ``2**40`` allocates
    nothing in proportion to it.

    The cache is a pair of non-persistent buffers (not in the
    ``state_dict``), built by :meth:`rope_init`; the module can be created on
    the meta device (``with torch.device("meta"): ...``). The cache is
    rebuilt, in float32 on the device of the inputs, whenever its buffers no
    longer hold what :meth:`rope_init` wrote: after ``module.to_empty(...)``
    (no extra initialisation step is needed), a cast such as
    ``module.half()``, or a move to another device.

    Args:
        dim (int): number of rotated features per head, even and >= 2. Heads
            larger than ``dim`` are rotated in their first ``dim`` features
            only (partial rotation).
        base (float): frequency base, finite and > 1. Default 10000.
        layout (str): ``"half"`` (GPT-NeoX, Hugging Face) or
            ``"interleaved"`` (RoFormer, GPT-J, Meta's Llama). Default ``"half"``.
        scaling (RopeScaling | None): a frequency scaling, or ``None``.

    Raises:
        ValueError: if ``dim`` is odd or < 2, ``base`` is not finite or
            <= 1, or ``layout`` is unknown.
        TypeError: if ``scaling`` is not one of the scalings or ``None``.
    """

    #: Integer positions at or beyond this bound bypass the cache.
    max_cache_positions: int = 2**20
    #: Rows of the cache built at construction.
    initial_cache_positions: int = 256

    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        scaling: RopeScaling | None = None,
    ) -> None:
        super().__init__()
        self.dim = check_even("dim", dim)
        self.base = check_base(base)
        self.layout = check_choice("layout", layout, _LAYOUTS)
        self.scaling = check_scaling(scaling)
        self.rope_init()

    def rope_init(self, n_positions: int | None = None, device: torch.device | None = None) -> None:
        """(Re)build the frequencies and the cos/sin cache for positions ``0 .. n_positions-1``.

        Args:
            n_positions (int | None): rows of the cache. Default
                ``initial_cache_positions``.
            device (torch.device | None): where to build it. Default: the
                current default device (the meta device inside
                ``with torch.device("meta")``).
        """
        inv_freq, attention_factor = rope_parameters(self.dim, base=self.base, scaling=self.scaling)
        self._inv_freq = inv_freq  # (dim/2,) float32 on the CPU; not a buffer, so never cast
        self.attention_factor = attention_factor
        n = self.initial_cache_positions if n_positions is None else int(n_positions)
        if device is None:
            device = torch.empty(0).device
        positions = torch.arange(n, dtype=torch.float32, device=device)  # (n,)
        cos, sin = _cos_sin(positions, inv_freq.to(device), attention_factor, torch.float32)
        self.register_buffer("cos_cached", cos, persistent=False)  # (n, dim/2)
        self.register_buffer("sin_cached", sin, persistent=False)  # (n, dim/2)
        self._cache_key = self._buffers_key()

    def _buffers_key(self) -> tuple[object, ...]:
        # Identifies the storage rope_init wrote. `module.to(other device)`, `.half()`
        # and `.to_empty()` all put new storage in the buffers, so the key changes.
        cos, sin = self.cos_cached, self.sin_cached
        return (cos.device, cos.dtype, cos.data_ptr(), sin.dtype, sin.data_ptr())

    def _cache_valid(self, device: torch.device) -> bool:
        return self.cos_cached.device == device and self._cache_key == self._buffers_key()

    def _ensure_cache(self, n_needed: int, device: torch.device) -> None:
        current = self.cos_cached.shape[0]
        valid = self._cache_valid(device)
        if valid and current >= n_needed:
            return
        n = max(n_needed, 2 * current if valid else current)
        self.rope_init(min(n, self.max_cache_positions), device)

    def _cos_sin_for(
        self, positions: torch.Tensor, device: torch.device, angle_dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of shape ``(*positions.shape, dim/2)``, from the cache when it can."""
        positions = positions.to(device)
        if (
            angle_dtype == torch.float32
            and not positions.is_floating_point()
            and positions.numel() > 0
            and device.type != "meta"  # shape inference: no values to look at
        ):
            low, high = torch.stack(torch.aminmax(positions)).tolist()
            if low >= 0 and high < self.max_cache_positions:
                self._ensure_cache(high + 1, device)
                index = positions.long()
                return self.cos_cached[index], self.sin_cached[index]
        return _cos_sin(positions, self._inv_freq.to(device), self.attention_factor, angle_dtype)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries and keys by their positions.

        Args:
            q (torch.Tensor): queries, shape ``(..., h_d)``, e.g.
                ``(b, n_h, s, h_d)``; floating point, ``h_d >= dim``.
            k (torch.Tensor): keys, shape ``(..., h_d_k)``, e.g.
                ``(b, n_kv, s, h_d)`` with fewer heads than ``q``
                (grouped-query attention); ``h_d_k >= dim``.
            positions (torch.Tensor): integer or floating positions that
                broadcast to ``q.shape[:-1]`` and to ``k.shape[:-1]``, e.g.
                ``(s,)`` or ``(b, 1, s)``.

        Returns:
            tuple[torch.Tensor, torch.Tensor]: rotated ``q`` and ``k``, each
            with its input's shape and dtype.

        Raises:
            ValueError: if ``q`` or ``k`` is not floating point or has a head
                size smaller than ``dim``, or ``positions`` does not broadcast.
        """
        q = check_float_tensor("q", q)
        k = check_float_tensor("k", k)
        for name, t in (("q", q), ("k", k)):
            if t.dim() == 0 or t.shape[-1] < self.dim:
                raise ValueError(
                    f"{name} must have a head size (last dimension) of at least "
                    f"dim={self.dim}, got shape {tuple(t.shape)}"
                )
        positions = check_positions("positions", positions)
        _check_broadcast(positions, q, "q")
        _check_broadcast(positions, k, "k")

        cos, sin = self._cos_sin_for(positions, q.device, _angle_dtype(positions, q, k))
        return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base}, layout={self.layout!r}, scaling={self.scaling!r}"
