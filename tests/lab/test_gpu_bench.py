"""posenc_lab.gpu_bench: its dry run on the CPU goes through every step and writes the record.

No GPU here: ``--dry-run`` runs the same code with tiny shapes on the CPU
(the Triton kernel in Triton's interpreter, ``torch.compile`` with its
``eager`` backend). Nothing asserts a speed.
"""

from __future__ import annotations

import importlib.util
import json
import random
import statistics
import subprocess
import sys
import weakref

import pytest
import torch

import posenc_lab.gpu_bench as gpu_bench
from posenc import apply_rope
from posenc_lab.gpu_bench import Case, build_cases, main, time_case


def _time_on_cpu(case, rounds=1, warmup=1, l2_bytes=0):
    """time_case on the CPU, the fused kernel under Triton's interpreter."""
    return time_case(case, torch.device("cpu"), rounds=rounds, warmup=warmup, seed=0,
                     l2_bytes=l2_bytes, copy_gb_per_s=1.0, interpret=True,
                     compile_backend=None)  # fmt: skip


HAS_TRITON = importlib.util.find_spec("triton") is not None
CONTENDERS = {"copy", "eager_formula", "eager_graph", "apply_rope", "compiled_module"} | (
    {"triton", "triton_inplace", "triton_graph", "triton_copy"} if HAS_TRITON else set()
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
            "prefill-8-bfloat16",
            "decode-3-bfloat16",
            "prefill-8-float32",
            "decode-3-float32",
        }
    )
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
            rates = record["floor_rates"]
            where = rates["l2" if case["warm"] else "memory"]["gb_per_s"]
            assert c["fraction_of_copy_bandwidth"] == pytest.approx(c["gb_per_s"] / where)
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
        _time_on_cpu(case, warmup=0)


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
    # recorded for comparison with the CPU records (apply_rope blocks on the CPU only)
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


def test_the_token_sweep_is_warm_decode_then_cold_prefill():
    l2 = 50 * 2**20
    cases = {c.name: c for c in build_cases(l2_bytes=l2)}
    tokens = (1, 8, 64, 256, 1024, 4096, 32768)
    assert set(cases) == {
        f"{'decode' if t <= 256 else 'prefill'}-{t}-{d}"
        for t in tokens
        for d in ("bfloat16", "float32")
    }
    for c in cases.values():
        assert c.tokens() == int(c.name.split("-")[1])
        assert c.warm == (c.seq == 1) == c.name.startswith("decode")
        assert (c.n_q, c.n_k, c.head_dim) == (32, 8, 128)
    assert gpu_bench.MAX_POSITIONS == 32768  # the longest prefill's positions are in the table
    # decode: 10 KiB a pair in bfloat16, 100 pairs (one sample's calls) in 1 MiB
    decode = cases["decode-1-bfloat16"]
    assert gpu_bench.pool_size(decode, l2) == decode.number == 100
    # 64 sequences: 640 KiB a pair, as many as fill a quarter of L2
    batched = cases["decode-64-bfloat16"]
    n = gpu_bench.pool_size(batched, l2)
    pair = 64 * 10 * 2**10
    assert n * pair <= l2 // 4 < (n + 1) * pair and n == 20
    assert gpu_bench.pool_size(decode, 0) == 1
    assert gpu_bench.sample_starts(20, 100) == [0]  # every sample starts at pair 0
    assert gpu_bench.sample_starts(2, 1) == [0, 1]


