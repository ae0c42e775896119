"""Benchmark RoPE and the table builders on the CPU: ``python -m posenc_lab.bench``.

For RoPE this harness is superseded by :mod:`posenc_lab.cpu_bench` (random
order per round, preallocated outputs, page faults counted, q and k
distinct, the caches read from the system); it stays unchanged because the
stored records ``cpu-1-thread.json`` and ``cpu-2-threads.json``, which
chapter *Implementing RoPE efficiently* reads, were made with it.

Every group times a few *contenders* that compute the same thing, in one
process, on the same inputs:

- ``rope``: ``x`` of shape ``(1, 16, 2048, 128)`` float32 rotated by
  ``positions = arange(2048)``: :func:`posenc.apply_rope` (both layouts), the
  cached path of :class:`posenc.RotaryEmbedding` (its ``forward(x, x)``
  rotates ``x`` as queries and as keys; the time is reported per tensor),
  a Hugging-Face-style eager
  ``x * cos + rotate_half(x) * sin`` with precomputed ``cos``/``sin`` of
  shape ``(S, D)`` (the baseline), Meta-Llama-style complex
  multiplication (``view_as_complex`` of the pairs times ``polar``), and the
  memory floor ``torch.mul(x, 2.0)``: one read and one write of ``x``.
- ``decode``: the same on ``x`` of shape ``(1, 8, 1, 64)``, one new token:
  here the cost is Python and dispatch overhead per call, not bytes.
- ``sinusoid``: :func:`posenc.sinusoidal` (angles in float64) against a
  straightforward float32 table build.
- ``alibi``: :func:`posenc.alibi_bias` against a straightforward build.

How it measures: ``time.perf_counter`` around each call (or around a batch
of ``number`` calls for the tiny decode step), warm-up rounds first, the
garbage collector off while timing, and many rounds; each round times every
contender once, in an order that rotates and reverses from round to round,
so that slow drifts of the machine's load spread over the contenders. The
order is a rotation of one fixed cycle, so a contender always runs next to
the same two others: an effect of what ran before a contender is not
spread, and chapter *Implementing RoPE efficiently* shows that a
contender's time depends on what ran before it (the cause is not
established). A
contender's time is the median over rounds; its ratios to the baseline and
to the floor are medians of the *per-round* ratios (paired samples), which
cancel the drifts further. GB/s counts one read and one write of ``x`` for
RoPE (whatever the contender really moves), and one write of the table for
the table builders.

Before timing, every contender is checked against :func:`posenc.apply_rope`
(or the posenc builder) numerically, and :func:`count_traffic` counts the
bytes each one reads and writes, operation by operation, by intercepting
the ATen operations it runs: a model of memory traffic that does not depend
on the machine.

Run ``python -m posenc_lab.bench --help`` for the options (``--quick`` for tiny
shapes, ``--json PATH`` to save the results, ``--threads N``, ``--rounds N``,
``--compile`` to add the optional ``torch.compile`` contender).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from posenc import RotaryEmbedding, alibi_bias, apply_rope, sinusoidal

__all__ = [
    "Contender",
    "Group",
    "Traffic",
    "alibi_straightforward",
    "build_groups",
    "count_traffic",
    "format_results",
    "hf_apply_rotary",
    "hf_cos_sin",
    "main",
    "memory_floor",
    "meta_apply_rotary",
    "meta_freqs_cis",
    "rope_group",
    "rotate_half",
    "run",
    "sinusoidal_straightforward",
    "time_contenders",
]


# ---------------------------------------------------------------------------
# Contenders, written independently of posenc.rope
# ---------------------------------------------------------------------------


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Hugging Face's ``rotate_half``: ``[x1, x2] -> [-x2, x1]`` on the last axis."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_cos_sin(
    positions: torch.Tensor, dim: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's cos/sin, float32, shape ``(S, dim)``: each half repeated.

    ``inv_freq = 1 / base ** (arange(0, dim, 2) / dim)``, angles
    ``positions * inv_freq`` in float32, ``emb = cat(freqs, freqs)``.
    """
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]  # (S, dim/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (S, dim)
    return emb.cos(), emb.sin()


