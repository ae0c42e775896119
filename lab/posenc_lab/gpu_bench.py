"""Measure RoPE on a CUDA GPU: ``python -m posenc_lab.gpu_bench --json PATH``.

Written and dry-run on the CPU only: this harness has never run on a GPU,
and its CUDA paths are untested. Expect to debug it on the first run.

The contenders rotate the same queries and keys, each call rotating
``q`` and ``k`` (distinct tensors, grouped-query attention: 32 query heads,
8 key heads of 128 features, the attention of Llama 3 8B):

- ``triton``: the fused kernel :func:`posenc.rope_triton.apply_rope_triton`
  (out of place, positions not read back: ``check_positions=False``), and
  ``triton_inplace``, the same writing into ``q`` and ``k``;
- ``apply_rope``: the eager :func:`posenc.apply_rope`, once for ``q`` and
  once for ``k`` (each call forms its angles);
- ``compiled_module``: ``torch.compile(RotaryEmbedding(128,
  max_positions=n), fullgraph=True)``, called as ``module(q, k, positions)``;
- ``eager_formula``: Hugging Face's ``x * cos + rotate_half(x) * sin`` on
  ``q`` and on ``k``, with ``cos`` and ``sin`` gathered per token before
  timing (in the input's dtype, as Hugging Face casts them);
- ``triton_graph`` and ``eager_graph``: the out-of-place kernel, and
  Hugging Face's formula, captured in CUDA graphs and replayed, one graph
  per sample of ``number`` calls over the same pairs of the pool as the
  other contenders: no Python and no launcher;
- ``copy``: one ``copy_`` of the buffer that holds a pair (``q`` then
  ``k``: each pair of the pool is one allocation, ``q`` and ``k`` views of
  it) into a preallocated buffer: one launch that reads and writes every
  byte of ``q`` and ``k`` once, the least any out-of-place rotation moves,
  in as few launches as the fused kernel. On CUDA this ``copy_`` is a
  ``cudaMemcpyAsync``, not a kernel of ours, so beside it
- ``triton_copy``: the same bytes copied by a Triton kernel
  (:mod:`posenc_lab.triton_copy`: one load and one store per element), the
  floor a Triton kernel such as the fused one can reach;
- ``compiled_graph``: the compiled module with ``mode="reduce-overhead"``
  (CUDA graphs; it copies each call's inputs into its static buffers, as
  it must for inputs made outside the graph), in warm cases only: every
  call writes the same static output, so in a cold sample its calls would
  not write new memory;
- production kernels, each where its library imports (else named in the
  case's ``absent`` with the reason): ``vllm``
  (``vllm._custom_ops.rotary_embedding``, in place, table in ``q``'s
  dtype), ``flashinfer`` (``apply_rope_with_cos_sin_cache_inplace``,
  float32 table), ``liger`` (``liger_rotary_pos_emb``, Hugging Face's
  tables) and ``flash_attn`` (``apply_rotary_emb`` on ``q``, then ``k``).

``q`` and ``k`` are laid out ``(b, s, n, d)`` in memory, as the projection
writes them, and passed as ``(b, n, s, d)`` views.

Cases, a sweep over tokens per call (:data:`TOKENS`) in bfloat16 and
float32: ``decode-T`` for ``T <= 256`` (``T`` sequences of one token, a
position drawn per sequence) and ``prefill-T`` beyond (one sequence,
positions ``0 .. T-1``).

Cache state. A prefill is cold: before each sample L2 is flushed (a read
of ``FLUSH_TIMES_L2`` times its size), and the sample's ``number`` calls
rotate as many distinct pairs, each writing its own output (held to the
sample's end), together at least ``COLD_TIMES_L2`` times L2
(:func:`cold_calls`). L2 is write-back: at the end event up to its size of
the sample's writes may not have reached memory yet (they are written
back during the next flush, untimed), so the window holds at least
:func:`dram_bytes_at_least` bytes of memory traffic per call, recorded as
``dram_bytes_per_call_at_least``: a bound within an eighth of the modelled
bytes. A decode step is warm, as after the projection that has just
written ``q`` and ``k``: its pool is small enough (at most a quarter of
L2, at most ``number`` pairs) to stay in L2 while every contender reads it
again and again, and every output, in place or not, goes where the
previous call wrote (the caching allocator hands back the block just
freed); the positions are fixed per case, so the table rows are in L2
too, as they would not be in a model, whose layers' weights evict them
between two layers' RoPE. A decode sample times up to ``number`` calls
queued back to back (fewer where they would queue more than
``MAX_QUEUED_LAUNCHES`` kernels: :func:`calls_per_sample`): for one
launch, the interval between launches on the device, not one kernel's
latency. That latency is measured apart (``single_launch``, for
``triton``, ``triton_copy`` and ``copy``): one call captured in a CUDA graph of its own,
replayed alone between two events, with everything in L2 (``hot_us``)
and with L2 flushed and only ``q`` and ``k`` read back (``cold_table_us``:
the position and the row from memory, a model's state). The host's time
per call (``host_median_us``) is what an eager decode step pays when the
device is not the bottleneck. Each case also records ``predicted``
(:func:`predicted_floor`): the fused kernel's floor under the cost model
(its bytes over the *measured* copy bandwidth of where they sit: memory's
for a cold case, L2's for a warm one), the assumed latencies and
an assumed 1 to 4 us of fixed device cost per kernel launched, for a first
run to confirm or refute.

How it measures: every contender is first checked against ``apply_rope``
(the fused kernel within one bfloat16 ulp, :func:`_tolerance`). Each
sample times ``number`` calls between two CUDA events, the first recorded
behind ``torch.cuda._sleep``: device work queued so that the host has
enqueued the calls before the device reaches them and the events time the
device, not the host. How much is queued is calibrated per contender
(:func:`queue_ahead_s`: twice the slowest of its warm-up samples' host
time) and recorded (``queue_ahead_us``); the host's own time per call is
recorded beside it (``host_median_us``). A sample whose enqueueing still
outlasted the queued work may hold host time: it is left out of the
statistics and kept apart (``host_bound_samples``,
``host_bound_samples_us``). ``triton_graph`` replays the same
sequence of pairs as ``triton``, so that it differs by the launches only.
Each round times every contender once, in an order drawn at random for
that round from a seeded generator (the orders are recorded), after
warm-up samples (which compile the kernels). The record's ``meta`` holds
the device, the versions, ``torch.get_num_threads()`` (for comparison with
the CPU records: on a GPU ``apply_rope`` runs in one piece), and the GPU's
clocks, throttle reasons, temperature and power read with ``nvidia-smi``
before and after the run where it answers (``clocks_before``,
``clocks_after``; the clocks are not locked). The copy bandwidth of the
device is measured first: ``dst.copy_(src)`` on two 1 GiB buffers, counted
as 2 GiB moved (``copy_bandwidth``), then the same copy within L2, on two
buffers that together fill a quarter of it, 20 copies a sample
(``l2_copy_bandwidth``), each sample queued ahead as the contenders' are.
Reported per contender: the median and the 10/25/75/90 % quantiles of
the time per call over rounds, GB/s counting one read and one write of
``q`` and ``k`` (``2 * (q.nbytes + k.nbytes)``, whatever the contender
really moves), that rate as a fraction of the faster copy's where the
bytes sit (memory's cold, L2's warm), and the medians of the per-round
ratios of its time to ``copy``'s and to ``triton_copy``'s. It counts no DRAM bytes: run it under Nsight Compute for those
(``lab/README.md``; ``--cases`` and ``--contenders`` choose what runs, and
the timed samples sit in an NVTX range named ``timed``).

``--dry-run`` runs the same code on the CPU with tiny shapes, two rounds,
the Triton kernel in Triton's interpreter, ``torch.compile`` with its
``eager`` backend and ``time.perf_counter`` for CUDA events: it checks the
command and the record's layout, and measures nothing (the record says
``"dry_run": true``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

from posenc import RotaryEmbedding, apply_rope
from posenc_lab.references import rotate_half

__all__ = [
    "Case",
    "build_cases",
    "clock_state",
    "main",
    "measure_copy_bandwidth",
    "pool_size",
    "queue_ahead_s",
    "run",
    "sample_starts",
]

#: Tokens per call of the sweep: up to ``DECODE_MAX`` a batched decode step (one token per
#: sequence, warm), beyond it one prefill sequence (cold).
TOKENS = (1, 8, 64, 256, 1024, 4096, 32768)
DECODE_MAX = 256
#: Positions the table holds: the longest prefill covers them, decode steps draw from them.
MAX_POSITIONS = max(TOKENS)
#: Device work queued ahead of a sample: this many times the slowest warm-up sample's
#: host time (the first, which compiles, left out), within these bounds.
QUEUE_FACTOR = 2.0
QUEUE_MIN_S, QUEUE_MAX_S = 50e-6, 0.5
#: A warm case's pool fills at most this fraction of L2.
WARM_FRACTION_OF_L2 = 0.25
#: A cold case reads a buffer of this many times L2 before each sample.
FLUSH_TIMES_L2 = 3
#: A cold sample rotates distinct pairs that together move at least this many times L2,
#: so that the writes still in L2 (write-back) at its end event are at most 1/8 of them.
COLD_TIMES_L2 = 8
QUANTILES = (0.10, 0.25, 0.75, 0.90)
#: Kernels a warm sample may queue. A CUDA stream holds about 1,000 pending launches;
#: beyond that ``cudaLaunchKernel`` blocks until the device drains, and the queued
#: ``_sleep`` can no longer hide the host. A warm sample makes at most this many launches.
MAX_QUEUED_LAUNCHES = 500
#: Kernels per call the dispatcher cannot see (Triton's and the libraries' own, and a
#: compiled module's), by contender; eager contenders' kernels are their ATen data ops.
OPAQUE_LAUNCHES = {
    "triton_copy": 1,
    "triton": 1,
    "triton_inplace": 1,
    "compiled_module": 2,  # inductor's kernels, about one for q and one for k
    "compiled_graph": 3,  # the replay and the copies of q and k into its static inputs
    "vllm": 1,
    "flashinfer": 1,
    "liger": 1,
    "flash_attn": 2,
}
#: Round-trip latencies assumed for the predicted floors (NVIDIA publishes neither).
L2_LATENCY_S, HBM_LATENCY_S = 200e-9, 600e-9
#: Device-side fixed cost of one kernel (launch latency, ramp, tail and the gap to the
#: next), assumed as a range for the predicted floors, as chapter 12's Exercise 2 does.
LAUNCH_COST_S = (1e-6, 4e-6)
#: Single launches timed per decode case and cache state (:func:`single_launch`).
SINGLE_REPEATS = 200


@dataclass(frozen=True)
class Case:
    """One shape and dtype: ``q`` is ``(batch, n_q, seq, head_dim)``, ``k`` has ``n_k`` heads."""

    name: str
    batch: int
    n_q: int
    n_k: int
    seq: int
    head_dim: int
    dtype: str
    number: int  # calls per timed sample
    warm: bool = False  # inputs in L2, as just written (decode); else nothing in L2

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def elements(self) -> int:
        """Elements of ``q`` and ``k`` together."""
        return self.batch * (self.n_q + self.n_k) * self.seq * self.head_dim

    def tokens(self) -> int:
        return self.batch * self.seq

    def bytes_per_call(self) -> int:
        """One read and one write of ``q`` and ``k``."""
        return 2 * self.elements() * self.torch_dtype.itemsize


def fastest_copy(copy: dict, triton_copy: dict | None = None) -> dict[str, object]:
    """The faster of two measured copy rates (``triton_copy`` ``None`` where Triton is
    not installed): ``{"gb_per_s", "source"}``, the source ``"copy_"`` or ``"triton_copy"``.

    A floor divides bytes by it: a kernel that beats the floor then moves fewer bytes
    than modelled or outruns both copies, and Nsight Compute's DRAM counters tell which.
    """
    if triton_copy is not None and triton_copy["gb_per_s"] > copy["gb_per_s"]:
        return {"gb_per_s": triton_copy["gb_per_s"], "source": "triton_copy"}
    return {"gb_per_s": copy["gb_per_s"], "source": "copy_"}


def cold_calls(bytes_per_call: int, l2_bytes: int) -> int:
    """Calls (over as many distinct pairs) in a cold sample: together at least
    ``COLD_TIMES_L2`` times L2, so that at most ``l2_bytes`` of the sample's writes can
    still sit in L2, unwritten to memory, when its end event is recorded."""
    return max(1, math.ceil(COLD_TIMES_L2 * l2_bytes / bytes_per_call))


def dram_bytes_at_least(case: Case, l2_bytes: int) -> float:
    """Bytes per call that memory must have moved inside a cold sample's timed window.

    L2 is write-back: of the ``number`` calls' writes, at most ``l2_bytes`` may still be
    dirty in L2 at the end event (written back during the next flush, untimed). Inputs
    come from memory: the flush left L2 holding only its own clean lines.
    """
    return case.bytes_per_call() - l2_bytes / case.number


def round_trips(dtype: str) -> int:
    """Dependent round trips of one program of the fused kernel, as this build's sm_90
    SASS at 4 warps issues its loads (pinned by tests/test_rope_triton.py): the
    position, then the table row with ``q``; in 16-bit dtypes ``k``'s narrower loads
    only after the first multiply, a third trip; in float32 with the row."""
    return 2 if dtype == "float32" else 3


def predicted_floor(
    case: Case, gb_per_s: float, l2_bytes: int, l2_gb_per_s: float | None = None
) -> dict[str, object]:
    """What the cost model predicts for one call of the fused kernel: a lower bound that a
    first GPU run can prove wrong.

    ``memory_us``: the bytes memory must move over the copy bandwidth of where they
    sit: a cold case's :func:`dram_bytes_at_least` over ``gb_per_s`` (memory), a warm
    case's whole call over ``l2_gb_per_s`` (a copy within L2, several times faster
    than memory), or ``None`` for a warm case without it: memory's bandwidth would
    overstate the time of bytes served by L2, so it bounds nothing there
    (``memory_source`` says which);
    ``chain_us``: the round trips in a row at the assumed latencies, as the sm_90 SASS
    of this build at 4 warps orders them (:func:`round_trips`): in bfloat16 and float16
    three (the position; then the table row with ``q``; then ``k``, which ptxas issues
    only after the first multiply that uses the row), in float32 two (``k`` with the
    row), the data dependences' own; all in L2 for a warm case timed back to back, all
    in memory for a cold one; ``chain_cold_table_us``: a decode step as a model's layer
    sees it, the position and the row in memory (evicted by the layer's weights since
    the last layer read them), ``q`` and ``k`` in L2;
    ``lower_bound_us``: the kernel's work alone: for a cold case the larger of memory
    and chain, for a warm one the chain (its memory term, from a copy within L2 timed
    with the gaps between 20 launches, may overstate the time: an estimate only);
    ``launch_us``: the fixed device cost of its ``launches_per_call`` kernels (the
    harness's count, ``OPAQUE_LAUNCHES``) at ``LAUNCH_COST_S`` each, low and high;
    ``with_launch_us``: the lower bound plus that cost, low and high, the floor a
    call pays on the device (it dominates a decode step).
    """
    if case.warm:
        moved: float = case.bytes_per_call()
        rate, source = l2_gb_per_s, None if l2_gb_per_s is None else "l2"
    else:
        moved, rate, source = dram_bytes_at_least(case, l2_bytes), gb_per_s, "memory"
    memory = None if rate is None else moved / (rate * 1e9)
    trips = round_trips(case.dtype)
    chain = trips * (L2_LATENCY_S if case.warm else HBM_LATENCY_S)
    launches = OPAQUE_LAUNCHES["triton"]
    launch = [launches * cost * 1e6 for cost in LAUNCH_COST_S]
    # a warm case's memory term is an estimate, not a bound: the copy within L2 is timed
    # over 20 launches, gaps between them included, so its rate errs low
    bound = (chain if case.warm else max(memory or 0.0, chain)) * 1e6
    return {
        "bytes_per_call": case.bytes_per_call(),
        "memory_bytes": moved,
        "memory_source": source,
        "memory_us": None if memory is None else memory * 1e6,
        "chain_us": chain * 1e6,
        "round_trips": trips,
        # the position, then the row from memory; a third trip (k) from L2
        "chain_cold_table_us": (2 * HBM_LATENCY_S + (trips - 2) * L2_LATENCY_S) * 1e6,
        "lower_bound_us": bound,
        "launches_per_call": launches,
        "launch_us_each_assumed": [cost * 1e6 for cost in LAUNCH_COST_S],
        "launch_us": launch,
        "with_launch_us": [bound + t for t in launch],
    }


def build_cases(*, dry_run: bool = False, l2_bytes: int = 0) -> list[Case]:
    """The token sweep in bfloat16 and float32: ``decode-T`` (``T`` sequences, one token
    each, warm, 100 calls a sample) up to ``DECODE_MAX`` tokens, then ``prefill-T`` (one
    sequence of ``T`` tokens, cold, :func:`cold_calls` calls a sample)."""
    cases = []
    for dtype in ("bfloat16", "float32"):
        itemsize = getattr(torch, dtype).itemsize
        if dry_run:
            shapes = [("prefill", 1, 4, 2, 8, 16, 2, False), ("decode", 3, 4, 2, 1, 16, 2, True)]
        else:
            shapes = []
            for t in TOKENS:
                if t <= DECODE_MAX:
                    shapes.append(("decode", t, 32, 8, 1, 128, 100, True))
                else:
                    nbytes = 2 * t * (32 + 8) * 128 * itemsize
                    shapes.append(
                        ("prefill", 1, 32, 8, t, 128, cold_calls(nbytes, l2_bytes), False)
                    )
        for kind, b, n_q, n_k, s, d, number, warm in shapes:
            name = f"{kind}-{b * s}-{dtype}"
            cases.append(Case(name, b, n_q, n_k, s, d, dtype, number, warm))
    return cases


# ---------------------------------------------------------------------------
# Timing: CUDA events on a GPU, perf_counter on the CPU (dry run)
# ---------------------------------------------------------------------------


#: Cycles per second assumed when converting a wait into ``torch.cuda._sleep`` cycles.
_SLEEP_HZ = 2.0e9


class _Clock:
    """Time ``fn`` on ``device``: device seconds (CUDA events) and host seconds.

    On a GPU the start event is recorded behind ``ahead_s`` of queued
    work (``torch.cuda._sleep``), so the host can enqueue every call of the
    sample before the device reaches the start event: the events then time
    the kernels back to back, not the host's Python and launch overhead,
    which ``host`` measures (``perf_counter`` around the enqueueing). A
    sample whose host time exceeds the queued wait may include host time in
    its device time; :meth:`time_both` reports that as ``host_bound``.
    """

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def time(self, fn: Callable[[], None]) -> float:
        """Device seconds of ``fn`` (see :meth:`time_both`)."""
        return self.time_both(fn)[0]

    def time_both(self, fn: Callable[[], None], ahead_s: float = 0.0) -> tuple[float, float, bool]:
        """``(device seconds, host seconds, host_bound)`` of one call of ``fn``, recorded
        behind ``ahead_s`` of queued device work."""
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            if ahead_s > 0:
                torch.cuda._sleep(int(ahead_s * _SLEEP_HZ))
            start.record()
            begin = time.perf_counter()
            fn()
            host = time.perf_counter() - begin
            end.record()
            end.synchronize()
            device = start.elapsed_time(end) / 1e3
            return device, host, ahead_s > 0 and host > ahead_s
        begin = time.perf_counter()
        fn()
        host = time.perf_counter() - begin
        return host, host, False


def queue_ahead_s(host_s: Sequence[float]) -> float:
    """Device work to queue ahead of a contender's samples, from its warm-up samples' host time.

    ``QUEUE_FACTOR`` times the slowest of them, the first left out (it
    compiles), within ``[QUEUE_MIN_S, QUEUE_MAX_S]``: the host then enqueues a
    sample's calls before the device reaches them. More than needed costs
    only waiting, never a biased time.
    """
    later = list(host_s[1:]) or list(host_s)
    return min(QUEUE_MAX_S, max(QUEUE_MIN_S, QUEUE_FACTOR * max(later, default=0.0)))


class _L2Flush:
    """Evict what L2 holds: read a buffer of ``FLUSH_TIMES_L2`` times its size.

    A read, not a write, so that L2 is left holding clean lines, and the next
    kernel does not pay for writing back the flush's own. ``calls`` counts the
    flushes (the tests read it); with ``l2_bytes = 0`` (a dry run) nothing is read.
    """

    def __init__(self, device: torch.device, l2_bytes: int) -> None:
        size = FLUSH_TIMES_L2 * l2_bytes
        self.buffer = torch.ones(size, dtype=torch.uint8, device=device) if size else None
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.buffer is not None:
            self.buffer.sum(dtype=torch.int64)


def measure_copy_bandwidth(
    device: torch.device,
    *,
    nbytes: int = 1 << 30,
    repeats: int = 20,
    calls: int = 1,
    copier: Callable[[torch.Tensor, torch.Tensor], object] | None = None,
) -> dict[str, object]:
    """The device's copy bandwidth: ``dst.copy_(src)`` of ``nbytes`` (or ``copier(src,
    dst)``, e.g. :func:`posenc_lab.triton_copy.triton_copy`), counted as ``2 * nbytes``.

    With ``nbytes`` of a quarter of L2 or less (``src`` and ``dst`` together within
    ``WARM_FRACTION_OF_L2``, as a warm case's pool) the copy runs within L2 after the
    warm-up: L2's copy bandwidth, timed over ``calls`` copies a sample so that one
    sample outlasts the events' resolution. Each sample is queued behind work
    calibrated from the warm-up's host time (:func:`queue_ahead_s`), as the
    contenders' are, so that the events time the copies back to back, not the host
    launching them; a sample that still waited on the host is left out
    (``host_bound_samples``).

    Returns:
        dict[str, object]: ``gb_per_s`` (from the median time), the bytes, the copies
        per sample, the queued work, the host-bound samples left out and every kept
        sample in milliseconds.
    """
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    clock = _Clock(device)

    def copies() -> None:
        for _ in range(calls):
            if copier is None:
                dst.copy_(src)
            else:
                copier(src, dst)

    warm_host = []
    for _ in range(3):
        begin = time.perf_counter()
        copies()
        warm_host.append(time.perf_counter() - begin)
        if clock.cuda:
            torch.cuda.synchronize(device)
    # queued work ahead of each sample, as for the contenders: a copy within L2 is over
    # in about a microsecond, less than the host takes to launch the next one
    ahead = queue_ahead_s(warm_host) if clock.cuda else 0.0
    timed = [clock.time_both(copies, ahead) for _ in range(repeats)]
    samples = [device_s / calls for device_s, _, late in timed if not late]
    if not samples:
        raise RuntimeError(
            f"every copy sample of {nbytes} bytes was host-bound "
            f"(queued {ahead * 1e6:.0f} us ahead): the copy rate cannot be measured"
        )
    median = statistics.median(samples)
    return {
        "bytes": nbytes,
        "bytes_moved": 2 * nbytes,
        "calls_per_sample": calls,
        "gb_per_s": 2 * nbytes / median / 1e9,
        "queue_ahead_us": ahead * 1e6,
        "host_bound_samples": repeats - len(samples),
        "samples_ms": [t * 1e3 for t in samples],
    }


# ---------------------------------------------------------------------------
# Contenders
# ---------------------------------------------------------------------------


#: The Triton modules of the contenders, each with one of its kernels (to tell how it
#: was built): name -> kernel attribute.
TRITON_MODULES = {"posenc.rope_triton": "_rope_qk_kernel", "posenc_lab.triton_copy": "_copy_kernel"}


def _triton_module(interpret: bool, name: str = "posenc.rope_triton"):
    """A module of ``TRITON_MODULES``, its kernels built for the interpreter or for the GPU.

    Triton reads ``TRITON_INTERPRET`` when a kernel is decorated, that is
    when the module is imported: set for that import only.
    """
    saved = os.environ.get("TRITON_INTERPRET")
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    try:
        module = importlib.import_module(name)
        from triton.runtime.interpreter import InterpretedFunction

        if interpret:
            # Triton 3.9's interpreter imports this on a kernel's first call (to name an
            # int argument's type), and the import asserts that TRITON_INTERPRET is set
            importlib.import_module("triton.experimental.gluon")

        if isinstance(getattr(module, TRITON_MODULES[name]), InterpretedFunction) != interpret:
            module = importlib.reload(module)
        return module
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved


@dataclass
class _Inputs:
    """A pool of distinct ``(q, k)`` pairs and what every contender shares."""

    pool: list[tuple[torch.Tensor, torch.Tensor]]  # (b, n, s, d) views of ``flat``: q, then k
    flat: list[torch.Tensor]  # each pair as one buffer, (b, s, n, d) order, for ``copy``
    outputs: list[torch.Tensor]  # ``copy``'s: one per pair when cold, one reused when warm
    positions: torch.Tensor  # (b, s)
    cos: torch.Tensor  # (n, d/2) float32: the table of the kernel and the module
    sin: torch.Tensor
    hf_cos: torch.Tensor  # (b, 1, s, d) in the input's dtype
    hf_sin: torch.Tensor


def pool_size(case: Case, l2_bytes: int) -> int:
    """Pairs of ``(q, k)`` to cycle through.

    A cold case takes ``case.number``: each call of a sample rotates its own
    pair (and writes its own output), and L2 is flushed before each sample,
    so no pair is found there. A warm case takes as many as fill ``WARM_FRACTION_OF_L2`` of
    L2, from 1 to ``case.number``: every contender's calls read them again
    and again, so they stay in L2, as ``q`` and ``k`` just written by the
    projection before RoPE would be.
    """
    if not case.warm:
        return case.number
    pair_bytes = case.elements() * case.torch_dtype.itemsize
    return max(1, min(case.number, math.floor(WARM_FRACTION_OF_L2 * l2_bytes / pair_bytes)))


def sample_starts(n_pool: int, number: int) -> list[int]:
    """The pairs at which samples start: the cursor moves ``number`` pairs a sample."""
    return sorted({(c * number) % n_pool for c in range(n_pool)})


def _inputs(case: Case, device: torch.device, l2_bytes: int, seed: int) -> _Inputs:
    g = torch.Generator(device="cpu").manual_seed(seed)
    dtype = case.torch_dtype
    n_pool = pool_size(case, l2_bytes)
    # (b, s, n, d), as the projection writes them; the contenders get (b, n, s, d) views
    q_shape = (case.batch, case.seq, case.n_q, case.head_dim)
    k_shape = (case.batch, case.seq, case.n_k, case.head_dim)
    n_q = math.prod(q_shape)
    # each pair one buffer, q then k (k starts 16-byte aligned): copy moves both in one launch
    block = torch.randn((n_pool, n_q + math.prod(k_shape)), generator=g)
    flat = list(block.to(device=device, dtype=dtype).unbind(0))
    pool = [
        (f[:n_q].view(q_shape).transpose(1, 2), f[n_q:].view(k_shape).transpose(1, 2)) for f in flat
    ]
    # copy's outputs: cold, one per pair, as every call of a cold sample writes new memory;
    # warm, one buffer, as the allocator hands the others the block just freed
    outputs = [torch.empty_like(f) for f in (flat if not case.warm else flat[:1])]
    if case.seq > 1:
        positions = torch.arange(case.seq).expand(case.batch, case.seq)
    else:
        positions = torch.randint(0, MAX_POSITIONS, (case.batch, 1), generator=g)
    positions = positions.contiguous().to(device)
    rope = RotaryEmbedding(case.head_dim, max_positions=MAX_POSITIONS)
    rope.reserve(MAX_POSITIONS, device)  # the table, built on the device
    # Hugging Face's tables: the angles of each half repeated, gathered per token
    angles = positions[:, None, :, None].float() * rope.inv_freq  # (b, 1, s, d/2)
    angles = torch.cat((angles, angles), dim=-1)  # (b, 1, s, d)
    return _Inputs(
        pool,
        flat,
        outputs,
        positions,
        rope.cos_cached,
        rope.sin_cached,
        angles.cos().to(dtype),
        angles.sin().to(dtype),
    )


def _contenders(
    case: Case,
    inputs: _Inputs,
    *,
    interpret: bool,
    compile_backend: str | None,
    absent: dict[str, str] | None = None,
) -> dict[str, tuple[str, Callable[[int], object]]]:
    """name -> (label, fn(i)) where ``fn(i)`` rotates the ``i``-th pair of the pool.

    ``fn(i)`` returns the rotated ``(q, k)``, or ``None`` when it rotated them in
    place. The contenders that cannot run here (a library not installed, CUDA graphs
    without a GPU) are left out and named in ``absent`` with the reason.
    """
    absent = {} if absent is None else absent
    pool, positions = inputs.pool, inputs.positions
    heads_positions = positions[:, None, :]  # (b, 1, s): broadcasts over the heads
    cos, sin, hf_cos, hf_sin = inputs.cos, inputs.sin, inputs.hf_cos, inputs.hf_sin

    def copy(i: int) -> None:  # q and k in one launch, as the fused kernel
        inputs.outputs[i % len(inputs.outputs)].copy_(inputs.flat[i])

    def eager_formula(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = pool[i]
        return q * hf_cos + rotate_half(q) * hf_sin, k * hf_cos + rotate_half(k) * hf_sin

    def eager_apply_rope(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = pool[i]
        return apply_rope(q, heads_positions), apply_rope(k, heads_positions)

    found: dict[str, tuple[str, Callable[[int], object]]] = {
        "copy": ("one copy_ of q and k (the floor)", copy),
        "eager_formula": ("x*cos + rotate_half(x)*sin (Hugging Face)", eager_formula),
        "apply_rope": ("posenc.apply_rope on q, then on k", eager_apply_rope),
    }
    try:
        rope_triton = _triton_module(interpret)
    except ImportError:
        if not interpret:
            raise
        rope_triton = None  # a dry run without Triton: the kernel's contenders are left out
    if rope_triton is not None:
        kernel = rope_triton.apply_rope_triton

        def fused(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            q, k = pool[i]
            return kernel(q, k, positions, cos, sin, check_positions=False)

        def fused_inplace(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            q, k = pool[i]  # rotating again and again keeps |x|: the values stay in range
            return kernel(q, k, positions, cos, sin, inplace=True, check_positions=False)

        copy_kernel = _triton_module(interpret, "posenc_lab.triton_copy").triton_copy

        def triton_copy(i: int) -> None:  # the same bytes as copy, in a Triton kernel
            copy_kernel(inputs.flat[i], inputs.outputs[i % len(inputs.outputs)])

        found["triton_copy"] = ("one Triton copy of q and k (a Triton kernel's floor)", triton_copy)
        found["triton"] = ("posenc.rope_triton, out of place", fused)
        found["triton_inplace"] = ("posenc.rope_triton, in place", fused_inplace)
        found["triton_graph"] = (
            "posenc.rope_triton, replayed from CUDA graphs",
            _GraphReplay(fused, positions.device, len(pool), case.number, keep=not case.warm),
        )
    # Hugging Face's formula under a graph too: its ten kernels without the host's launches
    found["eager_graph"] = (
        "x*cos + rotate_half(x)*sin, replayed from CUDA graphs",
        _GraphReplay(eager_formula, positions.device, len(pool), case.number, keep=not case.warm),
    )
    if compile_backend is not None:
        # dynamo caches per code object (RotaryEmbedding.forward), not per module, and
        # with fullgraph=True its recompile limit (8) is a hard error: a run's shapes
        # would reach it by about the fifth case. A fresh cache per case, rather than a
        # raised limit, keeps the limit as an alarm for recompiles within one case
        torch.compiler.reset()
        module = RotaryEmbedding(case.head_dim, max_positions=MAX_POSITIONS)
        module.reserve(MAX_POSITIONS, positions.device)  # before compiling, as documented
        compiled = torch.compile(module, fullgraph=True, dynamic=False, backend=compile_backend)

        def compiled_module(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            q, k = pool[i]
            return compiled(q, k, heads_positions)

        found["compiled_module"] = (
            "torch.compile(RotaryEmbedding(max_positions))",
            compiled_module,
        )
    why_not = _compiled_graph_absent(case, compile_backend, positions.device.type)
    if why_not is None:  # inductor: compile_backend is set, the cache was reset above
        own = RotaryEmbedding(case.head_dim, max_positions=MAX_POSITIONS)  # its own compile
        own.reserve(MAX_POSITIONS, positions.device)
        graphed = torch.compile(own, mode="reduce-overhead", fullgraph=True, dynamic=False)

        def compiled_graph(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            q, k = pool[i]
            torch.compiler.cudagraph_mark_step_begin()  # a new step: earlier outputs may go
            return graphed(q, k, heads_positions)

        found["compiled_graph"] = (
            "torch.compile(mode='reduce-overhead'): CUDA graph, inputs copied in",
            compiled_graph,
        )
    else:
        absent["compiled_graph"] = why_not
    found.update(_production_contenders(case, inputs, absent))
    return found


def _compiled_graph_absent(case: Case, compile_backend: str | None, device_type: str) -> str | None:
    """Why ``compiled_graph`` is left out of ``case``, or ``None`` where it runs.

    Cold cases leave it out: cudagraph trees write every call into the same static
    output (and copy the inputs into static buffers), so a cold sample's calls would
    not each write new memory, and part of their writes would stay in L2.
    """
    if compile_backend != "inductor" or device_type != "cuda":
        return "mode='reduce-overhead' needs inductor and a CUDA device"
    if not case.warm:
        return "left out of cold cases: its calls all write one static output"
    return None


#: The production kernels timed where their library imports: name -> (module, attribute).
PRODUCTION = {
    "vllm": ("vllm._custom_ops", "rotary_embedding"),
    "flashinfer": ("flashinfer.rope", "apply_rope_with_cos_sin_cache_inplace"),
    "liger": ("liger_kernel.transformers.rope", "liger_rotary_pos_emb"),
    "flash_attn": ("flash_attn.layers.rotary", "apply_rotary_emb"),
}


def _production(name: str) -> tuple[Callable | None, str | None]:
    """``(function, None)`` where ``PRODUCTION[name]`` imports, else ``(None, why)``."""
    module_name, attribute = PRODUCTION[name]
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attribute), None
    except Exception as error:  # ImportError, or a library that fails to load its kernels
        return None, f"{module_name}.{attribute}: {type(error).__name__}: {error}"[:300]


def _production_contenders(
    case: Case, inputs: _Inputs, absent: dict[str, str]
) -> dict[str, tuple[str, Callable[[int], object]]]:
    """vLLM's, FlashInfer's, Liger Kernel's and FlashAttention's RoPE, each called as its
    library documents it, on the same pairs (their ``(b, s, n, d)`` memory); the ones
    whose library does not import are named in ``absent``."""
    pool, positions = inputs.pool, inputs.positions
    d, dtype = case.head_dim, case.torch_dtype
    tokens = positions.reshape(-1)  # (b * s,): one position per token

    def flat(x: torch.Tensor) -> torch.Tensor:
        """(b, n, s, d) view -> (b * s, n * d), a view of the projection's memory."""
        return x.transpose(1, 2).reshape(case.tokens(), -1)

    found: dict[str, tuple[str, Callable[[int], object]]] = {}
    fn, why = _production("vllm")
    if fn is None:
        absent["vllm"] = why  # type: ignore[assignment]
    else:
        cache = torch.cat((inputs.cos, inputs.sin), dim=-1).to(dtype)  # vLLM casts its table

        def vllm(i: int, fn=fn, cache=cache) -> None:
            q, k = pool[i]
            fn(tokens, flat(q), flat(k), d, cache, True)  # in place; True: the half layout

        found["vllm"] = ("vLLM rotary_embedding, in place", vllm)
    fn, why = _production("flashinfer")
    if fn is None:
        absent["flashinfer"] = why  # type: ignore[assignment]
    else:
        cache32 = torch.cat((inputs.cos, inputs.sin), dim=-1).contiguous()  # float32

        def flashinfer(i: int, fn=fn, cache=cache32) -> None:
            q, k = pool[i]
            fn(tokens, flat(q), flat(k), d, cache, is_neox=True)

        found["flashinfer"] = ("FlashInfer apply_rope_with_cos_sin_cache_inplace", flashinfer)
    fn, why = _production("liger")
    if fn is None:
        absent["liger"] = why  # type: ignore[assignment]
    else:
        cos_b, sin_b = inputs.hf_cos[:, 0], inputs.hf_sin[:, 0]  # (b, s, d), Hugging Face's

        def liger(i: int, fn=fn) -> tuple[torch.Tensor, torch.Tensor]:
            q, k = pool[i]  # its kernel writes into q and k where their (b, s, n, d) is dense
            return fn(q, k, cos_b, sin_b)

        found["liger"] = ("Liger Kernel liger_rotary_pos_emb", liger)
    fn, why = _production("flash_attn")
    if fn is None:
        absent["flash_attn"] = why  # type: ignore[assignment]
    else:
        # (n, d/2) in x's dtype, dense (the module's cos and sin are strided views)
        cos_fa, sin_fa = (t.to(dtype).contiguous() for t in (inputs.cos, inputs.sin))
        # a position per sequence: 0 for the prefill (positions 0 .. s-1), else its own
        offsets = 0 if case.seq > 1 else positions[:, 0].contiguous()

        def flash_attn(i: int, fn=fn) -> tuple[torch.Tensor, torch.Tensor]:
            q, k = pool[i]  # (b, s, n, d) views, as it takes them; one call each
            q_out = fn(q.transpose(1, 2), cos_fa, sin_fa, seqlen_offsets=offsets)
            k_out = fn(k.transpose(1, 2), cos_fa, sin_fa, seqlen_offsets=offsets)
            return q_out.transpose(1, 2), k_out.transpose(1, 2)

        found["flash_attn"] = ("FlashAttention apply_rotary_emb on q, then on k", flash_attn)
    return found


def _sample_calls(
    call: Callable[[int], object], first: int, number: int, n_pool: int, keep: bool
) -> tuple[object, list[object]]:
    """The ``number`` calls of a sample from pair ``first``, as a graph captures them.

    Returns the first call's output (kept for the check) and, when ``keep`` (a cold
    sample), every other output, so that each call writes memory of its own. Otherwise
    (warm) each other output is dropped before the next call is made, so that the
    allocator, in a capture as in eager code, hands the next call the block just freed:
    the sample writes two outputs' worth of memory, not ``number``, and stays in L2.
    """
    kept = call(first)
    held = []
    for j in range(1, number):
        out = call((first + j) % n_pool)
        if keep:
            held.append(out)
        del out
    return kept, held


class _GraphReplay:
    """``call(i)`` for ``number`` consecutive pairs of the pool, captured in CUDA graphs.

    One graph per pair at which a sample starts (:func:`sample_starts`);
    :meth:`sample` replays the graph of a sample, which rotates the same
    pairs as the other contenders' calls in that sample, so that replaying
    differs from calling by the launches only, not by what L2 holds. Calling
    the object with ``i`` (a sample's start) replays that graph and returns
    the output of its first call, for the check. On the CPU (dry run) there
    is no graph: the calls run directly, which checks the plumbing only.
    """

    def __init__(
        self,
        call: Callable[[int], object],
        device: torch.device,
        n_pool: int,
        number: int,
        keep: bool = False,
    ) -> None:
        self.call, self.n_pool, self.number = call, n_pool, number
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, object]] = {}
        self.held: dict[int, list[object]] = {}
        if device.type != "cuda":
            return
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # warm up off the default stream, as capture needs
            for i in range(3):
                call(i % n_pool)
        torch.cuda.current_stream(device).wait_stream(stream)
        for first in sample_starts(n_pool, number):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                kept, held = _sample_calls(call, first, number, n_pool, keep)
            self.graphs[first] = (graph, kept)
            self.held[first] = held  # cold: every call of the sample wrote its own output

    def sample(self, first: int) -> None:
        """The ``number`` calls from pair ``first`` on."""
        if not self.graphs:
            for j in range(self.number):
                self.call((first + j) % self.n_pool)
            return
        self.graphs[first][0].replay()

    def __call__(self, first: int) -> object:
        if not self.graphs:
            return self.call(first)
        graph, kept = self.graphs[first]
        graph.replay()
        return kept