def test_a_cold_sample_moves_at_least_eight_l2s_over_distinct_pairs():
    # L2 is write-back: up to its size of a sample's writes may still be in it at the end
    # event. A cold sample's calls rotate distinct pairs moving >= 8 L2 together, so the
    # bytes memory must move inside the window are within an eighth of the model's
    l2 = 50 * 2**20
    cases = {c.name: c for c in build_cases(l2_bytes=l2)}
    prefill = cases["prefill-4096-bfloat16"]  # 84 MB a call: 5 calls
    assert prefill.bytes_per_call() == 2 * 2 * 40 * 128 * 4096
    assert prefill.number == 5 and gpu_bench.pool_size(prefill, l2) == 5
    assert cases["prefill-1024-bfloat16"].number == 20
    assert cases["prefill-32768-float32"].number == 1  # one call is 27 L2s
    for c in cases.values():
        if not c.warm:
            assert c.number * c.bytes_per_call() >= gpu_bench.COLD_TIMES_L2 * l2
            assert (c.number - 1) * c.bytes_per_call() < gpu_bench.COLD_TIMES_L2 * l2 or (
                c.number == 1
            )
            at_least = gpu_bench.dram_bytes_at_least(c, l2)
            assert at_least == c.bytes_per_call() - l2 / c.number
            assert at_least >= (1 - 1 / gpu_bench.COLD_TIMES_L2) * c.bytes_per_call()
    assert build_cases(l2_bytes=0)[-1].number == 1  # without an L2 size: one call


@pytest.mark.parametrize("warm", [False, True])
def test_a_cold_sample_holds_every_output_and_a_warm_one_drops_them(monkeypatch, warm):
    # cold: each call of a sample writes new memory (its output held to the sample's end),
    # so no call overwrites lines the one before left dirty in L2; warm: dropped at once
    made, seen = [], []

    class Output:
        pass

    def make(i):
        seen.append(sum(r() is not None for r in made))  # earlier outputs still held
        out = Output()
        made.append(weakref.ref(out))
        return out

    fake = {"copy": ("c", lambda i: None), "fake": ("f", make)}
    monkeypatch.setattr(gpu_bench, "_contenders", lambda *a, **k: fake)
    monkeypatch.setattr(gpu_bench, "_check", lambda *a: None)
    case = Case("tiny", 1, 2, 1, 4, 8, "float32", 3, warm)
    _time_on_cpu(case)
    # one call counts the launches (its output dropped), then warm-up, then timed
    assert seen == [0] + ([0, 0, 0] if warm else [0, 1, 2]) * 2, seen
    assert all(r() is None for r in made)


@pytest.mark.parametrize("warm", [False, True])
def test_l2_is_flushed_before_every_cold_sample_only(monkeypatch, warm):
    flushes = []
    monkeypatch.setattr(gpu_bench._L2Flush, "__call__", lambda self: flushes.append(self))
    case = Case("tiny", 1, 2, 1, 4, 8, "float32", 1, warm)
    found = _time_on_cpu(case, rounds=3, l2_bytes=4096)
    n = len(found["contenders"])
    if warm:  # no timed sample is flushed: only the single launches' cold-table repeats
        assert len(flushes) == 3 * len(found["single_launch"])
    else:
        assert len(flushes) == 3 * n  # before each timed sample
    assert found["l2_flushed_bytes"] == (0 if warm else gpu_bench.FLUSH_TIMES_L2 * 4096)
    if not warm:
        assert flushes[0].buffer.numel() == gpu_bench.FLUSH_TIMES_L2 * 4096


def test_copy_is_one_launch_over_q_and_k():
    # each pair of the pool is one buffer with q then k: the floor copies it in one ATen
    # operation (one kernel on a GPU, as the fused kernel is one), into one output that
    # every call reuses, as the out-of-place contenders write into the block just freed
    from posenc_lab.traffic import count_traffic

    case = build_cases(dry_run=True)[0]  # cold: one output per pair
    assert not case.warm
    inputs = gpu_bench._inputs(case, torch.device("cpu"), 0, seed=0)
    contenders = gpu_bench._contenders(case, inputs, interpret=True, compile_backend=None)
    copy = contenders["copy"][1]
    assert len(inputs.pool) == len(inputs.outputs) == case.number == 2
    for i in (0, 1, 0):
        q, k = inputs.pool[i]
        assert q.untyped_storage().data_ptr() == k.untyped_storage().data_ptr()
        # (b, s, n, d) in memory, as the projection writes it; (b, n, s, d) views
        assert q.transpose(1, 2).is_contiguous() and not q.is_contiguous()
        moved = count_traffic(lambda i=i: copy(i))
        assert moved.ops == ["copy_"]
        assert moved.total == 2 * (q.nbytes + k.nbytes)
        flat = torch.cat((q.transpose(1, 2).flatten(), k.transpose(1, 2).flatten()))
        assert torch.equal(inputs.outputs[i], flat)
    warm = build_cases(dry_run=True)[1]
    assert warm.warm and len(gpu_bench._inputs(warm, torch.device("cpu"), 0, 0).outputs) == 1