def hf_apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's eager ``q * cos + rotate_half(q) * sin`` (half layout)."""
    return x * cos + rotate_half(x) * sin


def meta_freqs_cis(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Meta's Llama ``precompute_freqs_cis``: ``polar(1, p * theta)``, complex64, ``(S, dim/2)``."""
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    angles = torch.outer(positions.float(), freqs)  # (S, dim/2)
    return torch.polar(torch.ones_like(angles), angles)


def meta_apply_rotary(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Meta's Llama rotation: pairs ``(2i, 2i+1)`` as complex numbers (interleaved layout).

    (torchtune rotates the same interleaved pairs with real arithmetic instead.)
    """
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (..., dim/2)
    return torch.view_as_real(pairs * freqs_cis).flatten(-2).type_as(x)


def memory_floor(x: torch.Tensor) -> torch.Tensor:
    """One read and one write of ``x``: the least any out-of-place rotation must move."""
    return torch.mul(x, 2.0)


def sinusoidal_straightforward(n_positions: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoid table as The Annotated Transformer builds it, in float32 (interleaved)."""
    pe = torch.zeros(n_positions, dim)
    position = torch.arange(0, n_positions).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, dim, 2).float() * (-math.log(base) / dim))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def alibi_straightforward(n_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    """The causal ALiBi bias built directly: ``m_h * (k_pos - q_pos)``, float32.

    Slopes ``2 ** (-8 h / n_heads)``, ``h = 1 .. n_heads`` (a power of two
    heads); queries aligned to the end of the keys.
    """
    slopes = torch.tensor([2.0 ** (-8.0 * h / n_heads) for h in range(1, n_heads + 1)])
    q_pos = torch.arange(q_len)[:, None] + (k_len - q_len)  # (q, 1)
    relative = torch.arange(k_len)[None, :] - q_pos  # (q, k)
    return slopes[:, None, None] * relative  # (h, q, k)


# ---------------------------------------------------------------------------
# Memory traffic, counted operation by operation
# ---------------------------------------------------------------------------


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


_NO_TRAFFIC = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
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
        >>> t = count_traffic(lambda: memory_floor(x))
        >>> (t.reads, t.writes, t.ops)
        (4000, 4000, ['mul'])
    """
    mode = _TrafficMode()
    with mode:
        fn()
    return mode.traffic


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


@dataclass
class Contender:
    """One implementation in a group: ``fn()`` is timed; ``per_call`` divides its time."""

    name: str
    label: str
    fn: Callable[[], object]
    per_call: int = 1  # e.g. 2 for forward(q, k) when the group's unit is one tensor
    traffic: bool = True  # count its memory traffic (False for compiled code)


@dataclass
class Group:
    """Contenders that compute the same result, timed against each other."""

    name: str
    title: str
    contenders: list[Contender]
    baseline: str
    floor: str | None
    bytes_moved: int  # the bytes GB/s refers to
    elements: int  # the elements that bytes per element refers to
    number: int = 1  # calls per timed sample
    rounds: int = 30
    warmup: int = 3
    check: Callable[[], None] | None = None  # raises if the contenders disagree
    dtype: str = "float32"  # of the input (RoPE) or of the table


def time_contenders(
    contenders: Sequence[Contender], *, rounds: int, warmup: int, number: int
) -> dict[str, list[float]]:
    """Seconds per call of each contender, one sample per round.

    Each round times every contender once (``number`` calls in a row), the
    order rotating by one and reversing every other round. The garbage
    collector is off while timing, as in :mod:`timeit`.
    """
    names = [c.name for c in contenders]
    by_name = {c.name: c for c in contenders}
    for _ in range(warmup):
        for c in contenders:
            c.fn()
    samples: dict[str, list[float]] = {n: [] for n in names}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            shift = r % len(names)
            order = names[shift:] + names[:shift]
            if r % 2:
                order.reverse()
            for n in order:
                c = by_name[n]
                fn = c.fn
                start = time.perf_counter()
                for _ in range(number):
                    fn()
                elapsed = time.perf_counter() - start
                samples[n].append(elapsed / (number * c.per_call))
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def _summarise(group: Group, samples: dict[str, list[float]]) -> dict[str, object]:
    base = samples[group.baseline]
    floor = samples[group.floor] if group.floor else None
    contenders: dict[str, dict[str, object]] = {}
    for c in group.contenders:
        s = samples[c.name]
        median = statistics.median(s)
        q1, q3 = _quartiles(s)
        entry: dict[str, object] = {
            "label": c.label,
            "median_ms": median * 1e3,
            "q1_ms": q1 * 1e3,
            "q3_ms": q3 * 1e3,
            "min_ms": min(s) * 1e3,
            # medians of per-round (paired) ratios
            "speedup_vs_baseline": statistics.median(b / t for b, t in zip(base, s, strict=True)),
            "ratio_to_floor": (
                statistics.median(t / f for t, f in zip(s, floor, strict=True)) if floor else None
            ),
            "gb_per_s": group.bytes_moved / median / 1e9,
            "samples_ms": [v * 1e3 for v in s],
        }
        if c.traffic:
            traffic = count_traffic(c.fn)
            entry["bytes_per_element"] = traffic.total / c.per_call / group.elements
            entry["ops_per_call"] = len(traffic.ops) / c.per_call
        else:
            entry["bytes_per_element"] = None
            entry["ops_per_call"] = None
        contenders[c.name] = entry
    return {
        "title": group.title,
        "baseline": group.baseline,
        "floor": group.floor,
        "bytes_moved": group.bytes_moved,
        "elements": group.elements,
        "dtype": group.dtype,
        # the bytes the floor moves per element: one read and one write of x
        "floor_bytes_per_element": group.bytes_moved / group.elements,
        "rounds": group.rounds,
        "number": group.number,
        "contenders": contenders,
    }


# ---------------------------------------------------------------------------
# The groups
# ---------------------------------------------------------------------------


def _close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    # contenders round differently (a fused multiply-add here and there): allow a few
    # units in the last place of float32; in bfloat16 and float16 the baseline also
    # rounds cos, sin and each product to the input's dtype, as Hugging Face does
    tol = {torch.bfloat16: 3e-2, torch.float16: 4e-3}.get(expected.dtype, 1e-5)
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def _compiled_apply_rope() -> Callable[..., torch.Tensor]:
    """``torch.compile(apply_rope)``: the documented opt-in (a C++ compiler is needed)."""
    return torch.compile(apply_rope, fullgraph=True, dynamic=False)


def _apply_rope_unblocked(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``apply_rope`` in one pass per operation over the whole tensor (no blocks).

    The paired control for the blocking of :func:`posenc.rope._for_blocks`:
    the same operations and the same bits, timed in the same rounds.
    """
    import posenc.rope as rope_module

    saved = rope_module._BLOCK
    rope_module._BLOCK = 1 << 62  # one block: the whole tensor
    try:
        return apply_rope(x, positions)
    finally:
        rope_module._BLOCK = saved


def rope_group(
    name: str,
    title: str,
    shape: tuple[int, int, int, int],
    positions: torch.Tensor,
    *,
    rounds: int = 30,
    number: int = 1,
    fused: bool = False,
    dtype: torch.dtype = torch.float32,
) -> Group:
    """The RoPE contenders on ``x`` of ``shape`` ``(b, n_h, s, h_d)``, seeded.

    ``apply_rope_unblocked`` is ``apply_rope`` with one pass per operation
    over the whole tensor, the control for its blocks.
    ``rotary_embedding`` is the module with its default growing cache (it
    reads the range of the positions back on every call);
    ``rotary_embedding_fixed`` is ``RotaryEmbedding(dim, max_positions=...)``,
    the per-step path that reads nothing back. With ``fused``, three compiled
    contenders are added: ``fused`` (the private compiled rotation on
    precomputed ``cos``/``sin``), ``rotary_embedding_compiled``
    (``torch.compile(RotaryEmbedding(dim, max_positions=n))``, the
    documented opt-in: one kernel that gathers the cached rows) and
    ``apply_rope_compiled`` (``torch.compile(apply_rope)``, slow on a CPU;
    likely because it forms the angles inside the fused kernel, for every
    head, which is not checked against the generated code). The baseline casts ``cos`` and ``sin`` to ``x``'s dtype, as
    Hugging Face does; posenc rotates bfloat16 and float16 in float32 and
    rounds once.

    Args:
        name (str): the group's key in the results.
        title (str): one line describing the inputs.
        shape (tuple[int, int, int, int]): the shape of ``x``.
        positions (torch.Tensor): integer positions of shape ``(s,)``.
        rounds (int): timed rounds.
        number (int): calls per timed sample (many for a decode step).
        fused (bool): add the ``torch.compile`` contenders.
        dtype (torch.dtype): dtype of ``x``: float32, bfloat16 or float16.

    Returns:
        Group: baseline ``"hf_rotate_half"``, floor ``"floor"``.
    """
    dim = shape[-1]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(dtype)  # (b, n_h, s, h_d)
    cos, sin = (t.to(dtype) for t in hf_cos_sin(positions, dim))  # (s, h_d) each
    freqs_cis = meta_freqs_cis(positions, dim)  # (s, h_d/2) complex64
    rope = RotaryEmbedding(dim)
    rope(x, x, positions)  # fill the cache
    fixed = RotaryEmbedding(dim, max_positions=max(4096, int(positions.max()) + 1))
    contenders = [
        Contender(
            "hf_rotate_half",
            "HF-style x*cos + rotate_half(x)*sin",
            lambda: hf_apply_rotary(x, cos, sin),
        ),
        Contender(
            "complex", "complex multiply (Meta Llama)", lambda: meta_apply_rotary(x, freqs_cis)
        ),
        Contender("apply_rope", "posenc.apply_rope", lambda: apply_rope(x, positions)),
        Contender(
            "apply_rope_unblocked",
            "posenc.apply_rope, no blocks",
            lambda: _apply_rope_unblocked(x, positions),
        ),
        Contender(
            "apply_rope_interleaved",
            "posenc.apply_rope interleaved",
            lambda: apply_rope(x, positions, layout="interleaved"),
        ),
        Contender(
            "rotary_embedding",
            "posenc.RotaryEmbedding (q, k)/2",
            lambda: rope(x, x, positions),
            per_call=2,
        ),
        Contender(
            "rotary_embedding_fixed",
            "posenc.RotaryEmbedding(max_positions) (q, k)/2",
            lambda: fixed(x, x, positions),
            per_call=2,
        ),
        Contender("floor", "memory floor torch.mul(x, 2.0)", lambda: memory_floor(x)),
    ]
    if fused:
        from posenc.rope import _rotate_fused

        half_cos, half_sin = cos[..., : dim // 2].float(), sin[..., : dim // 2].float()
        compiled = _compiled_apply_rope()
        compiled_module = torch.compile(fixed, fullgraph=True, dynamic=False)
        contenders[-1:-1] = [
            Contender(
                "fused",
                "torch.compile (fused rotation)",
                lambda: _rotate_fused(x, half_cos, half_sin, "half"),
                traffic=False,
            ),
            Contender(
                "apply_rope_compiled",
                "torch.compile(apply_rope)",
                lambda: compiled(x, positions),
                traffic=False,
            ),
            Contender(
                "rotary_embedding_compiled",
                "torch.compile(RotaryEmbedding(max_pos)) /2",
                lambda: compiled_module(x, x, positions),
                per_call=2,
                traffic=False,
            ),
        ]

    def check() -> None:
        expected = apply_rope(x, positions)
        _close(hf_apply_rotary(x, cos, sin), expected)
        assert torch.equal(_apply_rope_unblocked(x, positions), expected)  # same bits
        _close(rope(x, x, positions)[0], expected)
        torch.testing.assert_close(fixed(x, x, positions)[0], expected, rtol=0, atol=0)
        interleaved = apply_rope(x, positions, layout="interleaved")
        _close(meta_apply_rotary(x, freqs_cis), interleaved)
        for c in contenders:
            if c.name in ("fused", "apply_rope_compiled"):
                _close(c.fn(), expected)  # type: ignore[arg-type]
            elif c.name == "rotary_embedding_compiled":
                _close(c.fn()[0], expected)  # type: ignore[index]

    return Group(
        name=name,
        title=title,
        contenders=contenders,
        baseline="hf_rotate_half",
        floor="floor",
        bytes_moved=2 * x.numel() * x.element_size(),  # one read and one write of x
        elements=x.numel(),
        number=number,
        rounds=rounds,
        check=check,
        dtype=str(dtype).removeprefix("torch."),
    )


def _sinusoid_group(n: int, dim: int, *, rounds: int, number: int) -> Group:
    positions = torch.arange(n)
    contenders = [
        Contender(
            "straightforward",
            "float32 build (Annotated Transformer)",
            lambda: sinusoidal_straightforward(n, dim),
        ),
        Contender(
            "sinusoidal", "posenc.sinusoidal (float64 angles)", lambda: sinusoidal(positions, dim)
        ),
        Contender(
            "floor", "write floor torch.empty().fill_()", lambda: torch.empty(n, dim).fill_(1.0)
        ),
    ]

    def check() -> None:
        # float32 angles p * w lose up to p * 2**-24 rad; posenc's float64 angles do not
        expected = sinusoidal(positions, dim)
        torch.testing.assert_close(
            sinusoidal_straightforward(n, dim), expected, rtol=0, atol=n * 2e-7 + 1e-6
        )

    return Group(
        name="sinusoid",
        title=f"sinusoid table: {n} positions x {dim} features, float32 output",
        contenders=contenders,
        baseline="straightforward",
        floor="floor",
        bytes_moved=n * dim * 4,
        elements=n * dim,
        number=number,
        rounds=rounds,
        check=check,
    )


def _alibi_group(n_heads: int, length: int, *, rounds: int, number: int) -> Group:
    contenders = [
        Contender(
            "straightforward",
            "direct build",
            lambda: alibi_straightforward(n_heads, length, length),
        ),
        Contender("alibi_bias", "posenc.alibi_bias", lambda: alibi_bias(n_heads, length)),
        Contender(
            "floor",
            "write floor torch.empty().fill_()",
            lambda: torch.empty(n_heads, length, length).fill_(1.0),
        ),
    ]

    def check() -> None:
        expected = alibi_bias(n_heads, length)
        torch.testing.assert_close(
            alibi_straightforward(n_heads, length, length), expected, rtol=1e-6, atol=0
        )

    return Group(
        name="alibi",
        title=f"ALiBi bias: {n_heads} heads x {length} queries x {length} keys, float32",
        contenders=contenders,
        baseline="straightforward",
        floor="floor",
        bytes_moved=n_heads * length * length * 4,
        elements=n_heads * length * length,
        number=number,
        rounds=rounds,
        check=check,
    )


_HALF_DTYPES = (("bf16", torch.bfloat16), ("f16", torch.float16))


def build_groups(
    *, quick: bool = False, rounds: int | None = None, fused: bool = False
) -> list[Group]:
    """The benchmark's groups: full size, or tiny shapes with ``quick``."""
    if quick:
        r = rounds or 3
        return [
            rope_group(
                "rope",
                "RoPE, tiny: x (1, 2, 16, 8)",
                (1, 2, 16, 8),
                torch.arange(16),
                rounds=r,
                number=1,
                fused=fused,
            ),
            rope_group(
                "decode",
                "RoPE decode step, tiny: x (1, 2, 1, 8)",
                (1, 2, 1, 8),
                torch.tensor([5]),
                rounds=r,
                number=2,
                fused=fused,
            ),
            *(
                rope_group(
                    f"rope_{short}",
                    f"RoPE, tiny: x (1, 2, 16, 8) {short}",
                    (1, 2, 16, 8),
                    torch.arange(16),
                    rounds=r,
                    number=1,
                    dtype=dtype,
                )
                for short, dtype in _HALF_DTYPES
            ),
            _sinusoid_group(16, 8, rounds=r, number=1),
            _alibi_group(2, 8, rounds=r, number=1),
        ]
    return [
        rope_group(
            "rope",
            "RoPE prefill: x (1, 16, 2048, 128) float32, positions arange(2048)",
            (1, 16, 2048, 128),
            torch.arange(2048),
            rounds=rounds or 40,
            number=1,
            fused=fused,
        ),
        rope_group(
            "decode",
            "RoPE decode step: x (1, 8, 1, 64) float32, positions [1000]",
            (1, 8, 1, 64),
            torch.tensor([1000]),
            rounds=rounds or 40,
            number=200,
            fused=fused,
        ),
        *(
            rope_group(
                f"rope_{short}",
                f"RoPE prefill: x (1, 16, 2048, 128) {short} (2 bytes per element), "
                "positions arange(2048)",
                (1, 16, 2048, 128),
                torch.arange(2048),
                rounds=rounds or 20,
                number=1,
                fused=fused,
                dtype=dtype,
            )
            for short, dtype in _HALF_DTYPES
        ),
        _sinusoid_group(4096, 512, rounds=rounds or 20, number=1),
        _alibi_group(8, 1024, rounds=rounds or 20, number=1),
    ]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def run(groups: Sequence[Group], *, log: Callable[[str], None] | None = None) -> dict[str, object]:
    """Check, then time every group; return the results as a JSON-ready dict."""
    meta = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cuda_available": torch.cuda.is_available(),
        "loadavg_before": _loadavg(),
    }
    results: dict[str, object] = {"meta": meta, "groups": {}}
    for group in groups:
        if log:
            log(f"timing {group.name} ...")
        if group.check:
            group.check()
        with torch.no_grad():  # inference, as a decode loop runs it
            samples = time_contenders(
                group.contenders, rounds=group.rounds, warmup=group.warmup, number=group.number
            )
        results["groups"][group.name] = _summarise(group, samples)  # type: ignore[index]
    meta["loadavg_after"] = _loadavg()
    return results


def format_results(results: dict[str, object]) -> str:
    """The results as plain-text tables, one per group."""
    meta = results["meta"]
    lines = [
        f"torch {meta['torch']} on {meta['cpu']} ({meta['cpu_capability']}), "
        f"{meta['cpu_count']} CPUs; torch.get_num_threads() = {meta['num_threads']}, "
        f"interop threads = {meta['num_interop_threads']}; CUDA available: {meta['cuda_available']}",
        f"load average (1, 5, 15 min): before {meta['loadavg_before']}, after {meta['loadavg_after']}",
        "median over rounds; ratios are medians of per-round ratios; GB/s counts the bytes "
        "of one read and one write of x (RoPE) or one write of the table",
    ]
    for name, g in results["groups"].items():
        base = g["contenders"][g["baseline"]]["label"]
        lines += [
            "",
            f"[{name}] {g['title']}  ({g['rounds']} rounds x {g['number']} calls; "
            f"floor moves {g['floor_bytes_per_element']:g} bytes per element)",
            f"{'contender':40s} {'median ms':>10s} {'IQR ms':>17s} {'speed-up':>9s} "
            f"{'x floor':>8s} {'GB/s':>7s} {'B/elem':>7s} {'ops':>5s}",
        ]
        for c in g["contenders"].values():
            floor = "" if c["ratio_to_floor"] is None else f"{c['ratio_to_floor']:.2f}"
            bpe = "" if c["bytes_per_element"] is None else f"{c['bytes_per_element']:.1f}"
            ops = "" if c["ops_per_call"] is None else f"{c['ops_per_call']:.0f}"
            iqr = f"{c['q1_ms']:.4g}-{c['q3_ms']:.4g}"
            lines.append(
                f"{c['label'][:40]:40s} {c['median_ms']:10.4g} {iqr:>17s} "
                f"{c['speedup_vs_baseline']:8.2f}x {floor:>8s} {c['gb_per_s']:7.2f} {bpe:>7s} {ops:>5s}"
            )
        lines.append(
            f"speed-up: time of the baseline ({base}) / time; x floor: time / time of the floor"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m posenc_lab.bench [--quick] [--json PATH] ...``."""
    parser = argparse.ArgumentParser(
        prog="python -m posenc_lab.bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny shapes and 3 rounds (a smoke test)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument(
        "--rounds", type=int, help="rounds per group (default: 40 for RoPE, 20 for tables)"
    )
    parser.add_argument("--threads", type=int, help="torch.set_num_threads(N) before timing")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="add the optional torch.compile contender (compiles first: slow to start)",
    )
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be >= 1")
        torch.set_num_threads(args.threads)

    groups = build_groups(quick=args.quick, rounds=args.rounds, fused=args.compile)
    results = run(groups, log=lambda s: print(s, file=sys.stderr, flush=True))
    print(format_results(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
