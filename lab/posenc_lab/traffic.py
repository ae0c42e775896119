"""Count the bytes a call moves, operation by operation: :func:`count_traffic`.

The model of memory traffic that chapter *RoPE as a memory-bound kernel*
and :mod:`posenc_lab.cpu_bench` use: every ATen operation a call runs reads
each of its tensor arguments once and writes its output once, by the memory
each spans, and nothing stays in a cache between operations. It does not
depend on the machine; it is the traffic of a machine whose caches are
smaller than the tensors, which is the case that matters for large inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["Traffic", "count_traffic"]


@dataclass
class Traffic:
    """Bytes read and written by the ATen operations of one call.

    ``reads`` and ``writes`` count each tensor argument once per operation,
    by the memory it spans (a broadcast dimension of stride 0 counts once):
    an operation that reads ``x`` and writes ``y`` moves
    ``x.nbytes + y.nbytes``. Views (slicing, reshapes, ``unbind``,
    ``view_as_complex``) and allocations (``empty_like``) move nothing.
    Caches are ignored: this is the traffic of a machine whose caches are
    smaller than the tensors, which is the case that matters for large
    inputs.
    """

    reads: int = 0
    writes: int = 0
    ops: list[str] = field(default_factory=list)  # operations that move data, in order
    details: list[tuple[str, int, int]] = field(default_factory=list)  # (op, reads, writes)
    views: int = 0  # operations that only make views or allocate

    @property
    def total(self) -> int:
        """``reads + writes``, in bytes."""
        return self.reads + self.writes


_NO_TRAFFIC = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "_unsafe_view",  # a view, though its schema carries no alias annotation
}
_WRITE_ONLY_SELF = {"copy_", "fill_", "zero_", "normal_", "uniform_"}
# gathers read only the rows they return, not the whole table they index
_GATHERS = {"index_select", "index", "embedding", "gather", "take"}


def _span_bytes(t: torch.Tensor) -> int:
    """Bytes of memory a tensor spans, counting a stride-0 (broadcast) dimension once."""
    if t.numel() == 0:
        return 0
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return n * t.element_size()


def _tensor_bytes(value: object) -> int:
    if isinstance(value, torch.Tensor):
        return _span_bytes(value)
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


class _TrafficMode(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.traffic = Traffic()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        schema = func._schema
        name = schema.name.split("::")[-1]
        returns_views = any(
            r.alias_info is not None and not r.alias_info.is_write for r in schema.returns
        )
        if name in _NO_TRAFFIC or returns_views:
            self.traffic.views += 1
            return out
        reads = writes = 0
        for k, arg in enumerate(schema.arguments):
            value = args[k] if k < len(args) else kwargs.get(arg.name)
            size = _tensor_bytes(value)
            if not size:
                continue
            if name in _GATHERS and k == 0:
                reads += _tensor_bytes(out)  # the gathered rows
            elif arg.is_out:
                writes += size
            elif arg.alias_info is not None and arg.alias_info.is_write:  # in-place self
                writes += size
                if name not in _WRITE_ONLY_SELF:
                    reads += size
            else:
                reads += size
        if not any(r.alias_info is not None for r in schema.returns):
            writes += _tensor_bytes(out)
        self.traffic.reads += reads
        self.traffic.writes += writes
        self.traffic.ops.append(name)
        self.traffic.details.append((name, reads, writes))
        return out


def count_traffic(fn: Callable[[], object]) -> Traffic:
    """Run ``fn()`` once and count the bytes its ATen operations read and write.

    Example:
        >>> x = torch.zeros(1000)
        >>> t = count_traffic(lambda: torch.mul(x, 2.0))
        >>> (t.reads, t.writes, t.ops)
        (4000, 4000, ['mul'])
    """
    mode = _TrafficMode()
    with mode:
        fn()
    return mode.traffic