def test_a_graph_sample_rotates_the_pairs_a_sample_of_calls_would():
    # on the CPU there is no graph: the replay object makes the calls it would have captured
    seen = []
    replay = gpu_bench._GraphReplay(seen.append, torch.device("cpu"), 6, 4)
    replay.sample(4)
    assert seen == [4, 5, 0, 1]


@pytest.mark.parametrize("keep", [False, True])
def test_a_captured_warm_sample_writes_two_outputs_and_a_cold_one_every(keep):
    # what a graph captures: a warm sample (keep=False) drops each output before the
    # next call, so the allocator hands the call the block just freed (the sample stays
    # in L2); a cold one holds every output, so each call writes memory of its own
    alive = weakref.WeakSet()
    most = []

    def call(i):
        most.append(len(alive))  # outputs still alive when this call allocates
        out = torch.full((4,), float(i))
        alive.add(out)
        return out

    kept, held = gpu_bench._sample_calls(call, 4, 5, 6, keep)
    assert kept.tolist() == [4.0] * 4  # the first call's output, for the check
    if keep:
        assert most == [0, 1, 2, 3, 4] and [h[0].item() for h in held] == [5, 0, 1, 2]
    else:
        assert most == [0, 1, 1, 1, 1] and held == []


def test_the_copy_rate_is_queued_ahead_and_host_bound_samples_left_out(monkeypatch):
    # a copy within L2 lasts about a microsecond: timed without queued work, the events
    # would time the host's launches. A fake CUDA clock records what each sample asked
    asked = []
    timed = iter([(2e-6, 1e-6, False), (9e-6, 8e-6, True), (4e-6, 1e-6, False)])

    class FakeClock:
        cuda = True

        def __init__(self, device):
            pass

        def time_both(self, fn, ahead_s=0.0):
            asked.append(ahead_s)
            return next(timed)

    monkeypatch.setattr(gpu_bench, "_Clock", FakeClock)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    found = gpu_bench.measure_copy_bandwidth(torch.device("cpu"), nbytes=1000, repeats=3)
    assert len(asked) == 3 and asked[0] >= gpu_bench.QUEUE_MIN_S and len(set(asked)) == 1
    assert found["queue_ahead_us"] == pytest.approx(asked[0] * 1e6)
    assert found["host_bound_samples"] == 1
    assert found["samples_ms"] == pytest.approx([2e-3, 4e-3])
    assert found["gb_per_s"] == pytest.approx(2000 / 3e-6 / 1e9)  # the median of 2 and 4 us
    timed = iter([(1e-6, 1e-3, True)] * 2)
    with pytest.raises(RuntimeError, match="host-bound"):
        gpu_bench.measure_copy_bandwidth(torch.device("cpu"), nbytes=1000, repeats=2)