def _check(
    case: Case, inputs: _Inputs, contenders: dict[str, tuple[str, Callable[[int], object]]]
) -> None:
    """Every contender agrees with ``apply_rope`` on the first pair.

    Each runs on a copy of the pair in the same memory layout, put in the pool for
    the call: what it returns is compared, or, when it returns ``None`` (in place),
    the copy. The pool's own pair is left as it was. ``triton_graph`` replays what it
    captured, the pool's own pair, out of place.
    """
    q, k = inputs.pool[0]
    p = inputs.positions[:, None, :]
    expected = (apply_rope(q, p), apply_rope(k, p))
    for name, (_, fn) in contenders.items():
        if name in ("copy", "triton_copy"):  # a copy must give the pair's bytes exactly
            inputs.outputs[0].fill_(0)
            fn(0)
            if not torch.equal(inputs.outputs[0], inputs.flat[0]):
                raise AssertionError(f"{name}: the copy differs from the pair it copied")
            continue
        copies = tuple(x.transpose(1, 2).clone().transpose(1, 2) for x in (q, k))
        inputs.pool[0] = copies
        try:
            got = fn(0)
        finally:
            inputs.pool[0] = (q, k)
        got = copies if got is None else got
        for actual, wanted in zip(got, expected, strict=True):  # type: ignore[arg-type]
            torch.testing.assert_close(actual, wanted, **_tolerance(name, case.dtype), msg=name)


