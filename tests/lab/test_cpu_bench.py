"""posenc_lab.cpu_bench: the command runs and writes its record; its parts do what they claim.

Nothing here asserts a speed: timings depend on the machine and its load.
Page faults are counts, not timings, and are asserted where the operating
system makes them certain.
"""

from __future__ import annotations

import json
import mmap
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from posenc_lab.cpu_bench import (
    Case,
    build_cases,
    cpu_caches,
    hf_formula_out,
    main,
    page_faults,
    time_case,
)
from posenc_lab.references import hf_apply_rotary, hf_cos_sin
from posenc_lab.traffic import count_traffic

QUICK = {"prefill-float32", "decode-float32", "prefill-bfloat16", "decode-bfloat16"}
CONTENDERS = {
    "floor",
    "hf_formula",
    "hf_formula_out",
    "apply_rope",
    "apply_rope_interleaved",
    "rotary_embedding",
}
FIELDS = {
    "label",
    "median_ms",
    "q1_ms",
    "q3_ms",
    "min_ms",
    "ratio_to_floor",
    "speedup_vs_baseline",
    "gb_per_s",
    "faults_per_call_median",
    "faults_per_call_max",
    "samples_ms",
    "faults_per_call",
    "bytes_per_element",
    "ops_per_call",
    "views_per_call",
}


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    path = tmp_path_factory.mktemp("cpu") / "record.json"
    assert main(["--quick", "--seed", "7", "--json", str(path)]) == 0
    return json.loads(path.read_text(encoding="utf-8"))


def test_quick_run_records_the_machine(record):
    meta = record["meta"]
    assert meta["num_threads"] == torch.get_num_threads() and meta["seed"] == 7
    assert {"torch", "cpu", "cpu_capability", "libc", "loadavg_before", "loadavg_after"} <= set(
        meta
    )
    assert meta["caches"] == cpu_caches()  # read from the system, as the record says
    assert meta["malloc"]["mode"] == "pinned"
    if sys.platform == "linux" and "glibc" in meta["libc"]:
        assert meta["malloc"]["applied"] is True


def test_quick_run_records_every_contender(record):
    assert set(record["cases"]) == QUICK
    for name, case in record["cases"].items():
        expected = CONTENDERS | ({"complex"} if case["dtype"] == "float32" else set())
        assert set(case["contenders"]) == expected, name
        item = {"float32": 4, "bfloat16": 2}[case["dtype"]]
        assert case["floor_bytes_per_element"] == 2 * item
        assert case["bytes_moved"] == 2 * item * case["elements"]
        for c in case["contenders"].values():
            assert set(c) == FIELDS
            assert len(c["samples_ms"]) == len(c["faults_per_call"]) == case["rounds"] == 3
            assert c["q1_ms"] <= c["median_ms"] <= c["q3_ms"] and c["min_ms"] <= c["median_ms"]
            assert c["faults_per_call_max"] == max(c["faults_per_call"]) >= 0
        floor = case["contenders"]["floor"]
        assert floor["ratio_to_floor"] == 1.0 and floor["bytes_per_element"] == 2 * item
        assert case["contenders"]["hf_formula"]["speedup_vs_baseline"] == 1.0


def test_each_round_runs_the_contenders_in_a_seeded_random_order(record):
    for name, case in record["cases"].items():
        names = list(case["contenders"])
        rng = random.Random(f"7:{name}")
        assert case["orders"] == [rng.sample(names, len(names)) for _ in range(3)]
    every = [order for case in record["cases"].values() for order in case["orders"]]
    assert len({tuple(o) for o in every}) > 1


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--threads", "0"], ["--malloc", "tc"]])
def test_bad_arguments(argv):
    with pytest.raises(SystemExit):
        main(argv)


def test_the_compiled_module_is_checked_and_timed():
    # the eager backend of torch.compile: the path of --compile without inductor's codegen
    case = Case("tiny-float32", 1, 2, 1, 4, 8, "float32", 1, 2)
    result = time_case(case, compile_backend="eager")
    compiled = result["contenders"]["compiled_module"]
    assert len(compiled["samples_ms"]) == 2
    assert compiled["bytes_per_element"] is None  # compiled code is not traced for traffic


