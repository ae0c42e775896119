"""posenc_lab.gpu_bench: its dry run on the CPU goes through every step and writes the record.

No GPU here: ``--dry-run`` runs the same code with tiny shapes on the CPU
(the Triton kernel in Triton's interpreter, ``torch.compile`` with its
``eager`` backend). Nothing asserts a speed.
"""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess

import pytest
import torch

import posenc_lab.gpu_bench as gpu_bench
from posenc import apply_rope
from posenc_lab.gpu_bench import Case, build_cases, main, time_case

HAS_TRITON = importlib.util.find_spec("triton") is not None
CONTENDERS = {"copy", "eager_formula", "apply_rope", "compiled_module"} | (
    {"triton", "triton_inplace", "triton_graph"} if HAS_TRITON else set()
)
QUANTILE_FIELDS = ("q10_us", "q25_us", "median_us", "q75_us", "q90_us")


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "record.json"
    assert main(["--dry-run", "--json", str(path)]) == 0
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_dry_run_writes_a_record_that_says_so(record):
    meta = record["meta"]
    assert meta["dry_run"] is True and meta["device"] == "cpu"
    assert meta["compile_backend"] == "eager"
    assert {"torch", "triton", "cuda_runtime", "python", "platform", "seed"} <= set(meta)
    assert meta["torch"] == torch.__version__
    copy = record["copy_bandwidth"]
    assert copy["bytes_moved"] == 2 * copy["bytes"] and copy["gb_per_s"] > 0


def test_every_case_and_contender_is_recorded(record):
    cases = {c.name: c for c in build_cases(dry_run=True)}
    assert (
        set(record["cases"])
        == set(cases)
        == {
            "prefill-bfloat16",
            "decode_batched-bfloat16",
            "prefill-float32",
            "decode_batched-float32",
        }
    )
    copy_rate = record["copy_bandwidth"]["gb_per_s"]
    for name, case in record["cases"].items():
        spec = cases[name]
        assert case["q_shape"] == [spec.batch, spec.n_q, spec.seq, spec.head_dim]
        assert case["k_shape"] == [spec.batch, spec.n_k, spec.seq, spec.head_dim]
        item = {"bfloat16": 2, "float32": 4}[case["dtype"]]
        elements = spec.batch * (spec.n_q + spec.n_k) * spec.seq * spec.head_dim
        assert case["bytes_per_call"] == 2 * item * elements  # one read and one write of q, k
        assert set(case["contenders"]) == CONTENDERS
        for c in case["contenders"].values():
            assert len(c["samples_us"]) == case["rounds"] == 2
            assert [c[f] for f in QUANTILE_FIELDS] == sorted(c[f] for f in QUANTILE_FIELDS)
            assert c["gb_per_s"] == pytest.approx(case["bytes_per_call"] / c["median_us"] / 1e3)
            assert c["fraction_of_copy_bandwidth"] == pytest.approx(c["gb_per_s"] / copy_rate)
        assert case["contenders"]["copy"]["ratio_to_copy"] == 1.0


def test_each_round_runs_the_contenders_in_a_seeded_random_order(record):
    for name, case in record["cases"].items():
        names = list(case["contenders"])
        rng = random.Random(f"0:{name}")
        expected = [rng.sample(names, len(names)) for _ in range(case["rounds"])]
        assert case["orders"] == expected
        assert all(sorted(order) == sorted(names) for order in case["orders"])
    orders = [tuple(map(tuple, c["orders"])) for c in record["cases"].values()]
    assert len(set(orders)) > 1  # the cases do not share one sequence of orders


def test_a_contender_that_disagrees_with_apply_rope_stops_the_run(monkeypatch):
    monkeypatch.setattr(gpu_bench, "rotate_half", lambda x: x)  # a wrong eager formula
    case = Case("tiny", 1, 2, 1, 4, 8, "float32", 1)
    with pytest.raises(AssertionError, match="eager_formula"):
        time_case(
            case,
            torch.device("cpu"),
            rounds=1,
            warmup=0,
            seed=0,
            l2_bytes=0,
            copy_gb_per_s=1.0,
            interpret=True,
            compile_backend=None,
        )