def _tolerance(name: str, dtype: str) -> dict[str, float]:
    """How close a contender must come to ``apply_rope``: ``rtol`` and ``atol``.

    The fused kernel rotates in float32 and rounds once, as ``apply_rope``
    does: in bfloat16 the two may round float32 results a few units apart to
    neighbouring values, one bfloat16 ulp (``eps * |x|``); in float32 they
    differ by a few float32 roundings of values of a few units. The eager
    formula rounds cos, sin and every product to bfloat16, and the compiled
    module may order its float32 arithmetic otherwise: they get a looser bound.
    """
    if name.startswith("triton"):
        eps = torch.finfo(getattr(torch, dtype)).eps
        return {"rtol": eps, "atol": 1e-5} if dtype != "float32" else {"rtol": 0.0, "atol": 1e-5}
    return {"bfloat16": {"rtol": 3e-2, "atol": 3e-2}, "float32": {"rtol": 2e-5, "atol": 2e-5}}[
        dtype
    ]


# ---------------------------------------------------------------------------
# Running and summarising
# ---------------------------------------------------------------------------


def _quantiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    out = {}
    for q in QUANTILES:  # linear interpolation between the order statistics
        pos = q * (len(ordered) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(ordered) - 1)
        out[f"q{round(q * 100):02d}_us"] = (
            ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
        ) * 1e6
    return out