@pytest.mark.skipif(not HAS_TRITON, reason="the copy kernel runs in Triton's interpreter")
def test_the_triton_copy_copies_dense_buffers_and_refuses_others():
    triton_copy = gpu_bench._triton_module(True, "posenc_lab.triton_copy").triton_copy
    for dtype in (torch.bfloat16, torch.float32):
        src = torch.randn(3 * 4096 + 5).to(dtype)  # a last block that is masked
        dst = torch.zeros_like(src)
        assert triton_copy(src, dst) is dst and torch.equal(dst, src)
    with pytest.raises(ValueError, match="same dtype"):
        triton_copy(torch.zeros(8), torch.zeros(8, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="same shape"):
        triton_copy(torch.zeros(8), torch.zeros(9))
    with pytest.raises(ValueError, match="dst must be contiguous"):
        triton_copy(torch.zeros(4, 4), torch.zeros(4, 4).t())
    # the harness checks both copies bit for bit: one that drops a byte stops the run
    case = build_cases(dry_run=True)[1]
    inputs = gpu_bench._inputs(case, torch.device("cpu"), 0, seed=0)

    def short(i):
        inputs.outputs[0][:-1].copy_(inputs.flat[i][:-1])

    with pytest.raises(AssertionError, match="triton_copy"):
        gpu_bench._check(case, inputs, {"triton_copy": ("short", short)})


def test_the_floors_divide_by_the_faster_copy_and_say_which(record):
    # a memcpy need not reach what a Triton kernel can, nor a kernel what a memcpy can:
    # a floor is only a floor at the faster of the two
    slow, fast = {"gb_per_s": 3000.0}, {"gb_per_s": 3600.0}
    assert gpu_bench.fastest_copy(slow, fast) == {"gb_per_s": 3600.0, "source": "triton_copy"}
    assert gpu_bench.fastest_copy(fast, slow) == {"gb_per_s": 3600.0, "source": "copy_"}
    assert gpu_bench.fastest_copy(slow) == {"gb_per_s": 3000.0, "source": "copy_"}
    rates = record["floor_rates"]
    if HAS_TRITON:
        pairs = [("memory", "copy_bandwidth", "triton_copy_bandwidth"),
                 ("l2", "l2_copy_bandwidth", "l2_triton_copy_bandwidth")]  # fmt: skip
        for where, plain, triton in pairs:
            both = [record[plain]["gb_per_s"], record[triton]["gb_per_s"]]
            assert rates[where]["gb_per_s"] == max(both)
        for case in record["cases"].values():
            p = case["predicted"]
            if not case["warm"]:
                moved = case["dram_bytes_per_call_at_least"]
                assert p["memory_us"] == pytest.approx(moved / rates["memory"]["gb_per_s"] / 1e3)
            else:
                moved = case["bytes_per_call"]
                assert p["memory_us"] == pytest.approx(moved / rates["l2"]["gb_per_s"] / 1e3)


@pytest.mark.skipif(not HAS_TRITON, reason="the Triton copy runs in Triton's interpreter")
def test_every_contender_is_paired_with_the_triton_copy_round_by_round(record):
    for case in record["cases"].values():
        found = case["contenders"]
        assert found["triton_copy"]["ratio_to_triton_copy"] == 1.0
        for name, c in found.items():
            ratios = zip(c["samples_us"], found["triton_copy"]["samples_us"], strict=True)
            expected = statistics.median(a / b for a, b in ratios)
            assert c["ratio_to_triton_copy"] == pytest.approx(expected), name


def test_a_single_launch_leaves_host_bound_replays_out(monkeypatch):
    timed = iter([(1e-6, 0, False), (9e-6, 0, True), (3e-6, 0, False), (5e-6, 0, True)])

    class FakeClock:
        cuda = False

        def __init__(self, device):
            pass

        def time_both(self, fn, ahead_s=0.0):
            fn()
            return next(timed)

    monkeypatch.setattr(gpu_bench, "_Clock", FakeClock)
    found = gpu_bench.single_launch(
        lambda: None, lambda: None, lambda: None, torch.device("cpu"), repeats=2
    )
    assert found["host_bound"] == 2
    assert found["hot_us"] == pytest.approx(1.0) and found["cold_table_us"] == pytest.approx(3.0)


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


def _turn(x, cos, sin):
    """Rotate x (..., d) in the half layout by cos, sin (..., d/2) broadcast to it, in
    float32, rounded once to x's dtype."""
    a, b = x.float().chunk(2, dim=-1)
    cos, sin = cos.float(), sin.float()
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1).to(x.dtype)


