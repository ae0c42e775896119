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
``perm = [0, h, 1, h+1, ..., h-1, 2h-1]`` (``h = dim // 2``). Hugging
Face's ``convert_llama_weights_to_hf.py`` applies the inverse,
``argsort(perm) = [0, 2, 4, ..., 2h-2, 1, 3, ..., 2h-1]``, to the output
rows of Meta's (interleaved) query and key weights within every head (its
``permute``: ``view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1,
2)``), so that the converted checkpoint gives the same scores with the
half layout.

Numerics: the inverse frequencies are float32 (as Hugging Face forms them),
the angles ``p * theta_i`` are formed in float32, or in float64 when the
positions or the input are float64, and the rotation runs in float32
(float64 for float64 input); the result is cast back to the input's dtype.
Each output is ``a cos - b sin`` (or ``b cos + a sin``) computed as one
product and one fused multiply-add (``addcmul``) where the CPU has one: it
agrees with the textbook formula, which rounds both products, within one
rounding of a product, and the two layouts, the function and the module,
small and large inputs all agree with each other to the last bit.

Performance: RoPE is a streaming operation, bound by memory traffic. The
rotation writes straight into one output tensor (``torch.mul(..., out=)``,
then ``addcmul_`` on each half): 20 bytes moved per float32 element,
against 40 for Hugging Face's eager ``x * cos + rotate_half(x) * sin`` and
8 for a single read and write of ``x``. Small inputs (a decode step) take an
out-of-place path with fewer calls into torch; ``apply_rope`` caches the
inverse frequencies per setting, and :class:`RotaryEmbedding` caches ``cos``
and ``sin``. ``python -m posenc.bench`` measures all of this.