@contextlib.contextmanager
def _timed_range(cuda: bool):
    """An NVTX range named ``timed`` around a timed sample (on a GPU), for ncu's filter."""
    if not cuda:
        yield
        return
    torch.cuda.nvtx.range_push("timed")
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()


def time_case(
    case: Case,
    device: torch.device,
    *,
    rounds: int,
    warmup: int,
    seed: int,
    l2_bytes: int,
    copy_gb_per_s: float,
    l2_copy_gb_per_s: float | None = None,
    floor_gb_per_s: float | None = None,
    interpret: bool = False,
    compile_backend: str | None = "inductor",
    only: Sequence[str] | None = None,
) -> dict[str, object]:
    """Check, warm up and time every contender on ``case`` (those named in ``only``, and
    ``copy``, when given); return the case's record."""
    inputs = _inputs(case, device, l2_bytes, seed)
    absent: dict[str, str] = {}
    contenders = _contenders(
        case, inputs, interpret=interpret, compile_backend=compile_backend, absent=absent
    )
    if only is not None:
        contenders = {n: c for n, c in contenders.items() if n == "copy" or n in only}
    _check(case, inputs, contenders)
    clock = _Clock(device)
    n_pool = len(inputs.pool)
    # a cold case starts every sample with nothing in L2: inputs, outputs (in place or
    # not) and the table all come from memory; a warm case keeps its small pool in L2,
    # and every output, in place or not, is written where the previous call wrote
    flush = None if case.warm else _L2Flush(device, l2_bytes)

    launches = {name: launches_per_call(name, fn) for name, (_, fn) in contenders.items()}
    n_calls = {name: calls_per_sample(case, launches[name]) for name in contenders}

    def sampler(fn: Callable[[int], object], number: int) -> Callable[[int], None]:
        """The ``number`` calls of one sample, from pair ``first`` on."""
        if isinstance(fn, _GraphReplay):
            return fn.sample

        def calls(first: int) -> None:
            if case.warm:  # each output dropped: the next call writes into its block
                for j in range(number):
                    fn((first + j) % n_pool)
                return
            # cold: outputs held to the sample's end, so each call writes new memory
            held = [fn((first + j) % n_pool) for j in range(number)]
            del held

        return calls

    samplers = {name: sampler(fn, n_calls[name]) for name, (_, fn) in contenders.items()}
    ahead: dict[str, float] = {}
    for name, run_sample in samplers.items():  # warm-up, where the pool's samples start
        warm_host = []
        for c in range(warmup):
            begin = time.perf_counter()
            run_sample((c * case.number) % n_pool)
            warm_host.append(time.perf_counter() - begin)
            if clock.cuda:
                torch.cuda.synchronize(device)
        # device work to queue ahead of this contender's samples, from its own host time
        ahead[name] = queue_ahead_s(warm_host) if clock.cuda else 0.0
    rng = random.Random(f"{seed}:{case.name}")  # str seeds are stable across runs
    names = list(contenders)
    samples: dict[str, list[float]] = {n: [] for n in names}
    host: dict[str, list[float]] = {n: [] for n in names}
    late: dict[str, list[bool]] = {n: [] for n in names}
    orders = []
    cursor = 0  # the next pair of the pool, across contenders and rounds
    for _ in range(rounds):
        order = rng.sample(names, len(names))
        orders.append(order)
        for name in order:
            if flush is not None:
                flush()
            with _timed_range(clock.cuda):  # ncu --nvtx-include "timed/" profiles these only
                device_s, host_s, is_late = clock.time_both(
                    lambda run=samplers[name], first=cursor: run(first), ahead[name]
                )
            samples[name].append(device_s / n_calls[name])
            host[name].append(host_s / n_calls[name])
            late[name].append(is_late)
            cursor = (cursor + case.number) % n_pool
    nbytes = case.bytes_per_call()
    result: dict[str, object] = {
        **asdict(case),
        "q_shape": [case.batch, case.n_q, case.seq, case.head_dim],
        "k_shape": [case.batch, case.n_k, case.seq, case.head_dim],
        "bytes_per_call": nbytes,
        "pool": n_pool,
        "l2_flushed_bytes": 0 if flush is None else FLUSH_TIMES_L2 * l2_bytes,
        # cold: what memory must move per call inside the timed window (write-back aside)
        "dram_bytes_per_call_at_least": None if case.warm else dram_bytes_at_least(case, l2_bytes),
        "absent": absent,
        # the fused kernel's floor under the cost model, for a first GPU run to refute
        "predicted": predicted_floor(
            case, floor_gb_per_s or copy_gb_per_s, l2_bytes, l2_copy_gb_per_s
        ),
        "rounds": rounds,
        "warmup": warmup,
        "orders": orders,
        "contenders": {},
    }
    for name in names:
        result["contenders"][name] = {  # type: ignore[index]
            "label": contenders[name][0],
            **summarise(samples[name], late[name], samples["copy"], late["copy"], nbytes),
            "fraction_of_copy_bandwidth": None,
            "host_median_us": statistics.median(host[name]) * 1e6,
            "queue_ahead_us": ahead[name] * 1e6,
            "launches_per_call": launches[name],
            "calls_per_sample": n_calls[name],
            # the fused kernel's distance from a Triton kernel that moves the same bytes
            "ratio_to_triton_copy": (
                paired_ratio(samples[name], late[name], samples["triton_copy"], late["triton_copy"])
                if "triton_copy" in samples
                else None
            ),
        }
        found = result["contenders"][name]  # type: ignore[index]
        if found["gb_per_s"] is not None:
            # of the faster copy's rate where the bytes sit: memory's cold, L2's warm
            memory_rate = floor_gb_per_s or copy_gb_per_s
            where = l2_copy_gb_per_s if case.warm and l2_copy_gb_per_s else memory_rate
            found["fraction_of_copy_bandwidth"] = found["gb_per_s"] / where
    if case.warm:  # one kernel's latency beside the back-to-back throughput
        touch = _Touch(inputs)
        result["single_launch"] = {
            name: single_launch(
                lambda fn=contenders[name][1]: fn(0),
                touch,
                _L2Flush(device, l2_bytes),
                device,
                repeats=3 if interpret else SINGLE_REPEATS,
            )
            for name in ("triton", "triton_copy", "copy")
            if name in contenders
        }
    return result