def _fake_libraries(monkeypatch, calls):
    """Stand-ins for vLLM, FlashInfer, Liger Kernel and FlashAttention with their documented
    signatures: each checks what it is given (shapes, dtypes, layout) and rotates."""
    import types

    def cos_sin_cache_op(name, table_dtype):
        def op(positions, query, key, head_size, cos_sin_cache, is_neox=True):
            calls.append(name)
            assert is_neox is True and positions.dim() == 1
            assert cos_sin_cache.dtype == (table_dtype or query.dtype), name
            half = cos_sin_cache.shape[1] // 2
            for x in (query, key):  # (tokens, heads * head_size), written in place
                assert x.dim() == 2 and x.shape[0] == positions.numel(), name
                heads = x.view(x.shape[0], -1, head_size)
                row = cos_sin_cache[positions][:, None]  # (tokens, 1, r)
                heads.copy_(_turn(heads, row[..., :half], row[..., half:]))

        return op

    def liger_rotary_pos_emb(q, k, cos, sin):
        calls.append("liger")
        assert q.dim() == 4 and cos.shape == (q.shape[0], q.shape[2], q.shape[3])
        for x in (q, k):  # (b, n, s, d); cos, sin (b, s, d) over the whole head
            half = x.shape[-1] // 2
            x.copy_(_turn(x, cos[:, None, :, :half], sin[:, None, :, :half]))
        return q, k

    def apply_rotary_emb(x, cos, sin, seqlen_offsets=0):
        calls.append("flash_attn")
        assert x.dim() == 4 and cos.dtype == x.dtype and cos.shape[-1] * 2 == x.shape[-1]
        b, s = x.shape[:2]  # (b, s, n, d); positions: each sequence's offset onward
        offsets = torch.as_tensor(seqlen_offsets).reshape(-1, 1).expand(b, 1)
        positions = offsets + torch.arange(s)
        return _turn(x, cos[positions][:, :, None], sin[positions][:, :, None])

    modules = {
        "vllm._custom_ops": {"rotary_embedding": cos_sin_cache_op("vllm", None)},
        "flashinfer.rope": {
            "apply_rope_with_cos_sin_cache_inplace": cos_sin_cache_op("flashinfer", torch.float32)
        },
        "liger_kernel.transformers.rope": {"liger_rotary_pos_emb": liger_rotary_pos_emb},
        "flash_attn.layers.rotary": {"apply_rotary_emb": apply_rotary_emb},
    }
    for name, attributes in modules.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attributes))


@pytest.mark.parametrize("kind", [0, 1], ids=["prefill", "decode"])
def test_production_kernels_are_called_as_documented_and_checked(monkeypatch, kind):
    # the libraries are not installed here: stand-ins with their documented signatures
    # check how the harness calls them; each is checked against apply_rope (on copies of
    # the pair, as three of them write in place) and timed like the others
    calls = []
    _fake_libraries(monkeypatch, calls)

    def no_triton(interpret):
        raise ImportError("the fused kernel is not what this test is about")

    monkeypatch.setattr(gpu_bench, "_triton_module", no_triton)
    case = build_cases(dry_run=True)[kind]
    found = _time_on_cpu(case)
    production = {"vllm", "flashinfer", "liger", "flash_attn"}
    assert production <= set(found["contenders"])
    assert set(found["absent"]) == {"compiled_graph"}  # CUDA graphs need a GPU
    assert set(calls) == production
    # an answer off by a sign fails the check, named
    inputs = gpu_bench._inputs(case, torch.device("cpu"), 0, seed=0)
    contenders = gpu_bench._contenders(case, inputs, interpret=True, compile_backend=None)
    wrong = lambda i: tuple(-x for x in inputs.pool[i])  # noqa: E731
    with pytest.raises(AssertionError, match="flashinfer"):
        gpu_bench._check(case, inputs, {"flashinfer": ("off", wrong)})
    gpu_bench._check(case, inputs, {n: contenders[n] for n in production})
    q, k = inputs.pool[0]  # the in-place ones ran on copies: the pool's pair is untouched
    fresh = gpu_bench._inputs(case, torch.device("cpu"), 0, seed=0)
    assert torch.equal(q, fresh.pool[0][0]) and torch.equal(k, fresh.pool[0][1])


