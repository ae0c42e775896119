"""posenc_lab.bench: the command runs and writes its JSON; the contenders compute the same thing.

Nothing here asserts a speed: timings depend on the machine and its load.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from posenc import alibi_bias, apply_rope, sinusoidal
from posenc_lab.bench import (
    Contender,
    alibi_straightforward,
    count_traffic,
    hf_apply_rotary,
    hf_cos_sin,
    main,
    memory_floor,
    meta_apply_rotary,
    meta_freqs_cis,
    rotate_half,
    sinusoidal_straightforward,
    time_contenders,
)

GROUPS = {"rope", "decode", "rope_bf16", "rope_f16", "sinusoid", "alibi"}
ROPE_CONTENDERS = {
    "hf_rotate_half",
    "complex",
    "apply_rope",
    "apply_rope_unblocked",
    "apply_rope_interleaved",
    "rotary_embedding",
    "rotary_embedding_fixed",
    "floor",
}
FIELDS = {
    "label",
    "median_ms",
    "q1_ms",
    "q3_ms",
    "min_ms",
    "speedup_vs_baseline",
    "ratio_to_floor",
    "gb_per_s",
    "samples_ms",
    "bytes_per_element",
    "ops_per_call",
}


def test_quick_run_writes_json(tmp_path, capsys):
    path = tmp_path / "out.json"
    assert main(["--quick", "--json", str(path)]) == 0
    results = json.loads(path.read_text(encoding="utf-8"))
    meta = results["meta"]
    assert meta["num_threads"] == torch.get_num_threads()
    assert {
        "torch",
        "cpu",
        "num_interop_threads",
        "cuda_available",
        "loadavg_before",
        "loadavg_after",
    } <= set(meta)
    assert set(results["groups"]) == GROUPS
    for name, group in results["groups"].items():
        assert group["baseline"] in group["contenders"] and group["floor"] in group["contenders"]
        if name.startswith(("rope", "decode")):
            assert set(group["contenders"]) == ROPE_CONTENDERS
            element = {"float32": 4, "bfloat16": 2, "float16": 2}[group["dtype"]]
            assert group["floor_bytes_per_element"] == 2 * element  # one read, one write
        assert {"rope_bf16": "bfloat16", "rope_f16": "float16"}.get(name, "float32") == (
            group["dtype"]
        )
        for c in group["contenders"].values():
            assert set(c) == FIELDS
            assert len(c["samples_ms"]) == group["rounds"] == 3
            assert c["q1_ms"] <= c["median_ms"] <= c["q3_ms"]
            assert c["min_ms"] <= c["median_ms"] and c["gb_per_s"] > 0
            assert math.isfinite(c["speedup_vs_baseline"]) and math.isfinite(c["ratio_to_floor"])
        assert group["contenders"][group["baseline"]]["speedup_vs_baseline"] == 1.0
        assert group["contenders"][group["floor"]]["ratio_to_floor"] == 1.0
    table = capsys.readouterr().out
    assert "torch.get_num_threads() =" in table and "load average" in table
    assert "posenc.apply_rope" in table and "x floor" in table


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--threads", "0"], ["--bogus"]])
def test_bad_arguments(argv):
    with pytest.raises(SystemExit):
        main(argv)


# ---------------------------------------------------------------------------
# The contenders compute what apply_rope computes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [2, 8, 64, 128])
@pytest.mark.parametrize("shape", [(1, 16, 33), (2, 3, 1)])  # (b, n_h, s); s = 1: a decode step
def test_rope_contenders_agree_with_apply_rope(shape, dim):
    g = torch.Generator().manual_seed(dim)
    x = torch.randn((*shape, dim), generator=g)
    positions = torch.arange(shape[-1]) + 1000
    expected = apply_rope(x, positions)
    cos, sin = hf_cos_sin(positions, dim)
    assert cos.shape == (shape[-1], dim)  # Hugging Face's duplicated halves
    tol = {"rtol": 2e-6, "atol": 2e-6}  # rounding: one fused multiply-add apart
    torch.testing.assert_close(hf_apply_rotary(x, cos, sin), expected, **tol)
    interleaved = apply_rope(x, positions, layout="interleaved")
    torch.testing.assert_close(
        meta_apply_rotary(x, meta_freqs_cis(positions, dim)), interleaved, **tol
    )
    torch.testing.assert_close(memory_floor(x), 2 * x, rtol=0, atol=0)


def test_rotate_half():
    x = torch.arange(6.0)
    assert torch.equal(rotate_half(x), torch.tensor([-3.0, -4.0, -5.0, 0.0, 1.0, 2.0]))


def test_table_contenders_agree_with_posenc():
    n, dim = 300, 64
    # float32 angles lose up to p * 2**-24 rad; posenc forms them in float64
    torch.testing.assert_close(
        sinusoidal_straightforward(n, dim),
        sinusoidal(torch.arange(n), dim),
        rtol=0,
        atol=n * 2e-7 + 1e-6,
    )
    for heads in (1, 4, 16):
        expected = alibi_bias(heads, 20, 50)
        torch.testing.assert_close(
            alibi_straightforward(heads, 20, 50), expected, rtol=1e-6, atol=0
        )


# ---------------------------------------------------------------------------
# Memory traffic, counted by intercepting ATen operations
# ---------------------------------------------------------------------------


def test_traffic_of_the_floor_and_of_views():
    x = torch.zeros(4, 8, 16)
    t = count_traffic(lambda: memory_floor(x))
    assert (t.reads, t.writes, t.ops) == (x.nbytes, x.nbytes, ["mul"])
    t = count_traffic(lambda: x[..., :8].unsqueeze(0).transpose(0, 1))  # views move nothing
    assert (t.total, t.ops) == (0, []) and t.views == 3
    t = count_traffic(lambda: x.clone().add_(1.0))  # in-place: read and write of self
    assert (t.reads, t.writes) == (2 * x.nbytes, 2 * x.nbytes)
    t = count_traffic(lambda: torch.empty_like(x).copy_(x))  # copy_ does not read its target
    assert (t.reads, t.writes) == (x.nbytes, x.nbytes)


def test_traffic_per_element_of_the_rope_contenders(monkeypatch):
    import posenc.rope

    monkeypatch.setattr(posenc.rope, "_SMALL", 0)  # the in-place path, as for large inputs
    # x (b, n_h, s, d) = (2, 8, 16, 32); cos/sin (s, d) or (s, d/2) are shared by all heads
    b, h, s, d = 2, 8, 16, 32
    x = torch.randn(b, h, s, d)
    n = x.numel()
    positions = torch.arange(s)
    cos, sin = hf_cos_sin(positions, d)  # (s, d)
    table = s * d * 4  # bytes of one of them

    # HF: x*cos (4 + 4), -x2 (2 + 2), cat (4 + 4), rotate_half(x)*sin (4 + 4), sum (8 + 4)
    t = count_traffic(lambda: hf_apply_rotary(x, cos, sin))
    assert t.ops == ["mul", "neg", "cat", "mul", "add"]
    assert t.total == 40 * n + 2 * table

    # posenc: [a; b] * cos (4 + 4), then a cos - b sin and b cos + a sin on each half (6 + 6)
    half = s * d // 2 * 4  # bytes of a (s, d/2) table
    t = count_traffic(lambda: apply_rope(x, positions))
    rotation = [op for op in t.ops if op in ("mul", "addcmul_")][-3:]
    assert rotation == ["mul", "addcmul_", "addcmul_"]
    cos_h, sin_h = cos[:, : d // 2], sin[:, : d // 2]
    t = count_traffic(lambda: posenc.rope._rotate(x, cos_h, sin_h, "half"))
    assert t.total == 20 * n + 3 * half

    # complex multiplication: one read and one write of x, plus the (s, d/2) complex64 table
    freqs_cis = meta_freqs_cis(positions, d)
    t = count_traffic(lambda: meta_apply_rotary(x, freqs_cis))
    assert (t.ops, t.total) == (["mul"], 8 * n + 2 * half)


def test_time_contenders_alternates_the_order():
    seen: list[str] = []
    contenders = [Contender(name, name, lambda name=name: seen.append(name)) for name in "abc"]
    samples = time_contenders(contenders, rounds=4, warmup=1, number=2)
    assert {k: len(v) for k, v in samples.items()} == {"a": 4, "b": 4, "c": 4}
    assert seen[:3] == list("abc")  # warm-up
    timed = "".join(seen[3::2])  # two calls per sample: keep the first
    # rotate by one each round, reverse every other round
    assert [timed[k : k + 3] for k in range(0, 12, 3)] == ["abc", "acb", "cab", "cba"]


def test_the_unblocked_control_makes_one_pass_per_operation():
    # the control for the blocks: the same bits as apply_rope, in one pass per
    # operation over the whole tensor, and the module's block size restored after
    import posenc.rope as rope_module
    from posenc_lab.bench import _apply_rope_unblocked

    x = torch.randn(1, 16, 1200, 64)  # 1.2 M elements: several blocks at any thread count
    positions = torch.arange(1200)
    saved = rope_module._BLOCK
    blocked = count_traffic(lambda: rope_module.apply_rope(x, positions))
    whole = count_traffic(lambda: _apply_rope_unblocked(x, positions))
    assert rope_module._BLOCK == saved
    assert torch.equal(_apply_rope_unblocked(x, positions), rope_module.apply_rope(x, positions))
    assert len(whole.ops) < len(blocked.ops)