def paired_ratio(
    samples: Sequence[float],
    late: Sequence[bool],
    floor: Sequence[float],
    floor_late: Sequence[bool],
) -> float | None:
    """The median over rounds of a contender's time over a baseline's in the same round,
    the rounds in which neither sample was host-bound (``None`` if none is left)."""
    ratios = [
        t / f for t, b, f, fb in zip(samples, late, floor, floor_late, strict=True) if not (b or fb)
    ]
    return statistics.median(ratios) if ratios else None


def summarise(
    samples: Sequence[float],
    late: Sequence[bool],
    floor: Sequence[float],
    floor_late: Sequence[bool],
    nbytes: int,
) -> dict[str, object]:
    """A contender's statistics over its samples that were not host-bound.

    A host-bound sample (its enqueueing outlasted the queued work) may hold host time
    in its device time: it is kept apart (``host_bound_samples_us``), out of the
    median, the quantiles and the ratios; ``ratio_to_copy`` pairs the rounds in which
    neither the contender's sample nor ``copy``'s was host-bound. Where none is left,
    the statistics are ``None``.
    """
    kept = [t for t, b in zip(samples, late, strict=True) if not b]
    out: dict[str, object] = {
        "median_us": None,
        **{f"q{round(q * 100):02d}_us": None for q in QUANTILES},
        "min_us": None,
        "gb_per_s": None,
        "ratio_to_copy": paired_ratio(samples, late, floor, floor_late),
        "host_bound_samples": len(samples) - len(kept),
        "host_bound_samples_us": [t * 1e6 for t, b in zip(samples, late, strict=True) if b],
        "samples_us": [t * 1e6 for t in kept],
    }
    if kept:
        median = statistics.median(kept)
        out.update(median_us=median * 1e6, **_quantiles(kept), min_us=min(kept) * 1e6)
        out["gb_per_s"] = nbytes / median / 1e9
    return out