def test_absent_libraries_are_recorded_with_the_reason(record):
    for case in record["cases"].values():
        absent = case["absent"]
        for name in ("vllm", "flashinfer", "liger", "flash_attn"):
            if importlib.util.find_spec(gpu_bench.PRODUCTION[name][0].split(".")[0]) is None:
                assert name in absent and "Error" in absent[name], name
        assert "compiled_graph" in absent and "compiled_graph" not in case["contenders"]


def test_cases_and_contenders_can_be_chosen(tmp_path):
    path = tmp_path / "one.json"
    argv = ["--dry-run", "--json", str(path), "--cases", "decode-3-float32"]
    assert main([*argv, "--contenders", "apply_rope"]) == 0
    found = json.loads(path.read_text(encoding="utf-8"))
    assert list(found["cases"]) == ["decode-3-float32"]
    assert set(found["cases"]["decode-3-float32"]["contenders"]) == {"copy", "apply_rope"}
    with pytest.raises(SystemExit, match="unknown cases"):
        main(["--dry-run", "--cases", "decode-2-float32"])


def test_a_warm_sample_queues_at_most_500_launches(record):
    # a CUDA stream holds about 1,000 pending launches: beyond that the host blocks and
    # the queued sleep no longer hides it. Hugging Face's formula is 10 kernels a call
    l2 = 50 * 2**20
    decode = {c.name: c for c in build_cases(l2_bytes=l2)}["decode-1-bfloat16"]
    assert gpu_bench.MAX_QUEUED_LAUNCHES == 500
    assert gpu_bench.calls_per_sample(decode, 10) == 50
    assert gpu_bench.calls_per_sample(decode, 1) == decode.number == 100
    assert gpu_bench.calls_per_sample(decode, 0) == 100  # a graph replay: one launch
    assert gpu_bench.calls_per_sample(decode, 1000) == 1
    cold = {c.name: c for c in build_cases(l2_bytes=l2)}["prefill-1024-bfloat16"]
    assert gpu_bench.calls_per_sample(cold, 10) == cold.number  # its pairs make it cold
    for case in record["cases"].values():
        found = case["contenders"]
        assert found["eager_formula"]["launches_per_call"] == 10  # 5 ATen ops on q, 5 on k
        assert found["copy"]["launches_per_call"] == 1
        if HAS_TRITON:
            assert found["triton_graph"]["launches_per_call"] == 0
        for c in found.values():
            assert c["calls_per_sample"] <= case["number"]
            if case["warm"]:
                assert c["launches_per_call"] * c["calls_per_sample"] <= 500


def test_host_bound_samples_are_left_out_of_the_statistics():
    late = [False, True, False, False]
    found = gpu_bench.summarise(
        [1e-6, 9e-6, 3e-6, 2e-6], late, [1e-6, 1e-6, 1e-6, 2e-6], [False] * 3 + [True], 1000
    )
    assert found["host_bound_samples"] == 1
    assert found["host_bound_samples_us"] == pytest.approx([9.0])
    assert found["samples_us"] == pytest.approx([1.0, 3.0, 2.0])
    assert found["median_us"] == pytest.approx(2.0) and found["min_us"] == pytest.approx(1.0)
    assert found["gb_per_s"] == pytest.approx(1000 / 2e-6 / 1e9)
    assert found["ratio_to_copy"] == pytest.approx(2.0)  # rounds 0 and 2: 1 and 3
    none = gpu_bench.summarise([1e-6], [True], [1e-6], [False], 1000)
    assert none["median_us"] is None and none["ratio_to_copy"] is None
    assert none["gb_per_s"] is None and none["samples_us"] == []