def test_without_a_gpu_the_real_run_refuses(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="--dry-run"):
        main([])


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--bogus"]])
def test_bad_arguments(argv):
    with pytest.raises(SystemExit):
        main(argv)


def test_the_host_time_is_recorded_beside_the_device_time(record):
    for case in record["cases"].values():
        for c in case["contenders"].values():
            assert c["queue_ahead_us"] == 0.0  # nothing to queue behind on the CPU
            assert c["host_median_us"] > 0
            assert c["host_bound_samples"] == 0
    assert record["meta"]["clocks_before"] is None and record["meta"]["clocks_after"] is None
    # eager apply_rope's blocks, and so its launches, depend on the host's threads
    assert record["meta"]["torch_num_threads"] == torch.get_num_threads()


def test_the_queued_work_is_calibrated_from_each_contenders_warm_up():
    # twice the slowest warm-up sample after the first (which compiles), within bounds
    assert gpu_bench.queue_ahead_s([2.0, 300e-6, 400e-6, 350e-6]) == pytest.approx(800e-6)
    assert gpu_bench.queue_ahead_s([1e-6, 2e-6]) == gpu_bench.QUEUE_MIN_S
    assert gpu_bench.queue_ahead_s([5.0, 3.0]) == gpu_bench.QUEUE_MAX_S
    assert gpu_bench.queue_ahead_s([100e-6]) == pytest.approx(200e-6)  # one sample: itself


@pytest.mark.skipif(not HAS_TRITON, reason="the graph contender replays the Triton kernel")
def test_the_graph_contender_is_checked_and_recorded(record):
    for case in record["cases"].values():
        label = case["contenders"]["triton_graph"]["label"]
        assert "CUDA graph" in label


def test_prefills_are_cold_and_decode_pools_stay_in_l2():
    l2 = 50 * 2**20
    cases = {c.name: c for c in build_cases()}
    assert all(c.warm == c.name.startswith("decode") for c in cases.values())
    assert all(c.number == 1 for c in cases.values() if not c.warm)  # one call, flushed
    # decode: 10 KiB a pair in bfloat16, 100 pairs (one sample's calls) in 1 MiB
    decode = cases["decode-bfloat16"]
    assert gpu_bench.pool_size(decode, l2) == decode.number == 100
    # batched decode: 640 KiB a pair, as many as fill a quarter of L2
    batched = cases["decode_batched-bfloat16"]
    n = gpu_bench.pool_size(batched, l2)
    pair = 64 * 10 * 2**10
    assert n * pair <= l2 // 4 < (n + 1) * pair and n == 20
    assert gpu_bench.pool_size(cases["prefill-bfloat16"], l2) == 2
    assert gpu_bench.pool_size(decode, 0) == 1
    assert gpu_bench.sample_starts(20, 100) == [0]  # every sample starts at pair 0
    assert gpu_bench.sample_starts(2, 1) == [0, 1]


@pytest.mark.parametrize("warm", [False, True])
def test_l2_is_flushed_before_every_cold_sample_only(monkeypatch, warm):
    flushes = []
    monkeypatch.setattr(gpu_bench._L2Flush, "__call__", lambda self: flushes.append(self))
    case = Case("tiny", 1, 2, 1, 4, 8, "float32", 1, warm)
    found = time_case(
        case,
        torch.device("cpu"),
        rounds=3,
        warmup=1,
        seed=0,
        l2_bytes=4096,
        copy_gb_per_s=1.0,
        interpret=True,
        compile_backend=None,
    )
    n = len(found["contenders"])
    assert len(flushes) == (0 if warm else 3 * n)  # before each timed sample
    assert found["l2_flushed_bytes"] == (0 if warm else gpu_bench.FLUSH_TIMES_L2 * 4096)
    if not warm:
        assert flushes[0].buffer.numel() == gpu_bench.FLUSH_TIMES_L2 * 4096