def launches_per_call(name: str, fn: Callable[[int], object]) -> int:
    """Kernels one call of contender ``name`` queues: ``OPAQUE_LAUNCHES`` for the kernels
    the dispatcher cannot see, else its ATen data operations, counted on pair 0 (each
    one kernel in eager code); 0 for a graph replay, one launch a whole sample."""
    if isinstance(fn, _GraphReplay):
        return 0
    if name in OPAQUE_LAUNCHES:
        return OPAQUE_LAUNCHES[name]
    from posenc_lab.traffic import count_traffic

    return max(1, len(count_traffic(lambda: fn(0)).ops))


def calls_per_sample(case: Case, launches: int) -> int:
    """Calls in one of a contender's samples: ``case.number``, or in a warm case as many
    as queue at most ``MAX_QUEUED_LAUNCHES`` kernels. A cold sample keeps its number:
    its distinct pairs are what make it cold, and it queues at most a few hundred."""
    if not case.warm or launches == 0:
        return case.number
    return max(1, min(case.number, MAX_QUEUED_LAUNCHES // launches))


class _Touch:
    """Read ``q`` and ``k`` of pair 0 (one buffer) back into L2 after a flush, as the
    projection leaves them; the table row and the positions stay in memory."""

    def __init__(self, inputs: _Inputs) -> None:
        self.flat = inputs.flat[0]
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        self.flat.sum(dtype=torch.float32)


def single_launch(
    call: Callable[[], object],
    touch: Callable[[], None],
    flush: Callable[[], None],
    device: torch.device,
    repeats: int = SINGLE_REPEATS,
) -> dict[str, float]:
    """One call timed alone, ``repeats`` times in each of two cache states.

    ``hot_us``: called again and again, everything in L2 (what back-to-back samples
    see). ``cold_table_us``: before each, L2 flushed, then ``touch()`` reads ``q`` and
    ``k`` back: the position and the table row come from memory, as in a model's
    layer, whose weights evict them between two layers' RoPE. On a GPU the call is
    captured in a CUDA graph of its own, and each replay is queued with its two events
    behind ``QUEUE_MIN_S`` of ``torch.cuda._sleep``, so the events time the device
    (the replay's own launch on the device included: compare with ``copy``'s). On
    the CPU (dry run) ``time.perf_counter`` times the call itself.
    """
    clock = _Clock(device)
    run: Callable[[], object] = call
    ahead = 0.0
    if clock.cuda:
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # warm up off the default stream, as capture needs
            for _ in range(3):
                call()
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        run, ahead = graph.replay, QUEUE_MIN_S
    hot = [clock.time_both(run, ahead) for _ in range(repeats)]
    cold = []
    for _ in range(repeats):
        flush()
        touch()
        cold.append(clock.time_both(run, ahead))

    def median_us(timed: list[tuple[float, float, bool]]) -> float | None:
        kept = [device_s for device_s, _, late in timed if not late]
        return statistics.median(kept) * 1e6 if kept else None

    return {
        "hot_us": median_us(hot),
        "cold_table_us": median_us(cold),
        "repeats": repeats,
        # replays whose enqueueing outlasted the queued sleep: left out of the medians
        "host_bound": sum(late for *_, late in hot + cold),
    }


#: What ``nvidia-smi`` is asked about the clocks, before and after the run.
CLOCK_FIELDS = (
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.max.mem",
    "clocks.applications.graphics",
    "clocks_event_reasons.active",
    "temperature.gpu",
    "power.draw",
)


def _nvidia_smi(fields: Sequence[str]) -> dict[str, str] | None:
    """``nvidia-smi --query-gpu`` for the first GPU, or ``None`` where it cannot answer."""
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    values = [v.strip() for v in done.stdout.strip().splitlines()[0].split(",")]
    return dict(zip(fields, values, strict=False))


def _driver_version() -> str | None:
    found = _nvidia_smi(["driver_version"])
    return found["driver_version"] if found else None


def clock_state() -> dict[str, str] | None:
    """The GPU's clocks, throttle reasons, temperature and power now (``None`` without nvidia-smi)."""
    return _nvidia_smi(CLOCK_FIELDS)


def _meta(device: torch.device, *, dry_run: bool, seed: int, compile_backend: str | None) -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    meta: dict[str, object] = {
        "dry_run": dry_run,
        "device": str(device),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "triton": triton_version,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "seed": seed,
        "compile_backend": compile_backend,
        # for comparison with the CPU records; apply_rope blocks on the CPU only
        "torch_num_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        meta.update(
            device_name=props.name,
            capability=list(torch.cuda.get_device_capability(device)),
            multiprocessors=props.multi_processor_count,
            memory_bytes=props.total_memory,
            l2_cache_bytes=getattr(props, "L2_cache_size", None),
            driver=_driver_version(),
        )
    else:
        meta.update(device_name=platform.processor() or platform.machine())
    return meta


def run(
    *,
    dry_run: bool = False,
    rounds: int | None = None,
    seed: int = 0,
    compile_backend: str | None = None,
    log: Callable[[str], None] | None = None,
    cases: Sequence[str] | None = None,
    contenders: Sequence[str] | None = None,
) -> dict[str, object]:
    """Measure every case (those named in ``cases`` when given, each with the contenders
    named in ``contenders`` and ``copy``); the record as a JSON-ready dict."""
    if dry_run:
        device = torch.device("cpu")
        compile_backend = compile_backend or "eager"
        rounds = rounds or 2
        warmup, l2_bytes = 1, 0
        copy = measure_copy_bandwidth(device, nbytes=1 << 20, repeats=3)
        l2_copy = measure_copy_bandwidth(device, nbytes=1 << 16, repeats=3, calls=2)
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run with --dry-run to check the command on the CPU")
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise SystemExit("TRITON_INTERPRET=1 is set: unset it to run the kernel on the GPU")
        device = torch.device("cuda")
        compile_backend = compile_backend or "inductor"
        rounds = rounds or 30
        warmup = 5
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        copy = measure_copy_bandwidth(device)
        # src and dst within a quarter of L2, as a warm case's pool: the warm floors' rate
        l2_copy = measure_copy_bandwidth(
            device, nbytes=int(WARM_FRACTION_OF_L2 * l2_bytes) // 2, calls=20
        )
    # the same copies by a Triton kernel: the floors take the faster of the two
    # (a memcpy need not reach what a kernel can, nor a kernel what a memcpy can)
    triton_copy, l2_triton_copy = None, None
    try:
        kernel = _triton_module(dry_run, "posenc_lab.triton_copy").triton_copy

        def copier(src: torch.Tensor, dst: torch.Tensor) -> None:  # in bfloat16, as timed
            kernel(src.view(torch.bfloat16), dst.view(torch.bfloat16))
    except ImportError:
        if not dry_run:
            raise
        copier = None
    if copier is not None:
        big, small = (1 << 20, 1 << 16) if dry_run else (1 << 30, l2_copy["bytes"])
        triton_copy = measure_copy_bandwidth(
            device, nbytes=big, repeats=3 if dry_run else 20, copier=copier
        )
        l2_triton_copy = measure_copy_bandwidth(
            device, nbytes=small, repeats=3 if dry_run else 20, calls=l2_copy["calls_per_sample"],
            copier=copier,
        )  # fmt: skip
    floor_rate = fastest_copy(copy, triton_copy)
    l2_floor_rate = fastest_copy(l2_copy, l2_triton_copy)
    record: dict[str, object] = {
        "meta": _meta(device, dry_run=dry_run, seed=seed, compile_backend=compile_backend),
        "copy_bandwidth": copy,
        "l2_copy_bandwidth": l2_copy,
        "triton_copy_bandwidth": triton_copy,
        "l2_triton_copy_bandwidth": l2_triton_copy,
        # the rates the predicted floors divide by: the faster copy of each
        "floor_rates": {"memory": floor_rate, "l2": l2_floor_rate},
        "cases": {},
    }
    record["meta"]["clocks_before"] = clock_state() if device.type == "cuda" else None
    chosen = build_cases(dry_run=dry_run, l2_bytes=l2_bytes)
    if cases is not None:
        unknown = set(cases) - {c.name for c in chosen}
        if unknown:
            raise SystemExit(f"unknown cases {sorted(unknown)}; known: {[c.name for c in chosen]}")
        chosen = [c for c in chosen if c.name in cases]
    for case in chosen:
        if log:
            log(f"timing {case.name} ...")
        record["cases"][case.name] = time_case(  # type: ignore[index]
            case,
            device,
            rounds=rounds,
            warmup=warmup,
            seed=seed,
            l2_bytes=l2_bytes,
            copy_gb_per_s=copy["gb_per_s"],  # type: ignore[arg-type]
            l2_copy_gb_per_s=l2_floor_rate["gb_per_s"],  # type: ignore[arg-type]
            floor_gb_per_s=floor_rate["gb_per_s"],  # type: ignore[arg-type]
            interpret=dry_run,
            compile_backend=compile_backend,
            only=contenders,
        )
    record["meta"]["clocks_after"] = clock_state() if device.type == "cuda" else None
    return record


def format_record(record: dict[str, object]) -> str:
    """The record as one plain-text table per case."""
    meta = record["meta"]
    copy = record["copy_bandwidth"]
    l2_copy = record["l2_copy_bandwidth"]
    tcopy, l2_tcopy = record.get("triton_copy_bandwidth"), record.get("l2_triton_copy_bandwidth")
    lines = [
        f"{meta['device_name']}: torch {meta['torch']}, triton {meta['triton']}, "
        f"driver {meta.get('driver')}; copy bandwidth {copy['gb_per_s']:.1f} GB/s "
        f"(within L2 {l2_copy['gb_per_s']:.1f} GB/s)"
        + (
            f", Triton copy {tcopy['gb_per_s']:.1f} GB/s (within L2 {l2_tcopy['gb_per_s']:.1f})"
            if tcopy and l2_tcopy
            else ""
        )
        + ("  [DRY RUN: nothing measured]" if meta["dry_run"] else ""),
    ]
    for name, case in record["cases"].items():
        lines += [
            "",
            f"[{name}] q {tuple(case['q_shape'])}, k {tuple(case['k_shape'])}, "
            f"{case['rounds']} rounds x {case['number']} calls, pool of {case['pool']}, "
            + (
                "warm (in L2)"
                if case["warm"]
                else "cold (L2 flushed before each sample); memory moves at least "
                f"{case['dram_bytes_per_call_at_least'] / 1e6:.4g} MB a call in the window"
            ),
            f"{'contender':46s} {'median us':>10s} {'q25-q75 us':>19s} {'GB/s':>8s} "
            f"{'of copy':>8s} {'x copy':>7s} {'x tcopy':>7s} {'host us':>8s}",
        ]
        p = case["predicted"]
        lines.insert(
            len(lines) - 1,
            f"predicted for the fused kernel: >= {p['lower_bound_us']:.3g} us a call "
            + ("at the assumed latencies " if case["warm"] else "")
            + (
                f"(memory {p['memory_us']:.3g} us at the faster {p['memory_source']} copy rate, "
                if p["memory_us"] is not None
                else "(no memory bound, "
            )
            + f"chain {p['chain_us']:.3g} us assumed), "
            f"{p['with_launch_us'][0]:.3g} to {p['with_launch_us'][1]:.3g} us with the "
            f"launch cost ({p['launches_per_call']} x {p['launch_us_each_assumed'][0]:.3g} "
            f"to {p['launch_us_each_assumed'][1]:.3g} us, assumed)",
        )
        for c in case["contenders"].values():
            late = (
                f" ({c['host_bound_samples']} host-bound, left out)"
                if c["host_bound_samples"]
                else ""
            )
            if c["median_us"] is None:
                lines.append(f"{c['label'][:46]:46s} every sample host-bound{late}")
                continue
            iqr = f"{c['q25_us']:.4g}-{c['q75_us']:.4g}"
            ratio = c["ratio_to_copy"]
            lines.append(
                f"{c['label'][:46]:46s} {c['median_us']:10.4g} {iqr:>19s} {c['gb_per_s']:8.4g} "
                f"{c['fraction_of_copy_bandwidth']:8.2f} "
                + (f"{ratio:7.2f} " if ratio is not None else f"{'-':>7s} ")
                + (
                    f"{c['ratio_to_triton_copy']:7.2f} "
                    if c.get("ratio_to_triton_copy") is not None
                    else f"{'-':>7s} "
                )
                + f"{c['host_median_us']:8.4g}{late}"
            )
        for name, one in case.get("single_launch", {}).items():
            hot, cold = (
                "-" if one[k] is None else f"{one[k]:.4g}" for k in ("hot_us", "cold_table_us")
            )
            lines.append(
                f"{'one launch alone: ' + name:46s} {hot:>10s} in L2, "
                f"{cold} with the table and positions in memory"
                + (f" ({one['host_bound']} host-bound, left out)" if one.get("host_bound") else "")
            )
        for name, why in case.get("absent", {}).items():
            lines.append(f"{'absent: ' + name:46s} {why}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m posenc_lab.gpu_bench [--dry-run] [--json PATH] ...``."""
    parser = argparse.ArgumentParser(
        prog="python -m posenc_lab.gpu_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", metavar="PATH", help="write the record as JSON to PATH")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="tiny shapes on the CPU, the kernel in Triton's interpreter: checks, measures nothing",
    )
    parser.add_argument("--rounds", type=int, help="rounds per case (default 30; 2 dry)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the inputs and the orders")
    parser.add_argument(
        "--cases", help="comma-separated case names to run (default: all), e.g. decode-1-bfloat16"
    )
    parser.add_argument(
        "--contenders", help="comma-separated contenders to time beside copy (default: all)"
    )
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be >= 1")
    record = run(
        dry_run=args.dry_run,
        rounds=args.rounds,
        seed=args.seed,
        log=lambda s: print(s, file=sys.stderr, flush=True),
        cases=args.cases.split(",") if args.cases else None,
        contenders=args.contenders.split(",") if args.contenders else None,
    )
    print(format_record(record))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