Shapes: ``b`` batch, ``n_h`` heads, ``s`` sequence, ``h_d`` head size,
``r`` the number of rotated features (``rotary_dim`` or the module's
``dim``), ``r/2`` the number of frequencies.
"""

from __future__ import annotations

import functools

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
from posenc.scaling import (
    RopeScaling,
    canonical_seq_len,
    check_scaling,
    check_seq_len,
    is_length_dependent,
    rope_parameters,
)

__all__ = ["RotaryEmbedding", "apply_rope", "rope_frequencies"]

_LAYOUTS = ("half", "interleaved")


def rope_frequencies(
    dim: int,
    *,
    base: float = 10000.0,
    scaling: RopeScaling | None = None,
    seq_len: int | None = None,
) -> torch.Tensor:
    """Inverse frequencies of RoPE, ``base ** (-2i / dim)``, optionally scaled.

    Equal (to the last bit on the CPU) to the ``inv_freq`` that Hugging Face
    transformers' rope initialisation functions produce for the same
    settings.

    Args:
        dim (int): number of rotated features, even and >= 2.
        base (float): frequency base, finite and > 1. Default 10000.
        scaling (RopeScaling | None): one of the scalings of
            :mod:`posenc.scaling`, or ``None``. An attention factor (YaRN,
            LongRoPE) is not part of the frequencies; :func:`apply_rope` and
            :class:`RotaryEmbedding` apply it.
        seq_len (int | None): the sequence length ``n``, >= 0. Required by
            ``DynamicNTKScaling`` and ``LongRopeScaling``, whose frequencies
            depend on it; ignored by the other scalings.

    Returns:
        torch.Tensor: shape ``(dim // 2,)``, float32, on the CPU.

    Raises:
        ValueError: if ``dim`` is odd or < 2, ``base`` is not finite or <= 1,
            ``seq_len`` is missing for a length-dependent scaling or is
            negative, or a LongRoPE factor list does not have ``dim // 2``
            entries.
        TypeError: if ``scaling`` is not one of the scalings or ``None``.
    """
    inv_freq, _ = rope_parameters(dim, base=base, scaling=scaling, seq_len=seq_len)
    return inv_freq


# ---------------------------------------------------------------------------
# Building blocks shared by the function and the module
# ---------------------------------------------------------------------------


def _check_broadcast(positions: torch.Tensor, x: torch.Tensor, x_name: str) -> None:
    """Raise unless ``positions`` broadcasts to ``x.shape[:-1]``.

    Plain Python on the two shapes (no call into torch): this runs on every
    call, and for a decode step every microsecond shows.
    """
    shape, target = positions.shape, x.shape[:-1]
    ok = len(shape) <= len(target) and all(
        p == t or p == 1 for p, t in zip(reversed(shape), reversed(target), strict=False)
    )
    if not ok:
        raise ValueError(
            f"positions of shape {tuple(shape)} must broadcast to {x_name}.shape[:-1] = "
            f"{tuple(target)}; note: Hugging Face position_ids of shape (B, S) must be given as "
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


@functools.lru_cache(maxsize=64)
def _cached_parameters(
    dim: int,
    base: float,
    scaling: RopeScaling | None,
    device: torch.device,
    seq_len: float | None = None,
) -> tuple[torch.Tensor, float]:
    """``rope_parameters`` with ``inv_freq`` moved to ``device``, computed once per setting.

    Private: the tensor is shared between calls and must never be modified
    (``rope_frequencies`` returns a fresh one to users). The arguments must
    be validated already (``check_base``, ``check_scaling``) so that the
    cache key is exact and hashable; ``seq_len`` is ``canonical_seq_len``'s
    (``None`` for scalings that ignore the length).
    """
    inv_freq, attention_factor = rope_parameters(dim, base=base, scaling=scaling, seq_len=seq_len)
    return inv_freq.to(device), attention_factor


def _length_key(
    scaling: RopeScaling | None, positions: torch.Tensor, seq_len: float | None
) -> float | None:
    """The canonical sequence length for ``scaling``: ``None`` unless it depends on the length.

    The length is ``seq_len`` when given, else the largest position + 1 (as
    Hugging Face's ``dynamic_rope_update`` takes it; one read from the
    device), 0 for no positions or positions on the meta device (shape
    inference: no values to read, and the shapes do not depend on them).
    """
    if not is_length_dependent(scaling):
        return None
    if seq_len is None:
        readable = positions.numel() and positions.device.type != "meta"
        seq_len = positions.max().item() + 1 if readable else 0
    return canonical_seq_len(scaling, seq_len)


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
    if inv_freq.dtype != dtype:
        inv_freq = inv_freq.to(dtype)
    positions = positions.double() if dtype == torch.float64 else positions.float()
    angles = positions.unsqueeze(-1) * inv_freq  # (..., r/2)
    cos, sin = angles.cos(), angles.sin()
    if scale != 1.0:
        cos, sin = cos * scale, sin * scale
    return cos, sin


def _pairs(t: torch.Tensor, layout: str) -> torch.Tensor:
    """View the last axis of ``t`` (size ``r``) as ``(..., 2, r/2)``, no copy.

    Row 0 holds the first member ``a_i`` of every pair, row 1 its partner
    ``b_i``: ``half`` gives ``a = t[..., :r/2]``, ``b = t[..., r/2:]`` (a
    reshape); ``interleaved`` gives ``a = t[..., 0::2]``, ``b = t[..., 1::2]``
    (a transposed reshape, strides ``(1, 2)``). One code path then serves both
    layouts, with the same arithmetic, so they agree to the last bit.
    """
    # Splitting one axis is always a view, whatever its stride; view() is a cheaper call
    # than unflatten() for the small tensors of a decode step.
    *lead, r = t.shape
    if layout == "half":
        return t.view(*lead, 2, r // 2)  # (..., 2, r/2)
    return t.view(*lead, r // 2, 2).transpose(-1, -2)  # (..., r/2, 2) -> (..., 2, r/2)


def _rotate_into(
    out: torch.Tensor, pairs: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> None:
    """``out = [a cos - b sin; b cos + a sin]`` in three passes, no temporaries.

    Args:
        out (torch.Tensor): shape ``(..., 2, r/2)``, written (not read first);
            a view into the result.
        pairs (torch.Tensor): shape ``(..., 2, r/2)``, the input ``[a; b]``.
        cos (torch.Tensor): broadcastable to ``(..., r/2)``, in the dtype of ``out``.
        sin (torch.Tensor): same shape as ``cos``.

    Per rotated element this reads the input twice and the output once and
    writes the output twice: 20 bytes in float32, against 8 for a single
    read and write and 40 for ``x * cos + rotate_half(x) * sin``. The second
    and third passes are ``addcmul_``, which may round ``a cos - b sin`` once
    (a fused multiply-add on CPUs that have one) instead of twice: within
    one rounding of the product of the textbook formula.
    """
    a, b = pairs.unbind(-2)  # (..., r/2) each; unbind: two views for one call
    out_a, out_b = out.unbind(-2)
    torch.mul(pairs, cos.unsqueeze(-2), out=out)  # [a cos; b cos]
    out_a.addcmul_(b, sin, value=-1.0)  # a cos - b sin
    out_b.addcmul_(a, sin)  # b cos + a sin


#: Below this many elements of ``x``, :func:`_rotate` takes the out-of-place path:
#: for a decode step the cost is the number of calls into torch, not bytes.
_SMALL = 1 << 15


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """Rotate the first ``r = 2 * cos.shape[-1]`` features of ``x``; pass the rest.

    Large inputs are written into one fresh tensor with ``torch.mul(..., out=)``
    and ``addcmul_`` (see :func:`_rotate_into`), without temporaries. Small
    inputs (fewer than ``_SMALL`` elements, such as a decode step), and
    inputs for which autograd records, take :func:`_rotate_out_of_place`,
    which needs fewer calls and is differentiable. Both paths do the same
    arithmetic and agree to the last bit; nothing is written to ``x``.

    Args:
        x (torch.Tensor): shape ``(..., h_d)``, floating point, ``h_d >= r``.
        cos (torch.Tensor): shape broadcastable to ``(..., r/2)``.
        sin (torch.Tensor): same shape as ``cos``.
        layout (str): ``"half"`` or ``"interleaved"``.

    Returns:
        torch.Tensor: shape and dtype of ``x``.
    """
    rot, dim = 2 * cos.shape[-1], x.shape[-1]
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    if cos.dtype != compute:
        cos, sin = cos.to(compute), sin.to(compute)
    xr = x if rot == dim else x.narrow(-1, 0, rot)  # (..., r)
    pairs = _pairs(xr, layout)  # (..., 2, r/2)

    if x.numel() < _SMALL or (
        torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad)
    ):
        return _rotate_out_of_place(x, pairs, cos, sin, layout)

    if x.dtype == compute:
        out = torch.empty_like(x)  # (..., h_d), x's memory layout
        _rotate_into(_pairs(out if rot == dim else out.narrow(-1, 0, rot), layout), pairs, cos, sin)
    else:  # float16, bfloat16: rotate in float32, round once
        rotated = torch.empty(xr.shape, dtype=compute, device=x.device)  # (..., r)
        _rotate_into(_pairs(rotated, layout), pairs, cos, sin)
        if rot == dim:
            return rotated.to(x.dtype)
        out = torch.empty_like(x)
        out.narrow(-1, 0, rot).copy_(rotated)
    if rot < dim:
        out.narrow(-1, rot, dim - rot).copy_(x.narrow(-1, rot, dim - rot))
    return out


def _rotate_out_of_place(
    x: torch.Tensor, pairs: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> torch.Tensor:
    """:func:`_rotate` in out-of-place operations: few calls, differentiable.

    ``addcmul(a cos, b, sin, value=-1)`` is the same kernel as the in-place
    ``addcmul_`` of :func:`_rotate_into`, so both paths round alike.
    """
    a, b = pairs.unbind(-2)  # (..., r/2) each
    out_a = torch.addcmul(a * cos, b, sin, value=-1.0)  # a cos - b sin
    out_b = torch.addcmul(b * cos, a, sin)  # b cos + a sin
    if layout == "half":
        out = torch.cat((out_a, out_b), dim=-1)  # (..., r)
    else:
        out = torch.stack((out_a, out_b), dim=-1).flatten(-2)  # (..., r/2, 2) -> (..., r)
    if out.dtype != x.dtype:
        out = out.to(x.dtype)
    rot, dim = out.shape[-1], x.shape[-1]
    if rot < dim:
        out = torch.cat((out, x.narrow(-1, rot, dim - rot)), dim=-1)
    return out


def _rotate_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> torch.Tensor:
    """The textbook rotation, one operation per term: what ``torch.compile`` fuses.

    Same contract as :func:`_rotate`. Every product is rounded on its own
    (as in Hugging Face's ``q * cos + rotate_half(q) * sin``).
    """
    rot = 2 * cos.shape[-1]
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = cos.to(compute), sin.to(compute)
    pairs = _pairs(x[..., :rot].to(compute), layout)  # (..., 2, r/2)
    a, b = pairs[..., 0, :], pairs[..., 1, :]  # (..., r/2) each
    out = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-2)  # (..., 2, r/2)
    out = out.flatten(-2) if layout == "half" else out.transpose(-1, -2).flatten(-2)
    out = out.to(x.dtype)  # (..., r)
    if rot < x.shape[-1]:
        out = torch.cat((out, x[..., rot:]), dim=-1)
    return out


_fused_state: dict[str, object] = {"fn": None, "failed": False}


def _rotate_fused(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> torch.Tensor:
    """:func:`_rotate_reference` compiled by ``torch.compile`` into one kernel, when it can be.

    Optional and never required: the first call compiles (seconds to tens of
    seconds on a CPU, and a C++ compiler must be installed); if compiling or
    running the compiled code fails for any reason, this and every later
    call fall back to the eager :func:`_rotate`. The fused kernel reads
    ``x`` and writes the result once (plus ``cos`` and ``sin``), the
    minimum; its numbers agree with :func:`_rotate_reference`'s and
    :func:`_rotate`'s within one rounding of a product.
    """
    if not _fused_state["failed"]:
        try:
            if _fused_state["fn"] is None:
                _fused_state["fn"] = torch.compile(_rotate_reference, dynamic=False)
            return _fused_state["fn"](x, cos, sin, layout)  # type: ignore[operator]
        except Exception:  # no compiler, unsupported platform, ...: eager it is
            _fused_state["failed"] = True
    return _rotate(x, cos, sin, layout)


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
    seq_len: int | None = None,
) -> torch.Tensor:
    """Rotate the last axis of ``x`` by the angles ``positions * rope_frequencies(...)``.

    For frequency ``i`` and the pair ``(a, b)`` it acts on (see ``layout``),
    ``a' = a cos(p theta_i) - b sin(p theta_i)`` and
    ``b' = b cos(p theta_i) + a sin(p theta_i)``, then the result is
    multiplied by the scaling's attention factor (``YarnScaling``,
    ``LongRopeScaling``; q and k both, so the logits scale by its square).

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
        seq_len (int | None): the sequence length for the length-dependent
            scalings (``DynamicNTKScaling``, ``LongRopeScaling``), >= 0.
            Default: the largest position + 1, as Hugging Face takes it,
            which reads one number back from the device; give it to avoid
            that read. Ignored by the other scalings.

    Returns:
        torch.Tensor: shape and dtype of ``x``.

    Raises:
        TypeError: if ``x`` or ``positions`` is not a tensor, or ``scaling``
            is not one of the scalings.
        ValueError: if ``x`` is not floating point or its last dimension is
            odd, ``rotary_dim`` is odd or outside ``[2, dim]``, ``layout`` is
            unknown, ``base`` is not finite or <= 1, ``positions`` does not
            broadcast to ``x.shape[:-1]``, ``seq_len`` is negative, or a
            LongRoPE factor list does not have ``r // 2`` entries.
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
    base, scaling = check_base(base), check_scaling(scaling)  # validated before the cache
    _check_broadcast(positions, x, "x")
    length = _length_key(scaling, positions, check_seq_len(seq_len))
    inv_freq, attention_factor = _cached_parameters(rot, base, scaling, x.device, length)

    if positions.device != x.device:
        positions = positions.to(x.device)
    cos, sin = _cos_sin(positions, inv_freq, attention_factor, _angle_dtype(positions, x))
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

    With a length-dependent scaling (``DynamicNTKScaling``,
    ``LongRopeScaling``) the cache holds the frequencies of sequences no
    longer than ``original_max_positions``; a longer sequence (its length
    taken as in :func:`apply_rope`: ``seq_len``, else the largest position
    + 1) is computed directly with its own frequencies.

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
        inv_freq, attention_factor = rope_parameters(
            self.dim,
            base=self.base,
            scaling=self.scaling,
            seq_len=canonical_seq_len(self.scaling, 0),  # the short frequencies, if any
        )
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
        # the tensors rope_init wrote and their storage: the per-call check compares
        # identities and pointers instead of rebuilding the key
        self._cache_refs = (cos, sin, cos.data_ptr(), sin.data_ptr())

    def _buffers_key(self) -> tuple[object, ...]:
        # Identifies the storage rope_init wrote. `module.to(other device)`, `.half()`
        # and `.to_empty()` all put new storage in the buffers, so the key changes.
        cos, sin = self.cos_cached, self.sin_cached
        return (cos.device, cos.dtype, cos.data_ptr(), sin.dtype, sin.data_ptr())

    def _cache_valid(self, device: torch.device) -> bool:
        return self.cos_cached.device == device and self._cache_key == self._buffers_key()

    def _tables(self, n_needed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The cos and sin cache, valid on ``device`` for positions ``< n_needed``.

        The fast path, taken on every call once the cache is warm, checks
        that the buffers are still the tensors :meth:`rope_init` wrote, on
        the same storage and device, and long enough: identity and pointer
        comparisons, no call into torch. Anything else goes through
        :meth:`_ensure_cache`, which rebuilds or grows the cache.
        """
        cos, sin, cos_ptr, sin_ptr = self._cache_refs
        buffers = self._buffers
        if (
            buffers.get("cos_cached") is cos
            and buffers.get("sin_cached") is sin
            and cos.shape[0] >= n_needed
            and cos.device == device
            and cos.data_ptr() == cos_ptr
            and sin.data_ptr() == sin_ptr
        ):
            return cos, sin
        self._ensure_cache(n_needed, device)
        return buffers["cos_cached"], buffers["sin_cached"]

    def _ensure_cache(self, n_needed: int, device: torch.device) -> None:
        current = self.cos_cached.shape[0]
        valid = self._cache_valid(device)
        if valid and current >= n_needed:
            return
        n = max(n_needed, 2 * current if valid else current)
        self.rope_init(min(n, self.max_cache_positions), device)

    @staticmethod
    def _is_range(positions: torch.Tensor, low: int, n: int) -> bool:
        """Whether ``positions`` is ``low, low + 1, ..., low + n - 1`` along its last axis only."""
        if positions.shape[-1] != n:  # a batch of sequences: gather instead
            return False
        expected = torch.arange(low, low + n, device=positions.device, dtype=positions.dtype)
        return torch.equal(positions.reshape(-1), expected)

    def _cos_sin_for(
        self, positions: torch.Tensor, device: torch.device, angle_dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of shape ``(*positions.shape, dim/2)``, from the cache when it can."""
        if positions.device != device:
            positions = positions.to(device)
        if (
            angle_dtype == torch.float32
            and not positions.is_floating_point()
            and positions.numel() > 0
            and device.type != "meta"  # shape inference: no values to look at
        ):
            if positions.numel() == 1:  # a decode step: one value, one call
                low = high = int(positions.item())
            else:
                low, high = (int(v) for v in torch.aminmax(positions))
            if low >= 0 and high < self.max_cache_positions:
                cos, sin = self._tables(high + 1, device)
                shape = (*positions.shape, self.dim // 2)
                n = positions.numel()
                if high - low + 1 == n and (n == 1 or self._is_range(positions, low, n)):
                    # consecutive positions (a prompt, a decode step): rows of the cache
                    # as they are, no copy
                    return cos.narrow(0, low, n).view(shape), sin.narrow(0, low, n).view(shape)
                # index_select on the flat positions: a plain gather of rows, several
                # times faster than advanced indexing (cos_cached[positions])
                index = positions.reshape(-1)
                if index.dtype not in (torch.int32, torch.int64):
                    index = index.long()
                cos, sin = cos.index_select(0, index), sin.index_select(0, index)
                return cos.view(shape), sin.view(shape)
        return _cos_sin(positions, self._inv_freq.to(device), self.attention_factor, angle_dtype)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        positions: torch.Tensor,
        *,
        seq_len: int | None = None,
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
            seq_len (int | None): the sequence length for a length-dependent
                scaling, >= 0; default the largest position + 1 (one read
                from the device). Ignored by the other scalings.

        Returns:
            tuple[torch.Tensor, torch.Tensor]: rotated ``q`` and ``k``, each
            with its input's shape and dtype.

        Raises:
            ValueError: if ``q`` or ``k`` is not floating point or has a head
                size smaller than ``dim``, ``positions`` does not broadcast,
                or ``seq_len`` is negative.
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
        seq_len = check_seq_len(seq_len)

        if is_length_dependent(self.scaling):
            length = _length_key(self.scaling, positions, seq_len)
            if length != canonical_seq_len(self.scaling, 0):  # longer than the cache's frequencies
                inv_freq, factor = _cached_parameters(
                    self.dim, self.base, self.scaling, q.device, length
                )
                angle_dtype = _angle_dtype(positions, q, k)
                cos, sin = _cos_sin(positions.to(q.device), inv_freq, factor, angle_dtype)
                return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)

        cos, sin = self._cos_sin_for(positions, q.device, _angle_dtype(positions, q, k))
        return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base}, layout={self.layout!r}, scaling={self.scaling!r}"
