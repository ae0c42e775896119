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
agrees with the textbook formula, which rounds both products, within a few
units of rounding of ``|a cos| + |b sin|`` (about four in the worst case),
and the two layouts, the function and the module, small and large inputs
all agree with each other to the last bit.

Performance: RoPE is a streaming operation, bound by memory traffic. The
rotation writes straight into one output tensor (``torch.mul(..., out=)``,
then ``addcmul_`` on each half): 20 bytes moved per float32 element of
``x`` by the operations (plus the rows of the tables, read again in every
block), against 40 for Hugging Face's eager ``x * cos + rotate_half(x) *
sin`` and 8 for a single read and write of ``x`` (counts of
``posenc_lab.traffic.count_traffic``). It runs block by block (about 1 MiB
of float32 per block and per two threads), so that the second and third
passes over a block may find it in the processor's cache rather than in
main memory; the bytes counted are the same, and whether the blocks save
time depends on the machine's caches and load: no stored record measures
it (an earlier benchmark that suggested they did was disturbed by page
faults of fresh outputs, see ``lab/README.md``). Each operation on a block
ends by waiting for its slowest thread, so on a machine with more runnable
threads than cores the blocks may cost more than they save.
Small inputs (a decode step) take an out-of-place path with fewer calls
into torch; ``apply_rope`` caches the inverse frequencies per setting, and
:class:`RotaryEmbedding` caches ``cos`` and ``sin``. ``python -m
posenc_lab.cpu_bench`` times both against the floor and Hugging Face's
formula on the CPU; one read and one write per element, the floor itself,
needs a fused kernel: :func:`posenc.rope_triton.apply_rope_triton` on a GPU.

Compilation (an opt-in; eager mode needs no compiler): ``apply_rope`` and
``RotaryEmbedding`` trace into one graph under
``torch.compile(fullgraph=True)``. The compiled path to use is the module
with a fixed cache, ``torch.compile(RotaryEmbedding(dim, max_positions=n))``
(or a compiled model that holds one): the gather of the cached rows and the
rotation can then be fused (``python -m posenc_lab.cpu_bench --compile``
times it). A compiled ``apply_rope`` forms the angles and their ``cos`` and
``sin`` from the positions inside the compiled code on every call, which a
cached table avoids.

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
    ok = len(shape) <= len(target)
    # a loop rather than all(zip(...)), which torch.compile before 2.13 cannot trace
    for axis in range(1, len(shape) + 1 if ok else 1):
        if shape[-axis] != 1 and shape[-axis] != target[-axis]:
            ok = False
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


def _swap(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Exchange the members of every pair of the last axis: ``[a; b] -> [b; a]``.

    ``half``: one ``roll`` by ``r/2`` (a single call into torch);
    ``interleaved``: ``(a_0, b_0, a_1, ...) -> (b_0, a_0, b_1, ...)``, a
    ``flip`` of the ``(r/2, 2)`` view. Exact: values are only moved.
    """
    r = x.shape[-1]
    if layout == "half":
        return x.roll(r // 2, -1)
    return x.view(*x.shape[:-1], r // 2, 2).flip(-1).view(x.shape)


_FAST_DTYPES = frozenset((torch.float32, torch.bfloat16, torch.float16))
_INDEX_DTYPES = frozenset((torch.int64, torch.int32))

#: Below this many elements of ``x``, :func:`_rotate` takes the out-of-place path:
#: for a decode step the cost is the number of calls into torch, not bytes.
_SMALL = 1 << 15


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """Rotate the first ``r = 2 * cos.shape[-1]`` features of ``x``; pass the rest.

    Large inputs are written into one fresh tensor with ``torch.mul(..., out=)``
    and ``addcmul_`` (see :func:`_rotate_into`), without temporaries, block
    by block on the CPU (:func:`_for_blocks`, about 1 MiB of float32 each) so
    that the three passes over a block may hit the processor's cache; on
    other devices in one piece, as blocks there only add launches. Small
    inputs (fewer than ``_SMALL`` elements, such as a decode step), inputs
    for which autograd records, and every input under ``torch.compile``
    (which fuses the out-of-place operations, and cannot trace ``out=``
    into a strided view), take :func:`_rotate_out_of_place`,
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

    if (
        x.numel() < _SMALL
        or torch.compiler.is_compiling()  # out= into strided views breaks graphs; fused anyway
        or (torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad))
    ):
        return _rotate_out_of_place(x, pairs, cos, sin, layout)

    out = torch.empty_like(x)  # (..., h_d), x's memory layout
    out_r = out if rot == dim else out.narrow(-1, 0, rot)  # (..., r)
    # cos and sin with x's number of axes, so that blocks narrow them alike
    lead = (1,) * (x.dim() - cos.dim())
    cos, sin = cos.view(*lead, *cos.shape), sin.view(*lead, *sin.shape)
    if x.dtype == compute:

        def block(xb: torch.Tensor, ob: torch.Tensor, cb: torch.Tensor, sb: torch.Tensor) -> None:
            _rotate_into(_pairs(ob, layout), _pairs(xb, layout), cb, sb)

    else:  # float16, bfloat16: rotate each block in float32, round once into out

        def block(xb: torch.Tensor, ob: torch.Tensor, cb: torch.Tensor, sb: torch.Tensor) -> None:
            rotated = torch.empty(xb.shape, dtype=compute, device=xb.device)  # (..., r)
            _rotate_into(_pairs(rotated, layout), _pairs(xb, layout), cb, sb)
            ob.copy_(rotated)

    if x.device.type == "cpu":  # blocks for the CPU's caches; on a GPU they add launches
        _for_blocks(block, (xr, out_r, cos, sin))
    else:
        block(xr, out_r, cos, sin)
    if rot < dim:
        out.narrow(-1, rot, dim - rot).copy_(x.narrow(-1, rot, dim - rot))
    return out


