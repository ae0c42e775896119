"""Benchmark RoPE on the CPU, queries and keys together: ``python -m posenc_lab.cpu_bench``.

It replaces an earlier harness whose faults ``lab/README.md`` lists; here
they are fixed:

- **Random order.** Each round times every contender once, in an order
  drawn for that round from a seeded generator (``--seed``); the orders are
  recorded, so what ran before a contender can be studied afterwards.
- **No fresh output pages.** Where an implementation can write into given
  memory (``out=``, in place), its outputs and temporaries are allocated
  once, before timing. For those that allocate (``apply_rope``, the
  module, Hugging Face's formula as written), glibc's allocator is pinned
  (``--malloc pinned``, the default: ``mallopt`` raises the mmap threshold
  to its maximum, 32 MiB on 64-bit, and the trim threshold to 1 GiB), so
  that a freed output goes back to the heap and the next one reuses its
  pages instead of asking the kernel for fresh zeroed ones. Page faults are
  counted around every sample (``resource.getrusage``: minor plus major,
  all threads of the process) and reported per call, so a contender that
  still faults is seen. ``--malloc default`` leaves glibc as it is, to
  show the difference.
- **q and k distinct**, with fewer key heads than query heads (the
  attention of Llama 3 8B: 32 query heads, 8 key heads of 128 features);
  every contender rotates both in one call, the module too.
- **bfloat16 beside float32**, for a prefill and for a decode step.
- **The machine's caches read, not assumed**: sizes, levels and sharing from
  ``/sys/devices/system/cpu/cpu0/cache`` and ``os.sysconf``, in the record.

Contenders: ``floor`` (``torch.mul(x, 2.0, out=...)`` on q and k: one
read and one write of each, the least an out-of-place rotation moves);
``hf_formula`` (``x * cos + rotate_half(x) * sin`` as Hugging Face writes
it, allocating), ``hf_formula_out`` (the same arithmetic, bit for bit,
into preallocated buffers: ``rotate_half``'s negation is written straight
into its buffer, so it counts 36 bytes per float32 element against 40),
``complex`` (Meta's Llama: complex multiplication of
the interleaved pairs, into a preallocated output; float32 only),
``apply_rope`` and ``apply_rope_interleaved`` (:func:`posenc.apply_rope` on
q, then on k), ``rotary_embedding`` (``RotaryEmbedding(128,
max_positions=n)(q, k, positions)``), and with ``--compile``
``compiled_module`` (that module under ``torch.compile``). Each is checked
against ``apply_rope`` before timing, and the bytes its ATen operations move
are counted (:func:`posenc_lab.traffic.count_traffic`).

Reported per contender: median and quartiles of the time per call, the
median of the per-round ratios to ``floor`` and to the baseline
(``hf_formula``), GB/s counting one read and one write of q and k, bytes
per element counted, the ATen operations per call that move data and those
that only make views (each a call into torch all the same), and page faults
per call. ``--quick`` is a smoke test on tiny shapes.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import os
import platform
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from posenc import RotaryEmbedding, apply_rope
from posenc_lab.references import rotate_half
from posenc_lab.traffic import count_traffic

__all__ = [
    "Case",
    "build_cases",
    "cpu_caches",
    "main",
    "page_faults",
    "pin_malloc",
    "run",
    "time_case",
]

#: glibc's mallopt parameters (malloc.h) and the values ``pin_malloc`` sets.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's upper bound on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD = 1 << 30
MAX_POSITIONS = 4096


# ---------------------------------------------------------------------------
# The machine: caches, allocator, page faults
# ---------------------------------------------------------------------------


def _parse_size(text: str) -> int:
    """``"48K"`` -> 49152; sysfs writes cache sizes with a K, M or G suffix, or none."""
    text = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def cpu_caches(root: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> dict[str, object]:
    """The caches of CPU 0 as the system reports them.

    Returns:
        dict[str, object]: ``sysfs``, one entry per cache (``level``,
        ``type``, ``size_bytes``, ``shared_cpu_list``, ``line_bytes``,
        ``ways``) read from ``root``, empty where there is none; and
        ``sysconf``, glibc's ``SC_LEVEL*_CACHE_SIZE`` values in bytes (a
        value may be missing or 0 where glibc does not know it).
    """
    found = []
    for index in sorted(Path(root).glob("index*")):

        def read(name: str, index: Path = index) -> str | None:
            try:
                return (index / name).read_text(encoding="utf-8").strip()
            except OSError:
                return None

        size, line, ways, level = read("size"), read("coherency_line_size"), None, read("level")
        ways = read("ways_of_associativity")
        found.append(
            {
                "level": int(level) if level else None,
                "type": read("type"),
                "size_bytes": _parse_size(size) if size else None,
                "shared_cpu_list": read("shared_cpu_list"),
                "line_bytes": int(line) if line else None,
                "ways": int(ways) if ways else None,
            }
        )
    sysconf = {}
    for name in (
        "SC_LEVEL1_DCACHE_SIZE",
        "SC_LEVEL2_CACHE_SIZE",
        "SC_LEVEL3_CACHE_SIZE",
        "SC_LEVEL4_CACHE_SIZE",
    ):
        try:
            sysconf[name] = os.sysconf(name)
        except (ValueError, OSError):
            continue
    return {"sysfs": found, "sysconf": sysconf}


def pin_malloc() -> dict[str, object]:
    """Pin glibc's mmap and trim thresholds, so that freed large blocks are reused.

    By default glibc serves a request of 128 KiB or more (a threshold that
    then moves with the sizes freed) with a fresh ``mmap``, whose pages the
    kernel zeroes on first touch (a page fault each), and returns freed
    memory at the top of the heap to the system. With the mmap threshold at
    its maximum and a trim threshold of 1 GiB, blocks up to 32 MiB come from
    the heap and stay there.

    Returns:
        dict[str, object]: what was set, and whether ``mallopt`` accepted it
        (``False`` where the C library is not glibc).
    """
    path = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(path)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return {"mode": "pinned", "applied": False, "reason": "no mallopt in the C library"}
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mmap_ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) == 1
    trim_ok = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    return {
        "mode": "pinned",
        "applied": mmap_ok and trim_ok,
        "mmap_threshold": MMAP_THRESHOLD_MAX,
        "trim_threshold": TRIM_THRESHOLD,
    }


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


def page_faults() -> int:
    """Page faults of this process so far (minor + major, all threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


# ---------------------------------------------------------------------------
# Cases and contenders
# ---------------------------------------------------------------------------


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
    rounds: int

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def elements(self) -> int:
        """Elements of ``q`` and ``k`` together."""
        return self.batch * (self.n_q + self.n_k) * self.seq * self.head_dim


def build_cases(*, quick: bool = False, rounds: int | None = None) -> list[Case]:
    """Prefill and decode step, float32 and bfloat16."""
    cases = []
    for dtype in ("float32", "bfloat16"):
        if quick:
            shapes = [("prefill", 1, 4, 2, 16, 16, 1, 3), ("decode", 1, 4, 2, 1, 16, 2, 3)]
        else:
            # q (1, 32, 1024, 128) is 16 MiB in float32: below glibc's largest mmap threshold
            shapes = [
                ("prefill", 1, 32, 8, 1024, 128, 1, 40),
                ("decode", 1, 32, 8, 1, 128, 200, 40),
            ]
        for name, b, n_q, n_k, s, d, number, r in shapes:
            cases.append(Case(f"{name}-{dtype}", b, n_q, n_k, s, d, dtype, number, rounds or r))
    return cases


def hf_formula_out(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor, tmp: torch.Tensor
) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin`` as Hugging Face computes it, into ``out``.

    The same products and sum, so the same bits; ``tmp`` (``x``'s shape and
    dtype) holds ``rotate_half(x) * sin``, the negated half written into it
    directly instead of through a concatenation.
    """
    h = x.shape[-1] // 2
    torch.mul(x, cos, out=out)  # x * cos
    torch.neg(x[..., h:], out=tmp[..., :h])  # rotate_half: [-x2, x1]
    tmp[..., h:].copy_(x[..., :h])
    tmp.mul_(sin)  # rotate_half(x) * sin
    return out.add_(tmp)


def _close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    # contenders round differently (a fused multiply-add here and there): allow a few
    # units in the last place of float32; in bfloat16 Hugging Face's formula also
    # rounds cos, sin and each product to the input's dtype
    tol = {torch.bfloat16: 3e-2, torch.float16: 4e-3}.get(expected.dtype, 1e-5)
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


@dataclass
class _Contender:
    name: str
    label: str
    fn: Callable[[], object]
    traffic: bool = True


def _contenders(case: Case, *, compile_backend: str | None) -> tuple[list[_Contender], Callable]:
    """The contenders of ``case`` and a check that they agree with ``apply_rope``."""
    g = torch.Generator().manual_seed(0)
    dtype = case.torch_dtype
    q = torch.randn(case.batch, case.n_q, case.seq, case.head_dim, generator=g).to(dtype)
    k = torch.randn(case.batch, case.n_k, case.seq, case.head_dim, generator=g).to(dtype)
    if case.seq > 1:
        positions = torch.arange(case.seq)
    else:
        positions = torch.tensor([1000])
    d = case.head_dim
    module = RotaryEmbedding(d, max_positions=MAX_POSITIONS)
    inv_freq = module.inv_freq
    angles = positions[:, None].float() * inv_freq  # (s, d/2)
    hf_cos = torch.cat((angles, angles), dim=-1).cos().to(dtype)  # (s, d), as HF casts them
    hf_sin = torch.cat((angles, angles), dim=-1).sin().to(dtype)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)  # (s, d/2) complex64
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    q_tmp, k_tmp = torch.empty_like(q), torch.empty_like(k)

    def floor() -> None:
        torch.mul(q, 2.0, out=q_out)
        torch.mul(k, 2.0, out=k_out)

    def hf_formula() -> tuple[torch.Tensor, torch.Tensor]:
        return q * hf_cos + rotate_half(q) * hf_sin, k * hf_cos + rotate_half(k) * hf_sin

    def hf_out() -> None:
        hf_formula_out(q, hf_cos, hf_sin, q_out, q_tmp)
        hf_formula_out(k, hf_cos, hf_sin, k_out, k_tmp)

    def pairs(x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_complex(x.view(*x.shape[:-1], d // 2, 2))

    def complex_mul() -> None:
        torch.mul(pairs(q), freqs_cis, out=pairs(q_out))
        torch.mul(pairs(k), freqs_cis, out=pairs(k_out))

    contenders = [
        _Contender("floor", "floor: torch.mul(x, 2.0, out=) on q and k", floor),
        _Contender("hf_formula", "HF x*cos + rotate_half(x)*sin (allocates)", hf_formula),
        _Contender("hf_formula_out", "HF formula into preallocated buffers", hf_out),
    ]
    if dtype == torch.float32:  # complex32 multiplication is not there for bfloat16
        contenders.append(_Contender("complex", "complex multiply (Meta Llama), out=", complex_mul))
    contenders += [
        _Contender(
            "apply_rope",
            "posenc.apply_rope on q, then k",
            lambda: (apply_rope(q, positions), apply_rope(k, positions)),
        ),
        _Contender(
            "apply_rope_interleaved",
            "posenc.apply_rope interleaved",
            lambda: (
                apply_rope(q, positions, layout="interleaved"),
                apply_rope(k, positions, layout="interleaved"),
            ),
        ),
        _Contender(
            "rotary_embedding",
            "posenc.RotaryEmbedding(max_positions)(q, k)",
            lambda: module(q, k, positions),
        ),
    ]
    if compile_backend is not None:
        compiled = torch.compile(module, fullgraph=True, dynamic=False, backend=compile_backend)
        contenders.append(
            _Contender(
                "compiled_module",
                "torch.compile(RotaryEmbedding(max_positions))",
                lambda: compiled(q, k, positions),
                traffic=False,
            )
        )

    def check() -> None:
        expected = (apply_rope(q, positions), apply_rope(k, positions))
        by_name = {c.name: c for c in contenders}
        for name in ("hf_formula", "rotary_embedding", "compiled_module"):
            if name in by_name:
                for actual, wanted in zip(by_name[name].fn(), expected, strict=True):  # type: ignore[call-overload]
                    _close(actual, wanted)
        hf_out()
        _close(q_out, expected[0])
        _close(k_out, expected[1])
        if "complex" in by_name:  # Meta's pairs are apply_rope's interleaved layout
            complex_mul()
            _close(q_out, apply_rope(q, positions, layout="interleaved"))
            _close(k_out, apply_rope(k, positions, layout="interleaved"))
        floor()
        assert torch.equal(q_out, q * 2) and torch.equal(k_out, k * 2)

    return contenders, check


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def time_contenders(
    contenders: Sequence[_Contender], *, rounds: int, warmup: int, number: int, seed: str
) -> tuple[dict[str, list[float]], dict[str, list[float]], list[list[str]]]:
    """Seconds and page faults per call of each contender, one sample per round; the orders.

    Each round times every contender once (``number`` calls in a row), in an
    order drawn from ``random.Random(seed)``. The garbage collector is off
    while timing, as in :mod:`timeit`; the fault counter is read outside the
    timed interval.
    """
    for _ in range(warmup):
        for c in contenders:
            c.fn()
    rng = random.Random(seed)
    times: dict[str, list[float]] = {c.name: [] for c in contenders}
    faults: dict[str, list[float]] = {c.name: [] for c in contenders}
    orders = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            order = rng.sample(list(contenders), len(contenders))
            orders.append([c.name for c in order])
            for c in order:
                fn = c.fn
                before = page_faults()
                start = time.perf_counter()
                for _ in range(number):
                    fn()
                elapsed = time.perf_counter() - start
                after = page_faults()
                times[c.name].append(elapsed / number)
                faults[c.name].append((after - before) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return times, faults, orders


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def time_case(
    case: Case, *, seed: int = 0, compile_backend: str | None = None
) -> dict[str, object]:
    """Check and time the contenders of ``case``; its record.

    ``compile_backend`` adds the compiled module, compiled by that backend
    of ``torch.compile`` (``"inductor"``, or ``"eager"`` to test the path).
    """
    contenders, check = _contenders(case, compile_backend=compile_backend)
    check()
    with torch.no_grad():  # inference, as a decode loop runs it
        times, faults, orders = time_contenders(
            contenders, rounds=case.rounds, warmup=3, number=case.number, seed=f"{seed}:{case.name}"
        )
    itemsize = case.torch_dtype.itemsize
    bytes_moved = 2 * case.elements() * itemsize  # one read and one write of q and k
    floor, base = times["floor"], times["hf_formula"]
    result: dict[str, object] = {
        "name": case.name,
        "dtype": case.dtype,
        "q_shape": [case.batch, case.n_q, case.seq, case.head_dim],
        "k_shape": [case.batch, case.n_k, case.seq, case.head_dim],
        "elements": case.elements(),
        "bytes_moved": bytes_moved,
        "floor_bytes_per_element": 2 * itemsize,
        "rounds": case.rounds,
        "number": case.number,
        "orders": orders,
        "contenders": {},
    }
    for c in contenders:
        s, f = times[c.name], faults[c.name]
        median = statistics.median(s)
        q1, q3 = _quartiles(s)
        entry = {
            "label": c.label,
            "median_ms": median * 1e3,
            "q1_ms": q1 * 1e3,
            "q3_ms": q3 * 1e3,
            "min_ms": min(s) * 1e3,
            "ratio_to_floor": statistics.median(t / b for t, b in zip(s, floor, strict=True)),
            "speedup_vs_baseline": statistics.median(b / t for b, t in zip(base, s, strict=True)),
            "gb_per_s": bytes_moved / median / 1e9,
            "faults_per_call_median": statistics.median(f),
            "faults_per_call_max": max(f),
            "samples_ms": [t * 1e3 for t in s],
            "faults_per_call": f,
            "bytes_per_element": None,
            "ops_per_call": None,
            "views_per_call": None,
        }
        if c.traffic:
            with torch.no_grad():
                traffic = count_traffic(c.fn)
            entry["bytes_per_element"] = traffic.total / case.elements()
            entry["ops_per_call"] = len(traffic.ops)
            entry["views_per_call"] = traffic.views
        result["contenders"][c.name] = entry  # type: ignore[index]
    return result


def run(
    cases: Sequence[Case],
    *,
    malloc: str = "pinned",
    seed: int = 0,
    compile_backend: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, object]:
    """Pin the allocator (or not), then check and time every case; the record."""
    allocator = pin_malloc() if malloc == "pinned" else {"mode": "default", "applied": False}
    meta = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libc": " ".join(platform.libc_ver()),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "caches": cpu_caches(),
        "malloc": allocator,
        "seed": seed,
        "compile_backend": compile_backend,
        "loadavg_before": _loadavg(),
    }
    record: dict[str, object] = {"meta": meta, "cases": {}}
    for case in cases:
        if log:
            log(f"timing {case.name} ...")
        record["cases"][case.name] = time_case(case, seed=seed, compile_backend=compile_backend)  # type: ignore[index]
    meta["loadavg_after"] = _loadavg()
    return record


def format_record(record: dict[str, object]) -> str:
    """The record as one plain-text table per case."""
    meta = record["meta"]
    caches = ", ".join(
        f"L{c['level']} {c['type']} {c['size_bytes'] // 1024} KiB (CPUs {c['shared_cpu_list']})"
        for c in meta["caches"]["sysfs"]
        if c["size_bytes"]
    )
    lines = [
        f"torch {meta['torch']} on {meta['cpu']} ({meta['cpu_capability']}), {meta['cpu_count']} "
        f"CPUs, {meta['num_threads']} threads; caches: {caches or 'not reported'}",
        f"malloc: {meta['malloc']}; load average before {meta['loadavg_before']}, after "
        f"{meta['loadavg_after']}",
        "median over rounds; ratios are medians of per-round ratios; GB/s counts one read and "
        "one write of q and k; faults: page faults per call (median, max over rounds)",
    ]
    for name, case in record["cases"].items():
        lines += [
            "",
            f"[{name}] q {tuple(case['q_shape'])}, k {tuple(case['k_shape'])}, "
            f"{case['rounds']} rounds x {case['number']} calls",
            f"{'contender':44s} {'median ms':>10s} {'IQR ms':>17s} {'x floor':>8s} "
            f"{'vs HF':>6s} {'GB/s':>7s} {'B/elem':>7s} {'faults':>11s}",
        ]
        for c in case["contenders"].values():
            bpe = "" if c["bytes_per_element"] is None else f"{c['bytes_per_element']:.1f}"
            iqr = f"{c['q1_ms']:.4g}-{c['q3_ms']:.4g}"
            flt = f"{c['faults_per_call_median']:g}/{c['faults_per_call_max']:g}"
            lines.append(
                f"{c['label'][:44]:44s} {c['median_ms']:10.4g} {iqr:>17s} "
                f"{c['ratio_to_floor']:8.2f} {c['speedup_vs_baseline']:6.2f} "
                f"{c['gb_per_s']:7.2f} {bpe:>7s} {flt:>11s}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m posenc_lab.cpu_bench [--quick] [--json PATH] ...``."""
    parser = argparse.ArgumentParser(
        prog="python -m posenc_lab.cpu_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny shapes, 3 rounds (a smoke test)")
    parser.add_argument("--json", metavar="PATH", help="also write the record as JSON to PATH")
    parser.add_argument("--rounds", type=int, help="rounds per case (default 40)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads(N) before timing")
    parser.add_argument("--seed", type=int, default=0, help="seeds the orders of the rounds")
    parser.add_argument(
        "--malloc",
        choices=("pinned", "default"),
        default="pinned",
        help="pin glibc's mmap and trim thresholds (default), or leave them as they are",
    )
    parser.add_argument(
        "--compile", action="store_true", help="add the compiled module (compiles first)"
    )
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be >= 1")
        torch.set_num_threads(args.threads)
    record = run(
        build_cases(quick=args.quick, rounds=args.rounds),
        malloc=args.malloc,
        seed=args.seed,
        compile_backend="inductor" if args.compile else None,
        log=lambda s: print(s, file=sys.stderr, flush=True),
    )
    print(format_record(record))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
