"""A plain copy written in Triton: the floor a Triton kernel reaches on RoPE's bytes.

``torch``'s ``dst.copy_(src)`` of two dense buffers of one dtype is a
``cudaMemcpyAsync`` on CUDA, not a kernel of ours: its rate and its fixed cost per
call need not be what a Triton kernel can get. :func:`triton_copy` moves the same
bytes with the least a Triton kernel can do (one load and one store per element,
nothing else), so that ``python -m posenc_lab.gpu_bench`` can show the fused RoPE
kernel beside both floors. Like :mod:`posenc.rope_triton`, it runs on CPU tensors
under Triton's interpreter (``TRITON_INTERPRET=1`` before this module is imported).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["BLOCK", "triton_copy"]

#: Elements one program copies: 4,096 (8 KiB in bfloat16) over Triton's default four
#: warps is 32 elements a thread, stored as 16-byte vectors.
BLOCK = 4096


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=inside), mask=inside)


def triton_copy(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """Copy dense ``src`` into dense ``dst`` (same shape, dtype and device) in one launch.

    Raises:
        ValueError: when the two differ in shape, dtype or device, or either is not
            contiguous (the kernel reads and writes them as flat buffers).
    """
    for name, value in (("shape", "shape"), ("dtype", "dtype"), ("device", "device")):
        if getattr(src, value) != getattr(dst, value):
            raise ValueError(
                f"triton_copy: src and dst must have the same {name}, "
                f"got {getattr(src, value)} and {getattr(dst, value)}"
            )
    for name, t in (("src", src), ("dst", dst)):
        if not t.is_contiguous():
            raise ValueError(f"triton_copy: {name} must be contiguous, got strides {t.stride()}")
    n = src.numel()
    if n:
        _copy_kernel[(triton.cdiv(n, BLOCK),)](src, dst, n, BLOCK=BLOCK)
    return dst