#: Elements of ``x`` per block of :func:`_for_blocks` (1 MiB of float32).
_BLOCK = 1 << 18


def _for_blocks(fn, tensors: tuple[torch.Tensor, ...], axis: int = 0) -> None:
    """Call ``fn`` on blocks of about ``_BLOCK`` elements of ``tensors[0]``.

    The block grows with the number of threads beyond two
    (``_BLOCK * max(1, torch.get_num_threads() // 2)``), so that each
    thread's share of an operation stays near half a MiB. The tensors have
    the same number of axes; each is narrowed along the leading axes (never
    the last) where its size is not 1 (``cos`` and ``sin`` broadcast along
    the heads). The three passes of :func:`_rotate_into` then run over a
    block that may still be in the processor's cache, instead of streaming
    20 bytes per float32 element through main memory. The arithmetic, and so
    every bit of the result, is unchanged; what the blocks save in time is
    not measured by any stored record (see the module docstring).
    """
    x = tensors[0]
    block = _BLOCK * max(1, torch.get_num_threads() // 2)
    if x.numel() <= block or axis >= x.dim() - 1:
        fn(*tensors)
        return
    size = x.shape[axis]
    per = x.numel() // size  # elements per index along this axis
    step = max(1, block // per)
    for start in range(0, size, step):
        n = min(step, size - start)
        parts = tuple(t if t.shape[axis] == 1 else t.narrow(axis, start, n) for t in tensors)
        if per > block:
            _for_blocks(fn, parts, axis + 1)
        else:
            fn(*parts)


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
    """:func:`_rotate_reference` compiled by ``torch.compile`` (presumably one kernel), when it can.

    Optional and never required: the first call compiles (seconds to tens of
    seconds on a CPU, and a C++ compiler must be installed); if compiling or
    running the compiled code fails for any reason, this and every later
    call fall back to the eager :func:`_rotate`. The fused kernel presumably
    reads ``x`` and writes the result once (plus ``cos`` and ``sin``), the
    minimum (not checked against the generated kernel); its numbers agree
    with :func:`_rotate_reference`'s and :func:`_rotate`'s within one
    rounding of a product.
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
    # under torch.compile the frequencies are traced (and folded) rather than cached
    parameters = (
        _cached_parameters.__wrapped__ if torch.compiler.is_compiling() else _cached_parameters
    )
    inv_freq, attention_factor = parameters(rot, base, scaling, x.device, length)

    if positions.device != x.device:
        positions = positions.to(x.device)
    cos, sin = _cos_sin(positions, inv_freq, attention_factor, _angle_dtype(positions, x))
    return _rotate(x, cos, sin, layout)


# ---------------------------------------------------------------------------
# Module
# ---------------------------------------------------------------------------


class RotaryEmbedding(nn.Module):
    """RoPE for queries and keys, from a cache of ``cos`` and ``sin``.

    ``forward(q, k, positions)`` equals ``apply_rope`` on ``q`` and on ``k``
    with ``rotary_dim=dim``, to the last bit. Integer positions are looked
    up in a cache of the rotation for positions ``0 .. n-1``; floating
    positions and float64 inputs are computed directly. The module has two
    modes, which differ in where the cache grows and where positions are
    checked:

    - ``max_positions=None`` (default; convenient in eager mode): the cache
      grows geometrically to cover the largest position seen. To know that
      position, ``forward`` reads the smallest and largest position back to
      the host (one ``.item()`` or ``aminmax`` per call: on a GPU, a
      synchronisation per call). Negative positions and positions at or
      beyond ``max_cache_positions`` are computed directly, so a position of
      ``2**40`` allocates nothing in proportion to it. Under
      ``torch.compile`` the values cannot be read, and every call computes
      ``cos`` and ``sin`` directly from the positions (no cache, no graph
      break).
    - ``max_positions=n`` (the per-step path of a model: decoding, CUDA
      graphs, ``torch.compile(fullgraph=True)``): the cache for positions
      ``0 .. n-1`` is built once, at construction (or by :meth:`reserve`),
      and ``forward`` gathers its rows (one ``index_select``) without
      looking at the values: no host read, no growth, no graph break.
      Integer positions must lie in ``[0, n)``; on the CPU an integer
      position outside raises an ``IndexError`` that names the bound (the
      gather checks it, at no extra cost); on an accelerator the gather's
      device-side assertion fires instead (a check on the host would
      synchronise every call).

    In both modes the types, dtypes and shapes of the inputs are checked on
    the host, from their metadata alone, with the errors listed below.

    The cache: ``rot_cached`` of shape ``(n, 2, dim)`` holds, for each
    position, the multipliers ``[cos; s * sin]`` of the whole head in the
    module's layout (``s = -1`` on the first member of each pair, ``+1`` on
    the second); ``cos_cached`` and ``sin_cached``, ``(n, dim/2)``, are views
    of it, and ``inv_freq``, ``(dim/2,)``, holds the frequencies. All four
    are float32 tensor attributes derived from the settings, not buffers and
    not parameters: the module has neither, and its ``state_dict`` is empty.

    - Distributed training: ``DistributedDataParallel`` broadcasts every
      buffer from rank 0 at each step (``forward_sync_buffers``, default
      ``True``; ``broadcast_buffers`` before torch 2.13, now deprecated); a
      cache held in buffers would grow to each rank's longest
      sequence, differ in size between ranks and abort that broadcast. Being
      no buffer, the cache is never broadcast: each rank keeps its own, and
      the default settings are safe under DDP (FSDP's ``sync_module_states``
      likewise has nothing of it to synchronise).
    - Devices and initialisation: the module moves the cache itself (it
      overrides ``nn.Module._apply``): ``module.to(device)``, ``.cuda()`` and
      ``.to_empty(device=...)`` rebuild it on the new device from the
      settings, never from uninitialised memory; casts such as ``.half()``
      leave it in float32. It can be created on the meta device (``with
      torch.device("meta"): ...``); ``to_empty`` then rebuilds it, and
      :meth:`reset_parameters` rebuilds it as construction does. FSDP1's
      materialisation calls neither on a module without parameters or
      buffers of its own, so the cache can stay on meta: in eager mode,
      inputs on another device than the cache rebuild it where the inputs
      are; under ``torch.compile`` (which cannot rebuild it) ``cos`` and
      ``sin`` are then computed from the positions, the same values, until
      an eager call, ``to_empty`` or :meth:`reserve` puts the cache there.

    With a length-dependent scaling (``DynamicNTKScaling``,
    ``LongRopeScaling``) the cache holds the frequencies of sequences no
    longer than ``original_max_positions``; a longer sequence (its length
    taken as in :func:`apply_rope`: ``seq_len``, else the largest position
    + 1, a read from the device that an explicit ``seq_len`` avoids) is
    computed directly with its own frequencies.

    A decode step (fewer than 32768 elements per tensor) is rotated as
    ``x * C + swap(x) * S`` with the cached full-width rows ``C`` and ``S``
    (``swap`` exchanges the members of each pair): three operations per
    tensor, the same arithmetic as :func:`apply_rope` and the same bits.

    Args:
        dim (int): number of rotated features per head, even and >= 2. Heads
            larger than ``dim`` are rotated in their first ``dim`` features
            only (partial rotation).
        base (float): frequency base, finite and > 1. Default 10000.
        layout (str): ``"half"`` (GPT-NeoX, Hugging Face) or
            ``"interleaved"`` (RoFormer, GPT-J, Meta's Llama). Default ``"half"``.
        scaling (RopeScaling | None): a frequency scaling, or ``None``.
        max_positions (int | None): build the cache for positions
            ``0 .. max_positions - 1`` now and never grow or inspect it in
            ``forward`` (see above); a positive integer, or ``None`` for the
            growing cache. Default ``None``.

    Raises:
        ValueError: if ``dim`` is odd or < 2, ``base`` is not finite or
            <= 1, ``layout`` is unknown, or ``max_positions`` < 1.
        TypeError: if ``scaling`` is not one of the scalings or ``None``, or
            ``max_positions`` is not an integer.

    Example:
        >>> rope = RotaryEmbedding(64, max_positions=4096)
        >>> q = k = torch.randn(1, 8, 1, 64)  # one new token
        >>> rq, rk = rope(q, k, torch.tensor([1000]))
        >>> rq.shape
        torch.Size([1, 8, 1, 64])
    """

    #: Integer positions at or beyond this bound bypass the growing cache.
    max_cache_positions: int = 2**20
    #: Rows of the cache built at construction when ``max_positions`` is ``None``.
    initial_cache_positions: int = 256

    rot_cached: torch.Tensor
    cos_cached: torch.Tensor
    sin_cached: torch.Tensor
    inv_freq: torch.Tensor

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        layout: str = "half",
        scaling: RopeScaling | None = None,
        max_positions: int | None = None,
    ) -> None:
        super().__init__()
        self.dim = check_even("dim", dim)
        self.base = check_base(base)
        self.layout = check_choice("layout", layout, _LAYOUTS)
        self.scaling = check_scaling(scaling)
        self.max_positions = (
            None if max_positions is None else check_size("max_positions", max_positions)
        )
        # the eager decode step (_decode_step) serves a fixed cache and a scaling whose
        # frequencies do not depend on the length
        self._fast = self.max_positions is not None and not is_length_dependent(self.scaling)
        self.rope_init(self.max_positions)

    @classmethod
    def from_hf_config(
        cls,
        config: object,
        *,
        layer_type: str | None = None,
        layout: str | None = None,
        max_positions: int | None = None,
    ) -> RotaryEmbedding:
        """The RoPE of a Hugging Face transformers model, from its config.

        Reads the settings that transformers' rope initialisation functions
        read, in the layout of transformers 4.x (``rope_theta``,
        ``partial_rotary_factor`` and ``rope_scaling`` at the top level) or
        5.x (``rope_parameters``, possibly one dict per layer type), and
        returns the module whose ``inv_freq`` and ``attention_factor`` equal
        transformers' for the same config (to the last bit on the CPU; the
        length-dependent ``"dynamic"`` and ``"longrope"`` at every length, as
        ``rope_frequencies(..., seq_len=n)``). Nothing is downloaded: pass the
        config object, or the dict of a ``config.json``.

        - ``rope_type`` (or the older ``type``): ``"default"`` (no scaling),
          ``"linear"`` (:class:`posenc.LinearScaling`), ``"dynamic"``
          (:class:`posenc.DynamicNTKScaling` with
          ``original_max_positions=max_position_embeddings``), ``"yarn"``
          (:class:`posenc.YarnScaling`, with ``beta_fast``, ``beta_slow``,
          ``mscale``, ``mscale_all_dim``, ``truncate`` and
          ``attention_factor``), ``"longrope"``
          (:class:`posenc.LongRopeScaling`), ``"llama3"``
          (:class:`posenc.Llama3Scaling`), ``"proportional"``
          (:class:`posenc.ProportionalScaling`, ``partial_rotary_factor``
          as its fraction of the whole head).
        - The rotated features: ``head_dim`` (``qk_rope_head_dim`` for
          DeepSeek's multi-head latent attention; else ``hidden_size //
          num_attention_heads``) times ``partial_rotary_factor``, rounded
          down; a larger head passes the rest through, as transformers does.
        - The original context: ``original_max_position_embeddings`` at the
          top level (Phi-3), else in the scaling dict, else
          ``max_position_embeddings``; YaRN and LongRoPE without ``factor``
          take ``max_position_embeddings / original_max_position_embeddings``.
        - A multimodal config's ``text_config`` is read when the top level
          has no attention settings of its own.

        Args:
            config (object): a transformers config (``PretrainedConfig``, or
                anything with ``to_dict()``) or a plain dict.
            layer_type (str | None): for configs with one set of rope
                settings per layer type (Gemma 3: ``"full_attention"`` for
                the global layers, ``"sliding_attention"`` for the local
                ones, which transformers 4.x configs give as
                ``rope_local_base_freq``). Required there; otherwise
                ignored, but it must be one of ``layer_types`` when the
                config lists them.
            layout (str | None): ``"half"`` or ``"interleaved"``. Default:
                ``"interleaved"`` when the config sets ``rope_interleave``
                (transformers' DeepSeek-V3 class does; a ``config.json``
                dict does not say), else ``"half"`` (transformers'
                ``rotate_half``).
            max_positions (int | None): as for the constructor.

        Returns:
            RotaryEmbedding: the module.

        Raises:
            TypeError: if ``config`` is neither a dict nor has ``to_dict()``,
                or a setting has the wrong type.
            ValueError: naming the key, if a required key is missing, a key
                is one the rope type does not read, the rope type is not
                supported (M-RoPE's ``mrope_section`` included: use
                :func:`posenc.apply_mrope`), ``layer_type`` is missing or
                unknown, or a value is out of range.

        Example:
            >>> config = {"hidden_size": 4096, "num_attention_heads": 32,
            ...           "max_position_embeddings": 131072, "rope_theta": 500000.0,
            ...           "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
            ...                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            ...                            "original_max_position_embeddings": 8192}}
            >>> RotaryEmbedding.from_hf_config(config)
            RotaryEmbedding(dim=128, base=500000.0, layout='half', scaling=Llama3Scaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_positions=8192))
        """
        from posenc._hf_config import rope_settings

        dim, base, scaling, interleaved = rope_settings(config, layer_type)
        if layout is None:
            layout = "interleaved" if interleaved else "half"
        return cls(dim, base=base, layout=layout, scaling=scaling, max_positions=max_positions)

    def rope_init(self, n_positions: int | None = None, device: torch.device | None = None) -> None:
        """(Re)build the frequencies and the cache for positions ``0 .. n_positions-1``.

        Args:
            n_positions (int | None): rows of the cache. Default
                ``max_positions``, or ``initial_cache_positions`` when that
                is ``None``.
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
        self.attention_factor = attention_factor
        if n_positions is None:
            n_positions = self.max_positions or self.initial_cache_positions
        n = int(n_positions)
        if device is None:
            device = torch.empty(0).device
        inv_freq = inv_freq.to(device)  # (dim/2,) float32
        positions = torch.arange(n, dtype=torch.float32, device=device)  # (n,)
        cos, sin = _cos_sin(positions, inv_freq, attention_factor, torch.float32)  # (n, dim/2)
        table = torch.empty(n, 2, self.dim, device=device)  # (n, 2, dim): [C; S] per position
        c_pairs = _pairs(table[:, 0], self.layout)  # (n, 2, dim/2): both members of each pair
        s_pairs = _pairs(table[:, 1], self.layout)
        c_pairs.copy_(cos.unsqueeze(-2))  # C = cos on both members
        s_pairs.select(-2, 0).copy_(-sin)  # S = -sin on the first member ...
        s_pairs.select(-2, 1).copy_(sin)  # ... and +sin on the second
        # plain attributes, not buffers: DistributedDataParallel broadcasts every buffer
        # from rank 0 each step, and a cache that grows with each rank's longest sequence
        # differs in size between ranks (see the class docstring); _apply moves them
        self.inv_freq = inv_freq
        self.rot_cached = table
        self.cos_cached = c_pairs.select(-2, 0)
        self.sin_cached = s_pairs.select(-2, 1)

    def reset_parameters(self) -> None:
        """Rebuild the cache as construction builds it (the module has no parameters).

        Rows for ``max_positions`` positions (``initial_cache_positions``
        without it), on the device the cache is on now. ``to_empty`` and
        moves rebuild the cache already (see the class docstring); this is
        for a loop that resets every module after ``to_empty``.
        """
        self.rope_init(None, self.rot_cached.device)

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        """Follow the module's moves with the cache, which is not a buffer.

        ``to``, ``cuda``, ``cpu``, ``to_empty`` and the casts all call
        ``_apply``; the device they move to is read from ``fn`` applied to an
        empty tensor on the cache's device, and the cache is rebuilt there
        (in float32: casts such as ``half()`` leave it alone).
        """
        module = super()._apply(fn, *args, **kwargs)
        current = self.rot_cached.device
        try:
            target = fn(torch.empty(0, device=current)).device
        except (RuntimeError, NotImplementedError):  # e.g. .to("cpu") of a meta cache
            return module  # the next eager call rebuilds it where its inputs are
        if target != current:
            self.rope_init(self.rot_cached.shape[0], target)
        return module

    def reserve(self, n_positions: int, device: torch.device | str | None = None) -> None:
        """Build the cache for positions ``0 .. n_positions - 1`` now.

        The explicit place for cache growth: call it before compiling or
        before capturing a CUDA graph, or to raise the bound of a module
        built with ``max_positions`` (which becomes ``n_positions``).

        Args:
            n_positions (int): rows of the cache, a positive integer.
            device (torch.device | str | None): where to build it. Default:
                where the cache is now (the default device if that is meta).

        Raises:
            TypeError: if ``n_positions`` is not an integer.
            ValueError: if ``n_positions`` < 1.
        """
        n = check_size("n_positions", n_positions)
        if device is None:
            device = self.rot_cached.device
            if device.type == "meta":
                device = torch.empty(0).device
        if self.max_positions is not None:
            self.max_positions = n
        self._fast = self.max_positions is not None and not is_length_dependent(self.scaling)
        self.rope_init(n, torch.device(device))

    def _cache(self, n_needed: int, device: torch.device) -> torch.Tensor:
        """``rot_cached``, valid on ``device`` for positions ``< n_needed`` (eager mode).

        The fast path, taken on every call once the cache is warm, checks
        that the cache is on ``device`` and long enough: metadata only, no
        call into torch. Anything else rebuilds it there or grows it.
        """
        table = self.rot_cached
        same_device = table.device == device
        if same_device and table.shape[0] >= n_needed:
            return table
        current = table.shape[0]
        if self.max_positions is not None:
            n = max(n_needed, self.max_positions)
        else:
            grown = 2 * current if same_device else current
            n = min(max(n_needed, grown), self.max_cache_positions)
        self.rope_init(n, device)
        return self.rot_cached

    @staticmethod
    def _is_range(positions: torch.Tensor, low: int, n: int) -> bool:
        """Whether ``positions`` is ``low, low + 1, ..., low + n - 1`` along its last axis only."""
        if positions.shape[-1] != n:  # a batch of sequences: gather instead
            return False
        expected = torch.arange(low, low + n, device=positions.device, dtype=positions.dtype)
        return torch.equal(positions.reshape(-1), expected)

    def _gather(self, table: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rows ``table[positions]``, shape ``(*positions.shape, 2, dim)``, by ``index_select``.

        A plain gather of rows, several times faster than advanced indexing.
        """
        index = positions if positions.dim() == 1 else positions.reshape(-1)
        if index.dtype not in (torch.int32, torch.int64):
            index = index.long()
        rows = table.index_select(0, index)  # (n, 2, dim)
        return rows if positions.dim() == 1 else rows.view(*positions.shape, 2, self.dim)

    def _rows(
        self, positions: torch.Tensor, device: torch.device, angle_dtype: torch.dtype
    ) -> torch.Tensor | None:
        """Cached rows ``(*positions.shape, 2, dim)`` for ``positions``, or ``None`` to compute."""
        if (
            angle_dtype != torch.float32
            or positions.is_floating_point()
            or positions.numel() == 0
            or device.type == "meta"  # shape inference: no values to look at
        ):
            return None
        compiling = torch.compiler.is_compiling()
        if self.max_positions is not None:  # fixed cache: gather, never look at the values
            if compiling:
                if self.rot_cached.device != device:  # e.g. left on meta: compute instead
                    return None
                return self._gather(self.rot_cached, positions)
            table = self._cache(0, device)
            try:
                return self._gather(table, positions)
            except IndexError:
                raise IndexError(
                    f"positions must lie in [0, max_positions) = [0, {self.max_positions}) "
                    f"for integer positions, got values in [{int(positions.min())}, "
                    f"{int(positions.max())}]; call reserve(n) to raise the bound"
                ) from None
        if compiling:  # the values decide the growth: compute instead
            return None
        if positions.numel() == 1:  # a decode step: one value, one call
            low = high = int(positions.item())
        else:
            low, high = (int(v) for v in torch.aminmax(positions))
        if low < 0 or high >= self.max_cache_positions:
            return None
        table = self._cache(high + 1, device)
        n = positions.numel()
        if high - low + 1 == n and (n == 1 or self._is_range(positions, low, n)):
            # consecutive positions (a prompt, a decode step): rows of the cache, no copy
            return table.narrow(0, low, n).view(*positions.shape, 2, self.dim)
        return self._gather(table, positions)

    def _rotate_rows(self, x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Rotate the first ``dim`` features of ``x`` by cached rows ``c`` and ``s``, ``(..., dim)``.

        Small inputs (a decode step): ``x * c + swap(x) * s`` in one ``addcmul``,
        ``swap`` exchanging the members of each pair (``[a; b] -> [b; a]``);
        with ``c = [cos; cos]`` and ``s = [-sin; sin]`` this is ``[a cos - b
        sin; b cos + a sin]``, the same kernel and bits as
        :func:`_rotate_out_of_place` in four calls into torch. Large inputs
        take :func:`_rotate` with half-width views of the rows.
        """
        layout, rot, dim = self.layout, self.dim, x.shape[-1]
        if x.numel() >= _SMALL:
            cos = _pairs(c, layout).select(-2, 0)  # (..., dim/2)
            sin = _pairs(s, layout).select(-2, 1)
            return _rotate(x, cos, sin, layout)
        xr = x if rot == dim else x.narrow(-1, 0, rot)  # (..., r)
        out = torch.addcmul(xr * c, _swap(xr, layout), s)  # (..., r)
        if out.dtype != x.dtype:
            out = out.to(x.dtype)
        if rot < dim:
            out = torch.cat((out, x.narrow(-1, rot, dim - rot)), dim=-1)
        return out

    def _decode_step(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The eager decode step, or ``None`` when the inputs need the general path.

        Taken for ``max_positions`` set, 1-D integer positions of length ``s``
        and ``q``, ``k`` of shape ``(..., s, h_d)`` with ``h_d == dim`` in
        float32, bfloat16 or float16, all on the cache's device, and fewer
        than ``_SMALL`` elements each. The checks are the general path's,
        written as plain comparisons of metadata (anything unusual falls
        through to the general path and its named errors); the arithmetic
        is :meth:`_rotate_rows`'s, inlined: per tensor four calls into torch.
        """
        if type(q) is not torch.Tensor or type(k) is not torch.Tensor:
            return None
        if type(positions) is not torch.Tensor or positions.dtype not in _INDEX_DTYPES:
            return None
        table = self.rot_cached
        device = table.device
        qs, ks, ps = q.shape, k.shape, positions.shape
        dim = self.dim
        if not (
            len(ps) == 1
            and len(qs) >= 2
            and len(ks) >= 2
            and qs[-1] == dim
            and ks[-1] == dim
            and qs[-2] == ps[0]
            and ks[-2] == ps[0]
            and q.dtype in _FAST_DTYPES
            and k.dtype in _FAST_DTYPES
            and q.numel() < _SMALL
            and k.numel() < _SMALL
            and ps[0] > 0
            and q.device == device
            and k.device == device
            and positions.device == device
        ):
            return None
        try:
            c, s = table.index_select(0, positions).unbind(-2)  # (s, dim) each
        except IndexError:
            return None  # the general path raises the named error
        rq = torch.addcmul(q * c, _swap(q, self.layout), s)
        rk = torch.addcmul(k * c, _swap(k, self.layout), s)
        if rq.dtype != q.dtype:
            rq = rq.to(q.dtype)
        if rk.dtype != k.dtype:
            rk = rk.to(k.dtype)
        return rq, rk

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        positions: torch.Tensor,
        *,
        seq_len: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries and keys by their positions.

        What is checked where: the types, dtypes and shapes below, on the
        host from metadata (in eager mode and while compiling). With
        ``max_positions`` set, the range of integer positions is checked by
        the gather itself (an ``IndexError`` on the CPU, a device-side
        assertion elsewhere); without it, nothing about the values needs
        checking (any value is computed), but the values are read to grow
        the cache in eager mode. See the class docstring.

        Args:
            q (torch.Tensor): queries, shape ``(..., h_d)``, e.g.
                ``(b, n_h, s, h_d)``; floating point, ``h_d >= dim``.
            k (torch.Tensor): keys, shape ``(..., h_d_k)``, e.g.
                ``(b, n_kv, s, h_d)`` with fewer heads than ``q``
                (grouped-query attention); ``h_d_k >= dim``.
            positions (torch.Tensor): integer or floating positions that
                broadcast to ``q.shape[:-1]`` and to ``k.shape[:-1]``, e.g.
                ``(s,)`` or ``(b, 1, s)``; with ``max_positions``, integer
                positions in ``[0, max_positions)``.
            seq_len (int | None): the sequence length for a length-dependent
                scaling, >= 0; default the largest position + 1 (one read
                from the device, not graph-safe: pass it under
                ``torch.compile``). Ignored by the other scalings.

        Returns:
            tuple[torch.Tensor, torch.Tensor]: rotated ``q`` and ``k``, each
            with its input's shape and dtype.

        Raises:
            TypeError: if ``q``, ``k`` or ``positions`` is not a tensor.
            ValueError: if ``q`` or ``k`` is not floating point or has a head
                size smaller than ``dim``, ``positions`` is boolean or
                complex or does not broadcast, or ``seq_len`` is negative.
            IndexError: with ``max_positions``, on the CPU, if an integer
                position lies outside ``[0, max_positions)``.
        """
        if self._fast and seq_len is None and not torch.compiler.is_compiling():
            out = self._decode_step(q, k, positions)
            if out is not None:
                return out
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
        device = q.device
        if positions.device != device:
            positions = positions.to(device)

        if is_length_dependent(self.scaling):
            length = _length_key(self.scaling, positions, seq_len)
            if length != canonical_seq_len(self.scaling, 0):  # longer than the cache's frequencies
                parameters = (
                    _cached_parameters.__wrapped__
                    if torch.compiler.is_compiling()
                    else _cached_parameters
                )
                inv_freq, factor = parameters(self.dim, self.base, self.scaling, device, length)
                cos, sin = _cos_sin(positions, inv_freq, factor, _angle_dtype(positions, q, k))
                return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)

        angle_dtype = _angle_dtype(positions, q, k)
        rows = self._rows(positions, device, angle_dtype)
        if rows is not None:
            c, s = rows.unbind(-2)  # (*positions.shape, dim) each
            return self._rotate_rows(q, c, s), self._rotate_rows(k, c, s)
        inv_freq = self.inv_freq
        if inv_freq.device != device:  # inputs elsewhere, or a cache left on meta
            parameters = (
                _cached_parameters.__wrapped__
                if torch.compiler.is_compiling()
                else _cached_parameters
            )
            inv_freq = parameters(
                self.dim, self.base, self.scaling, device, canonical_seq_len(self.scaling, 0)
            )[0]
        cos, sin = _cos_sin(positions, inv_freq, self.attention_factor, angle_dtype)
        return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)

    def extra_repr(self) -> str:
        text = f"dim={self.dim}, base={self.base}, layout={self.layout!r}, scaling={self.scaling!r}"
        if self.max_positions is not None:
            text += f", max_positions={self.max_positions}"
        return text