def test_compiled_graph_is_left_out_of_cold_cases():
    # cudagraph trees write every call into one static output: a cold sample's calls
    # would not each write new memory
    cases = {c.warm: c for c in build_cases(l2_bytes=50 * 2**20)}
    assert gpu_bench._compiled_graph_absent(cases[True], "inductor", "cuda") is None
    assert "cold" in gpu_bench._compiled_graph_absent(cases[False], "inductor", "cuda")
    assert "CUDA" in gpu_bench._compiled_graph_absent(cases[True], "eager", "cpu")


def test_a_single_launch_is_timed_hot_and_with_the_table_in_memory(record):
    # before each cold-table call: L2 flushed, then q and k read back, then the call
    events = []
    found = gpu_bench.single_launch(
        lambda: events.append("call"),
        lambda: events.append("touch"),
        lambda: events.append("flush"),
        torch.device("cpu"),
        repeats=2,
    )
    assert events == ["call", "call", "flush", "touch", "call", "flush", "touch", "call"]
    assert found["repeats"] == 2 and found["hot_us"] > 0 and found["cold_table_us"] > 0
    for case in record["cases"].values():
        if case["warm"]:
            expected = {"copy", "triton", "triton_copy"} if HAS_TRITON else {"copy"}
            assert set(case["single_launch"]) == expected
        else:
            assert "single_launch" not in case


def test_each_case_records_the_floor_the_model_predicts(record):
    # bytes over the copy bandwidth of where they sit, and the dependent chain at the
    # assumed latencies
    cases = {c.name: c for c in build_cases(l2_bytes=50 * 2**20)}
    cold = gpu_bench.predicted_floor(cases["prefill-4096-bfloat16"], 4800.0, 50 * 2**20)
    assert round(cold["memory_bytes"] / 1e6, 1) == 73.4 and cold["memory_source"] == "memory"
    assert round(cold["memory_us"], 1) == 15.3 == round(cold["lower_bound_us"], 1)
    # a cold case ignores L2's rate: its bytes come from memory
    assert (
        gpu_bench.predicted_floor(cases["prefill-4096-bfloat16"], 4800.0, 50 * 2**20, 1e5) == cold
    )
    warm = gpu_bench.predicted_floor(cases["decode-1-bfloat16"], 4800.0, 50 * 2**20)
    assert warm["memory_bytes"] == warm["bytes_per_call"] == 20480
    assert round(warm["chain_us"], 3) == 0.6 == round(warm["lower_bound_us"], 3)
    assert round(warm["chain_cold_table_us"], 3) == 1.4  # position and row from memory
    # float32: k's loads go with the row (tests/test_rope_triton.py), two trips
    warm32 = gpu_bench.predicted_floor(cases["decode-1-float32"], 4800.0, 50 * 2**20)
    assert warm32["round_trips"] == 2 and round(warm32["chain_us"], 3) == 0.4
    assert round(warm32["chain_cold_table_us"], 3) == 1.2
    # a warm case's bytes sit in L2: memory's bandwidth bounds nothing, so without L2's
    # rate there is no memory term, and the 256-token case's bound is the chain alone,
    # not 1.09 us at 4.8 TB/s
    d256 = cases["decode-256-bfloat16"]
    hot = gpu_bench.predicted_floor(d256, 4800.0, 50 * 2**20)
    assert hot["memory_us"] is None and hot["memory_source"] is None
    assert round(hot["lower_bound_us"], 3) == 0.6
    # with L2's measured copy rate, 5.24 MB at 12 TB/s is 0.437 us: an estimate only (the
    # rate is timed over 20 launches with their gaps), so the bound stays the chain
    at_l2 = gpu_bench.predicted_floor(d256, 4800.0, 50 * 2**20, 12000.0)
    assert at_l2["memory_source"] == "l2"
    assert at_l2["memory_us"] == pytest.approx(d256.bytes_per_call() / 12e12 * 1e6)
    assert at_l2["lower_bound_us"] == pytest.approx(0.6)
    slow_l2 = gpu_bench.predicted_floor(d256, 4800.0, 50 * 2**20, 1000.0)  # 5.2 us
    assert slow_l2["memory_us"] > 5 and slow_l2["lower_bound_us"] == pytest.approx(0.6)
    l2_rate = record["l2_copy_bandwidth"]["gb_per_s"]
    assert record["l2_copy_bandwidth"]["calls_per_sample"] == 2 and l2_rate > 0
    for case in record["cases"].values():
        assert case["predicted"]["bytes_per_call"] == case["bytes_per_call"]
        # the dry run's record stores the floor at its own measured copy bandwidths
        spec = Case(**{f: case[f] for f in Case.__dataclass_fields__})
        rate = record["floor_rates"]["memory"]["gb_per_s"]
        l2_floor = record["floor_rates"]["l2"]["gb_per_s"]
        assert case["predicted"] == gpu_bench.predicted_floor(spec, rate, 0, l2_floor)
        assert case["predicted"]["memory_source"] == ("l2" if case["warm"] else "memory")