def test_full_cases():
    cases = {c.name: c for c in build_cases()}
    prefill, decode = cases["prefill-float32"], cases["decode-bfloat16"]
    assert (prefill.n_q, prefill.n_k, prefill.seq, prefill.head_dim) == (32, 8, 1024, 128)
    assert (decode.seq, decode.number, decode.rounds) == (1, 200, 40)
    q_bytes = prefill.batch * prefill.n_q * prefill.seq * prefill.head_dim * 4
    assert q_bytes == 16 << 20  # under glibc's largest mmap threshold, so pinning covers it


# ---------------------------------------------------------------------------
# The parts
# ---------------------------------------------------------------------------


def test_hf_formula_out_is_hugging_faces_arithmetic_in_fewer_bytes():
    b, h, s, d = 1, 4, 16, 32
    x = torch.randn(b, h, s, d)
    cos, sin = hf_cos_sin(torch.arange(s), d)
    out, tmp = torch.empty_like(x), torch.empty_like(x)
    assert torch.equal(hf_formula_out(x, cos, sin, out, tmp), hf_apply_rotary(x, cos, sin))
    n, table = x.numel(), cos.nbytes
    t = count_traffic(lambda: hf_formula_out(x, cos, sin, out, tmp))
    assert t.ops == ["mul", "neg", "copy_", "mul_", "add_"]
    # x*cos (4 + 4), -x2 (2 + 2), x1 (2 + 2), *sin in place (4 + 4), += (8 + 4)
    assert t.total == 36 * n + 2 * table
    assert count_traffic(lambda: hf_apply_rotary(x, cos, sin)).total == 40 * n + 2 * table


def test_page_faults_counts_the_pages_first_touched():
    pages = 256
    with mmap.mmap(-1, pages * mmap.PAGESIZE) as m:  # fresh anonymous pages
        before = page_faults()
        for p in range(pages):
            m[p * mmap.PAGESIZE] = 1
        assert page_faults() - before >= pages


_REUSE = """
from posenc_lab.references import hf_apply_rotary, hf_cos_sin
from posenc_lab.cpu_bench import page_faults, pin_malloc
import torch
print(pin_malloc()["applied"])
x = torch.randn(1, 32, 1024, 128)  # 16 MiB, and so is each temporary of the formula
cos, sin = hf_cos_sin(torch.arange(1024), 128)
counts = []
for _ in range(6):
    before = page_faults()
    hf_apply_rotary(x, cos, sin)
    counts.append(page_faults() - before)
print(counts)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")
def test_pinned_malloc_reuses_freed_pages():
    # Hugging Face's formula allocates five 16 MiB temporaries per call. With the
    # thresholds pinned, only the first call gets new memory; later calls reuse the freed
    # pages and fault at most a few times. (With glibc 2.36's defaults the same loop
    # faulted 0 to 14,304 times per call after the first, varying from run to run.)
    done = subprocess.run(
        [sys.executable, "-c", _REUSE], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    applied, counts = done.stdout.strip().splitlines()[-2:]
    if applied != "True":
        pytest.skip("the C library is not glibc")
    counts = json.loads(counts)
    pages = (16 << 20) // mmap.PAGESIZE
    assert counts[0] >= pages  # the first call: fresh pages
    assert all(c < pages // 100 for c in counts[2:]), counts


def test_cpu_caches_reads_sysfs(tmp_path: Path):
    for index, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (2, "Unified", "2048K"), (3, "Unified", "32M")]
    ):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in {
            "level": level,
            "type": kind,
            "size": size,
            "shared_cpu_list": "0-1",
            "coherency_line_size": 64,
        }.items():
            (folder / name).write_text(f"{value}\n", encoding="utf-8")
    found = cpu_caches(tmp_path)["sysfs"]
    assert [(c["level"], c["type"], c["size_bytes"]) for c in found] == [
        (1, "Data", 48 << 10),
        (2, "Unified", 2 << 20),
        (3, "Unified", 32 << 20),
    ]
    assert found[0]["line_bytes"] == 64 and found[0]["ways"] is None  # a missing file
    assert cpu_caches(tmp_path / "none")["sysfs"] == []
