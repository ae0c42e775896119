"""RoPE for queries and keys in one fused Triton kernel (optional: ``pip install posenc[triton]``).

:func:`apply_rope_triton` rotates ``q`` and ``k`` in one launch, with the
eager :func:`posenc.apply_rope` as its reference: the same pairs, the same
angles (looked up in a table of ``cos`` and ``sin`` per position instead of
formed per call) and float32 arithmetic, rounded once to the input's dtype.
``import posenc`` does not import this module, nor Triton; import it
explicitly (``from posenc.rope_triton import apply_rope_triton``).

The kernel runs one program per token (batch row and sequence position).
A program reads the token's position, then its row of ``cos`` and ``sin``
(``r/2`` float32 values each), once, and rotates every head of ``q`` and
of ``k`` with it, a block of each at a time (a block size for each tensor,
so that few rows are masked), both blocks loaded before either is stored;
the interleaved layout is loaded as contiguous runs and split into pairs in
registers: per element one read and one
write (8 bytes in float32, 4 in bfloat16 and float16), plus ``4 r`` bytes
of table per token, shared by all its heads. One launch for q and k, one program per
token, is how vLLM's CUDA kernel (``csrc/pos_encoding_kernels.cu``: a
thread block per token, a position per token into a cos/sin cache) and
Liger Kernel's Triton kernel (``liger_kernel/ops/rope.py``, which also
rotates by ``-theta`` for its backward) are organised. Positions are read
per token, so packed sequences (positions that restart inside a row) need
nothing special.

Triton's interpreter (``TRITON_INTERPRET=1`` in the environment before this
module is imported) runs the same kernel on CPU tensors, slowly; the tests
check it that way against ``apply_rope``. On a GPU, ``python -m
posenc_lab.gpu_bench`` measures it.

Shapes: ``b`` batch, ``n_q`` query heads, ``n_k`` key heads, ``s``
sequence, ``h_d`` head size, ``r`` rotated features (``2 * cos.shape[-1]``),
``n`` rows of the table.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from posenc._checks import check_bool, check_choice, check_tensor

__all__ = ["apply_rope_triton"]

_LAYOUTS = ("half", "interleaved")
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_INDEX_DTYPES = (torch.int32, torch.int64)
#: Elements of one head block that a program holds at a time (rows x columns).
_TILE = 4096


@triton.jit
def _round_to(x, dtype: tl.constexpr, RNE_IN_INTEGERS: tl.constexpr):
    """Round float32 ``x`` to ``dtype`` to nearest, ties to even, as ``torch`` does.

    On a GPU ``x.to(dtype)`` does this (one ``cvt.rn`` instruction). Triton
    3.9's interpreter truncates in ``x.to(tl.bfloat16)`` instead, so under the
    interpreter (``RNE_IN_INTEGERS``) bfloat16 is rounded in integer
    arithmetic: add ``0x7FFF`` plus the last kept bit, keep the top 16 bits
    (NaN stays NaN). The CPU check then sees the GPU's bits, and the GPU
    pays nothing for it.
    """
    if RNE_IN_INTEGERS and dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        bits = tl.where(x != x, 0x7FC00000, bits)  # a NaN whose payload the add would carry away
        return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return x.to(dtype)


@triton.jit
def _load_pairs(
    src,
    row,
    h0,
    n_heads,
    head_stride,
    HALF: tl.constexpr,
    HALF_P2: tl.constexpr,
    BLOCK_H: tl.constexpr,
    INTERLEAVED: tl.constexpr,
):
    """``a`` and ``b`` of heads ``h0 .. h0 + BLOCK_H`` (masked past ``n_heads``), float32."""
    heads = h0 + tl.arange(0, BLOCK_H)
    at = src + row + heads.to(tl.int64)[:, None] * head_stride
    if INTERLEAVED:  # pairs (2i, 2i + 1): one contiguous run, split in registers
        cols = tl.arange(0, 2 * HALF_P2)
        ok = (heads < n_heads)[:, None] & (cols < 2 * HALF)[None, :]
        x = tl.load(at + cols[None, :], mask=ok).to(tl.float32)
        a, b = tl.split(tl.reshape(x, [BLOCK_H, HALF_P2, 2]))
    else:  # pairs (i, i + r/2)
        cols = tl.arange(0, HALF_P2)
        ok = (heads < n_heads)[:, None] & (cols < HALF)[None, :]
        a = tl.load(at + cols[None, :], mask=ok).to(tl.float32)
        b = tl.load(at + HALF + cols[None, :], mask=ok).to(tl.float32)
    return a, b


@triton.jit
def _store_rotated(
    dst,
    row,
    h0,
    n_heads,
    head_stride,
    a,
    b,
    c,
    s,
    HALF: tl.constexpr,
    HALF_P2: tl.constexpr,
    BLOCK_H: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    RNE_IN_INTEGERS: tl.constexpr,
):
    """Store ``a cos - b sin`` and ``b cos + a sin``, each one product and one fused
    multiply-add (as apply_rope's addcmul rounds them), rounded once to ``dst``'s dtype."""
    out_a = tl.fma(-b, s[None, :], a * c[None, :])
    out_b = tl.fma(a, s[None, :], b * c[None, :])
    out_a = _round_to(out_a, dst.dtype.element_ty, RNE_IN_INTEGERS)
    out_b = _round_to(out_b, dst.dtype.element_ty, RNE_IN_INTEGERS)
    heads = h0 + tl.arange(0, BLOCK_H)
    at = dst + row + heads.to(tl.int64)[:, None] * head_stride
    if INTERLEAVED:  # joined back into pairs: one contiguous store
        cols = tl.arange(0, 2 * HALF_P2)
        ok = (heads < n_heads)[:, None] & (cols < 2 * HALF)[None, :]
        pairs = tl.reshape(tl.join(out_a, out_b), [BLOCK_H, 2 * HALF_P2])
        tl.store(at + cols[None, :], pairs, mask=ok)
    else:
        cols = tl.arange(0, HALF_P2)
        ok = (heads < n_heads)[:, None] & (cols < HALF)[None, :]
        tl.store(at + cols[None, :], out_a, mask=ok)
        tl.store(at + HALF + cols[None, :], out_b, mask=ok)


@triton.jit
def _copy_tail(
    src,
    dst,
    row,
    dst_row,
    h0,
    n_heads,
    head_stride,
    dst_head_stride,
    START: tl.constexpr,
    TAIL: tl.constexpr,
    TAIL_P2: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    """Out of place with ``r < h_d``: the features past ``r`` pass through."""
    heads = (h0 + tl.arange(0, BLOCK_H)).to(tl.int64)
    tail = tl.arange(0, TAIL_P2)
    ok = (heads < n_heads)[:, None] & (tail < TAIL)[None, :]
    t = tl.load(src + row + heads[:, None] * head_stride + START + tail[None, :], mask=ok)
    tl.store(dst + dst_row + heads[:, None] * dst_head_stride + START + tail[None, :], t, mask=ok)


@triton.jit
def _rope_qk_kernel(
    q,
    k,
    q_out,
    k_out,
    positions,
    cos,
    sin,
    seq_len,
    n_positions,
    n_q,
    n_k,
    n_steps,  # blocks of heads: the larger of q's and k's count (1 at Llama 3 8B's shapes)
    q_sb,
    q_sh,
    q_ss,
    k_sb,
    k_sh,
    k_ss,
    qo_sb,
    qo_sh,
    qo_ss,
    ko_sb,
    ko_sh,
    ko_ss,
    pos_sb,
    pos_ss,
    cos_sr,
    cos_sc,
    sin_sr,
    sin_sc,
    HALF: tl.constexpr,
    HALF_P2: tl.constexpr,
    TAIL: tl.constexpr,
    TAIL_P2: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    COPY_TAIL: tl.constexpr,
    BACKWARD: tl.constexpr,
    RNE_IN_INTEGERS: tl.constexpr,
):
    """One program per token: read its position and table row once, rotate all its heads.

    Each step loads a block of ``q``'s heads and a block of ``k``'s, each of its
    own size (``BLOCK_Q``, ``BLOCK_K``: ``q`` and ``k`` are separate tensors with
    their own strides, and a block sized for ``q``'s heads would leave most rows of
    ``k``'s masked), then stores both: ``k``'s loads are issued before ``q``'s
    stores, which they would otherwise wait for (the compiler must assume that
    ``q_out`` may alias ``k``).
    """
    token = tl.program_id(0).to(tl.int64)
    bi = token // seq_len
    si = token % seq_len
    p = tl.load(positions + bi * pos_sb + si * pos_ss).to(tl.int64)
    # a position outside the table reads nothing and gives NaN (checked on the host by default)
    inside = (p >= 0) & (p < n_positions)
    p = tl.where(inside, p, 0)
    cols = tl.arange(0, HALF_P2)
    col_ok = cols < tl.where(inside, HALF, 0)  # (a scalar mask `& inside` trips the interpreter)
    c = tl.load(cos + p * cos_sr + cols * cos_sc, mask=col_ok, other=float("nan"))
    s = tl.load(sin + p * sin_sr + cols * sin_sc, mask=col_ok, other=float("nan"))
    c = c.to(tl.float32)
    s = s.to(tl.float32)
    if BACKWARD:  # the transpose of a rotation is the rotation by -theta
        s = -s
    q_row, k_row = bi * q_sb + si * q_ss, bi * k_sb + si * k_ss
    qo_row, ko_row = bi * qo_sb + si * qo_ss, bi * ko_sb + si * ko_ss
    for i in range(0, n_steps):  # at Llama 3 8B's shapes one step: all 32 + 8 heads
        qa, qb = _load_pairs(q, q_row, i * BLOCK_Q, n_q, q_sh, HALF, HALF_P2, BLOCK_Q, INTERLEAVED)
        ka, kb = _load_pairs(k, k_row, i * BLOCK_K, n_k, k_sh, HALF, HALF_P2, BLOCK_K, INTERLEAVED)
        _store_rotated(
            q_out, qo_row, i * BLOCK_Q, n_q, qo_sh, qa, qb, c, s,
            HALF, HALF_P2, BLOCK_Q, INTERLEAVED, RNE_IN_INTEGERS,
        )  # fmt: skip
        _store_rotated(
            k_out, ko_row, i * BLOCK_K, n_k, ko_sh, ka, kb, c, s,
            HALF, HALF_P2, BLOCK_K, INTERLEAVED, RNE_IN_INTEGERS,
        )  # fmt: skip
        if COPY_TAIL:
            _copy_tail(
                q, q_out, q_row, qo_row, i * BLOCK_Q, n_q, q_sh, qo_sh,
                2 * HALF, TAIL, TAIL_P2, BLOCK_Q,
            )  # fmt: skip
            _copy_tail(
                k, k_out, k_row, ko_row, i * BLOCK_K, n_k, k_sh, ko_sh,
                2 * HALF, TAIL, TAIL_P2, BLOCK_K,
            )  # fmt: skip


#: Whether Triton built the kernels for its interpreter (``TRITON_INTERPRET=1`` at import).
_INTERPRETED = not isinstance(_rope_qk_kernel, triton.runtime.JITFunction)


def _next_power_of_2(n: int) -> int:
    """``triton.next_power_of_2`` in plain Python: a fraction of its host cost."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


def _block_heads(n_heads: int, width: int) -> int:
    """Heads per block: all of them, a power of two, up to ``_TILE`` elements per half."""
    return min(_next_power_of_2(n_heads), max(1, _TILE // width))


def _position_strides(positions: torch.Tensor) -> tuple[int, int]:
    """Strides of a checked ``positions`` along the batch (0 when shared) and the sequence.

    Read from the tensor as given, ``(s,)``, ``(b or 1, s)`` or ``(b or 1, 1, s)``:
    no view is made, as each would cost the host about an ATen call."""
    stride = positions.stride()
    shared = positions.dim() == 1 or positions.shape[0] == 1
    return (0 if shared else stride[0]), stride[-1]


@functools.lru_cache(maxsize=256)
def _options(
    n_q: int, n_k: int, h_d: int, half: int, layout: str, inplace: bool, backward: bool
) -> tuple[int, dict]:
    """The steps of the head loop and the kernel's constants for one shape, made once."""
    tail = h_d - 2 * half
    half_p2 = _next_power_of_2(half)
    tail_p2 = _next_power_of_2(max(tail, 1))
    width = max(half_p2, tail_p2)
    block_q, block_k = _block_heads(n_q, width), _block_heads(n_k, width)
    options = dict(
        HALF=half,
        HALF_P2=half_p2,
        TAIL=tail,
        TAIL_P2=tail_p2,
        BLOCK_Q=block_q,
        BLOCK_K=block_k,
        INTERLEAVED=layout == "interleaved",
        COPY_TAIL=tail > 0 and not inplace,
        BACKWARD=backward,
        RNE_IN_INTEGERS=_INTERPRETED,
        enable_fp_fusion=False,  # the kernel fuses where it means to (tl.fma), nowhere else
    )
    return max(-(-n_q // block_q), -(-n_k // block_k)), options


def _kernel_args(
    q: torch.Tensor,
    k: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    positions: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    *,
    inplace: bool,
    backward: bool,
) -> tuple[tuple[int], tuple, dict]:
    """The grid, the arguments and the keyword arguments of one launch (the tests compile them)."""
    b, n_q, s, h_d = q.shape
    n_k = k.shape[1]
    steps, options = _options(n_q, n_k, h_d, cos.shape[-1], layout, inplace, backward)
    args = (
        q,
        k,
        q_out,
        k_out,
        positions,
        cos,
        sin,
        s,
        cos.shape[0],
        n_q,
        n_k,
        steps,
        *q.stride()[:3],
        *k.stride()[:3],
        *q_out.stride()[:3],
        *k_out.stride()[:3],
        *_position_strides(positions),
        *cos.stride(),
        *sin.stride(),
    )
    return (b * s,), args, dict(options)  # a copy: the cached one stays as made


def _launch(
    q: torch.Tensor,
    k: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    positions: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    *,
    inplace: bool,
    backward: bool,
) -> None:
    """Run the kernel: ``q_out``, ``k_out`` are ``q``, ``k`` when ``inplace``. Arguments checked."""
    b, n_q, s, _ = q.shape
    if b * s == 0 or n_q == 0:
        return
    grid, args, options = _kernel_args(
        q, k, q_out, k_out, positions, cos, sin, layout, inplace=inplace, backward=backward
    )
    _rope_qk_kernel[grid](*args, **options)


class _RopeQK(torch.autograd.Function):
    """Out-of-place rotation with its backward: the gradient rotated by ``-theta``."""

    @staticmethod
    def forward(ctx, q, k, positions, cos, sin, layout):  # type: ignore[override]
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        _launch(q, k, q_out, k_out, positions, cos, sin, layout, inplace=False, backward=False)
        ctx.save_for_backward(positions, cos, sin)
        ctx.layout = layout
        return q_out, k_out

    @staticmethod
    def backward(ctx, grad_q, grad_k):  # type: ignore[override]
        positions, cos, sin = ctx.saved_tensors
        # the kernel needs the last axis contiguous; autograd may hand over expanded zeros
        if grad_q.stride(-1) != 1:
            grad_q = grad_q.contiguous()
        if grad_k.stride(-1) != 1:
            grad_k = grad_k.contiguous()
        dq, dk = torch.empty_like(grad_q), torch.empty_like(grad_k)
        _launch(
            grad_q, grad_k, dq, dk, positions, cos, sin, ctx.layout, inplace=False, backward=True
        )
        return dq, dk, None, None, None, None


def _check_qk(name: str, t: object, dtype: torch.dtype | None) -> torch.Tensor:
    t = check_tensor(name, t)
    if t.dim() != 4:
        raise ValueError(
            f"{name} must have 4 dimensions (b, n_heads, s, h_d), got shape {tuple(t.shape)}"
        )
    if t.dtype not in _DTYPES:
        raise ValueError(
            f"{name} must be float32, bfloat16 or float16, got {t.dtype} "
            "(use posenc.apply_rope for other dtypes)"
        )
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} must have q's dtype {dtype}, got {t.dtype}")
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{name} must be contiguous in its last dimension (stride 1), got strides "
            f"{tuple(t.stride())}; call .contiguous() first"
        )
    return t


def _check_positions(positions: object, b: int, s: int) -> torch.Tensor:
    """Integer positions per token, ``(s,)``, ``(b or 1, s)`` or ``(b or 1, 1, s)``, as given."""
    positions = check_tensor("positions", positions)
    if positions.dtype not in _INDEX_DTYPES:
        raise ValueError(f"positions must be an int64 or int32 tensor, got dtype {positions.dtype}")
    shape = tuple(positions.shape)
    if len(shape) == 3 and shape[1] == 1:  # Hugging Face's position_ids[:, None, :]
        shape = (shape[0], shape[2])
    if not (shape == (s,) or (len(shape) == 2 and shape[1] == s and shape[0] in (1, b))):
        raise ValueError(
            f"positions must have shape (s,), (b, s) or (b, 1, s) with b={b} (or 1) and s={s}, "
            f"got {tuple(positions.shape)}"
        )
    return positions


def apply_rope_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    layout: str = "half",
    inplace: bool = False,
    check_positions: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys by their positions in one fused Triton kernel.

    Equal, within a few units of rounding in float32, to ``apply_rope(q,
    positions, rotary_dim=r, ...)`` and ``apply_rope(k, ...)`` when ``cos``
    and ``sin`` hold the rotation's table for positions ``0 .. n-1``, as
    ``RotaryEmbedding(r, max_positions=n)`` builds it (pass its
    ``cos_cached`` and ``sin_cached``, which carry any scaling and
    attention factor). Only the first ``r = 2 * cos.shape[-1]`` features of
    each head are rotated; the rest pass through. The arithmetic is float32
    whatever the input's dtype, rounded once into the output.

    Differentiable when ``inplace=False``: the backward rotates the
    incoming gradients by ``-theta`` with the same kernel. No gradient
    flows to ``cos`` and ``sin``.

    Args:
        q (torch.Tensor): queries ``(b, n_q, s, h_d)``, float32, bfloat16 or
            float16, on the device that runs Triton (a CUDA device; CPU
            tensors under ``TRITON_INTERPRET=1``); any strides with the last
            one 1, e.g. the transpose of a ``(b, s, n_q, h_d)`` tensor.
        k (torch.Tensor): keys ``(b, n_k, s, h_d)``, the dtype and device of
            ``q``; ``n_k`` divides ``n_q`` (grouped-query attention).
        positions (torch.Tensor): int64 or int32 position of every token,
            shape ``(s,)``, ``(b, s)`` or ``(b, 1, s)`` (Hugging Face's
            ``position_ids[:, None, :]``); packed sequences simply restart
            their positions. Each lies in ``[0, n)``.
        cos (torch.Tensor): ``(n, r/2)`` float32, ``cos(p * theta_i)``
            times the attention factor, on ``q``'s device; any strides.
        sin (torch.Tensor): ``(n, r/2)`` float32, likewise ``sin``.
        layout (str): ``"half"`` pairs feature ``i`` with ``i + r/2``;
            ``"interleaved"`` pairs ``2i`` with ``2i + 1`` (as in
            :func:`posenc.apply_rope`). Default ``"half"``.
        inplace (bool): write into ``q`` and ``k`` and return them (no
            autograd). Default ``False``: new tensors.
        check_positions (bool): check on the host that every position lies
            in ``[0, n)``: one read from the device per call (a
            synchronisation on a GPU). With ``False`` (a decode loop, CUDA
            graphs) nothing is read back, and the rotated features of a
            token whose position lies outside come out NaN; the table is
            never read out of bounds. Default ``True``.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: rotated ``q`` and ``k``, each with
        its input's shape and dtype (``q`` and ``k`` themselves when
        ``inplace``).

    Raises:
        TypeError: if an argument is not a tensor, or ``inplace`` or
            ``check_positions`` is not a bool.
        ValueError: if ``q`` or ``k`` is not 4-dimensional, float32,
            bfloat16 or float16 (the same for both), or contiguous in its
            last dimension; ``k``'s batch, sequence or head size differs
            from ``q``'s, or ``n_k`` does not divide ``n_q``; ``cos`` and
            ``sin`` are not float32 ``(n, r/2)`` tables of one shape with
            ``r`` in ``[2, h_d]``; ``positions`` is not integer, has another
            shape, or (with ``check_positions``) lies outside ``[0, n)``;
            the tensors are not all on one device, or on the CPU without
            the interpreter; ``layout`` is unknown;
            or ``inplace`` is asked while autograd records ``q`` or ``k``.

    Example:
        >>> from posenc import RotaryEmbedding
        >>> rope = RotaryEmbedding(64, max_positions=4096).cuda()  # doctest: +SKIP
        >>> q = torch.randn(1, 32, 128, 64, device="cuda", dtype=torch.bfloat16)  # doctest: +SKIP
        >>> k = torch.randn(1, 8, 128, 64, device="cuda", dtype=torch.bfloat16)  # doctest: +SKIP
        >>> rq, rk = apply_rope_triton(  # doctest: +SKIP
        ...     q, k, torch.arange(128, device="cuda"), rope.cos_cached, rope.sin_cached
        ... )
    """
    q = _check_qk("q", q, None)
    k = _check_qk("k", k, q.dtype)
    b, n_q, s, h_d = q.shape
    if (k.shape[0], k.shape[2], k.shape[3]) != (b, s, h_d):
        raise ValueError(
            f"k must have q's batch, sequence and head size (b, *, s, h_d) = "
            f"({b}, *, {s}, {h_d}), got shape {tuple(k.shape)}"
        )
    n_k = k.shape[1]
    if n_k == 0 or n_q % n_k:
        raise ValueError(
            f"the number of key heads must divide the number of query heads, got n_k={n_k} "
            f"(k.shape[1]) and n_q={n_q} (q.shape[1])"
        )
    cos, sin = check_tensor("cos", cos), check_tensor("sin", sin)
    for name, table in (("cos", cos), ("sin", sin)):
        if table.dtype != torch.float32 or table.dim() != 2:
            raise ValueError(
                f"{name} must be a float32 table of shape (n_positions, r/2), got {table.dtype} "
                f"of shape {tuple(table.shape)}"
            )
        if table.requires_grad:
            raise ValueError(f"{name} must not require grad: no gradient flows to the tables")
    if sin.shape != cos.shape:
        raise ValueError(f"sin must have cos's shape {tuple(cos.shape)}, got {tuple(sin.shape)}")
    half = cos.shape[1]
    if half < 1 or 2 * half > h_d:
        raise ValueError(
            f"cos.shape[1] (r/2) must be in [1, {h_d // 2}] so that r = 2 * cos.shape[1] lies in "
            f"[2, h_d={h_d}], got {half}"
        )
    if cos.shape[0] == 0:
        raise ValueError("cos and sin must have at least one row (position 0)")
    layout = check_choice("layout", layout, _LAYOUTS)
    inplace = check_bool("inplace", inplace)
    check_positions = check_bool("check_positions", check_positions)
    positions = _check_positions(positions, b, s)
    for name, t in (("k", k), ("positions", positions), ("cos", cos), ("sin", sin)):
        if t.device != q.device:
            raise ValueError(f"{name} must be on q's device {q.device}, got {t.device}")
    if q.device.type in ("cpu", "meta") and not _INTERPRETED:
        raise ValueError(
            f"q must be on a GPU for the compiled kernel, got a tensor on {q.device}; set "
            "TRITON_INTERPRET=1 before importing posenc.rope_triton to run the kernel in "
            "Triton's interpreter on the CPU (slow), or use posenc.apply_rope"
        )
    if check_positions and positions.numel():
        low, high = (int(v) for v in torch.aminmax(positions))
        if low < 0 or high >= cos.shape[0]:
            raise ValueError(
                f"positions must lie in [0, {cos.shape[0]}) (the rows of cos and sin), got values "
                f"in [{low}, {high}]"
            )
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)
    if inplace:
        if q.data_ptr() == k.data_ptr():
            raise ValueError("inplace=True needs distinct q and k, got views of the same memory")
        if grad:
            raise ValueError(
                "inplace=True cannot be used while autograd records q or k; use inplace=False"
            )
        _launch(q, k, q, k, positions, cos, sin, layout, inplace=True, backward=False)
        return q, k
    if grad:
        return _RopeQK.apply(q, k, positions, cos, sin, layout)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    _launch(q, k, q_out, k_out, positions, cos, sin, layout, inplace=False, backward=False)
    return q_out, k_out