def test_the_predicted_floor_adds_each_launchs_assumed_device_cost():
    # a kernel costs the device a fixed 1 to 4 us (launch, ramp, tail, gap), assumed;
    # the fused kernel is one launch by the harness's count. Decode is launch-bound:
    # 0.6 us of chain becomes 1.6 to 4.6 us; a prefill's 15.3 us becomes 16.3 to 19.3
    assert gpu_bench.LAUNCH_COST_S == (1e-6, 4e-6)
    cases = {c.name: c for c in build_cases(l2_bytes=50 * 2**20)}
    for name, bound, low, high in [
        ("decode-1-bfloat16", 0.6, 1.6, 4.6),
        ("prefill-4096-bfloat16", 15.3, 16.3, 19.3),
    ]:
        f = gpu_bench.predicted_floor(cases[name], 4800.0, 50 * 2**20)
        assert f["launches_per_call"] == gpu_bench.OPAQUE_LAUNCHES["triton"] == 1
        assert f["launch_us_each_assumed"] == pytest.approx([1.0, 4.0])
        assert f["launch_us"] == pytest.approx([1.0, 4.0])
        assert round(f["lower_bound_us"], 1) == bound  # the kernel's work alone
        assert [round(t, 1) for t in f["with_launch_us"]] == [low, high]
    # two launches a call (as if q and k were rotated apart) would pay twice
    with pytest.MonkeyPatch.context() as m:
        m.setitem(gpu_bench.OPAQUE_LAUNCHES, "triton", 2)
        f = gpu_bench.predicted_floor(cases["decode-1-bfloat16"], 4800.0, 50 * 2**20)
    assert [round(t, 1) for t in f["with_launch_us"]] == [2.6, 8.6]


def test_the_printed_record_gives_the_floor_with_the_launch_cost(record):
    text = gpu_bench.format_record(record)
    assert "with the launch cost (1 x 1 to 4 us, assumed)" in text


def test_a_full_run_compiles_every_shape_without_reaching_the_recompile_limit(monkeypatch):
    # dynamo caches per code object (RotaryEmbedding.forward), not per module: a new
    # shape or dtype is a recompile of the same function, and with fullgraph=True the
    # limit (8 in torch 2.13) is a hard error. A full GPU run has 14 cases; these 12
    # tiny ones go through run() and the harness's own compile path as those would
    shapes = [Case(f"decode-{b}-{d}", b, 2, 1, 1, 8, d, 1, True) for d in ("bfloat16", "float32")
              for b in range(1, 7)]  # fmt: skip
    monkeypatch.setattr(gpu_bench, "build_cases", lambda **kwargs: shapes)
    assert len(shapes) > torch._dynamo.config.recompile_limit
    found = gpu_bench.run(dry_run=True, rounds=1, contenders=["compiled_module"])
    assert list(found["cases"]) == [c.name for c in shapes]
    for case in found["cases"].values():
        assert len(case["contenders"]["compiled_module"]["samples_us"]) == 1