def test_copy_is_one_launch_over_q_and_k():
    # each pair of the pool is one buffer with q then k: the floor copies it in one ATen
    # operation (one kernel on a GPU, as the fused kernel is one), into one output that
    # every call reuses, as the out-of-place contenders write into the block just freed
    from posenc_lab.traffic import count_traffic

    case = build_cases(dry_run=True)[0]
    inputs = gpu_bench._inputs(case, torch.device("cpu"), 0, seed=0)
    contenders = gpu_bench._contenders(case, inputs, interpret=True, compile_backend=None)
    copy = contenders["copy"][1]
    assert len(inputs.pool) == 2
    for i in (0, 1, 0):
        q, k = inputs.pool[i]
        assert q.untyped_storage().data_ptr() == k.untyped_storage().data_ptr()
        moved = count_traffic(lambda i=i: copy(i))
        assert moved.ops == ["copy_"]
        assert moved.total == 2 * (q.nbytes + k.nbytes)
        assert torch.equal(inputs.output, torch.cat((q.flatten(), k.flatten())))


def test_a_graph_sample_rotates_the_pairs_a_sample_of_calls_would():
    # on the CPU there is no graph: the replay object makes the calls it would have captured
    seen = []
    replay = gpu_bench._GraphReplay(seen.append, torch.device("cpu"), 6, 4)
    replay.sample(4)
    assert seen == [4, 5, 0, 1]


def test_clock_state_reads_nvidia_smi(monkeypatch):
    answer = "1980, 2619, 1980, 2619, 1980, 0x0000000000000000, 41, 120.5 W\n"

    def fake_run(args, **kwargs):
        assert args[1] == "--query-gpu=" + ",".join(gpu_bench.CLOCK_FIELDS)
        return subprocess.CompletedProcess(args, 0, stdout=answer, stderr="")

    monkeypatch.setattr(gpu_bench.subprocess, "run", fake_run)
    state = gpu_bench.clock_state()
    assert state["clocks.sm"] == "1980" and state["power.draw"] == "120.5 W"
    assert list(state) == list(gpu_bench.CLOCK_FIELDS)


def test_clock_state_is_none_without_nvidia_smi(monkeypatch):
    def missing(args, **kwargs):
        raise FileNotFoundError(args[0])

    monkeypatch.setattr(gpu_bench.subprocess, "run", missing)
    assert gpu_bench.clock_state() is None


@pytest.mark.skipif(not HAS_TRITON, reason="the fused kernel runs in Triton's interpreter")
def test_the_fused_kernel_is_held_to_one_bfloat16_ulp_of_apply_rope():
    # at Llama 3 8B's heads (blocks of 32 and 8 heads), in Triton's interpreter: the
    # kernel passes the check; an answer two ulps off fails it, though it would pass the
    # looser bound of the eager formula (which rounds every product to bfloat16)
    case = Case("llama-heads", 1, 32, 8, 3, 128, "bfloat16", 1)
    inputs = gpu_bench._inputs(case, torch.device("cpu"), 0, seed=0)
    contenders = gpu_bench._contenders(case, inputs, interpret=True, compile_backend=None)
    gpu_bench._check(case, inputs, contenders)
    q, k = inputs.pool[0]
    p = inputs.positions[:, None, :]
    two_ulps = tuple(apply_rope(x, p) * (1 + 2**-6) for x in (q, k))  # eps = 2**-7
    with pytest.raises(AssertionError, match="triton"):
        gpu_bench._check(case, inputs, {"triton": ("two ulps off", lambda i: two_ulps)})
    gpu_bench._check(case, inputs, {"eager_formula": ("two ulps off", lambda i: two_ulps)})
