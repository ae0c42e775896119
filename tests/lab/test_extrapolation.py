"""Tests of posenc_lab.extrapolation: corpus, tasks, evaluation, ablations, runner, record."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from posenc import YarnScaling, apply_rope, rope_frequencies
from posenc.relative import T5RelativeBias
from posenc_lab import RECORDS
from posenc_lab.extrapolation import corpus as C
from posenc_lab.extrapolation import models as M
from posenc_lab.extrapolation import runner as R
from posenc_lab.extrapolation import tasks as T
from posenc_lab.extrapolation import text as X
from posenc_lab.extrapolation.__main__ import main
from posenc_lab.toy import T5_INIT_STD, ToyTransformer, accuracy_by_position, prefix_batch


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matrices: one thread is fastest, and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ----------------------------------------------------------------- corpus

DOCS = {  # relative path -> text; enough for the tiny text design's blocks
    "library/os.rst.txt": "The os module. " * 20,
    "library/sys.rst.txt": "System-specific parameters. " * 12,
    "tutorial/index.rst.txt": "An informal introduction. " * 15,
    "about.rst.txt": "About these documents.\n" * 10,
    "library/mod0.rst.txt": "More text to split by document. " * 9,  # validation
    "library/mod5.rst.txt": "And a second document to validate on. " * 9,  # validation
    "whatsnew/3.11.rst.txt": "What's new in Python 3.11. " * 11,
}


def write_docs(root: Path, docs: dict[str, str], order=None) -> Path:
    for path in order or docs:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(docs[path])
    (root / "README").write_text("not a document: no .rst.txt")
    return root


def test_is_validation_by_hand():
    for path in ("library/os.rst.txt", "about.rst.txt", "tutorial/index.rst.txt"):
        digest = hashlib.sha256(path.encode()).hexdigest()
        assert C.is_validation(path) == (int(digest[:8], 16) % 10 == 0)
    # over the pinned package's 497 paths the rule puts 49 in validation; here,
    # over many made-up paths, about one in ten
    share = sum(C.is_validation(f"doc{i}.rst.txt") for i in range(5000)) / 5000
    assert 0.08 < share < 0.12


def test_the_corpus_is_deterministic_and_split_by_document(tmp_path):
    a = C.build_corpus(write_docs(tmp_path / "a", DOCS))
    b = C.build_corpus(write_docs(tmp_path / "b", DOCS, order=sorted(DOCS, reverse=True)))
    assert torch.equal(a.train, b.train) and torch.equal(a.validation, b.validation)
    assert a.sha256 == b.sha256
    # the hash is that of the `sha256sum` listing in byte order of the paths
    listing = "".join(
        f"{hashlib.sha256(DOCS[p].encode()).hexdigest()}  {p}\n"
        for p in sorted(DOCS, key=str.encode)
    )
    assert a.sha256 == hashlib.sha256(listing.encode()).hexdigest()
    # each split: its documents in path order, each followed by the byte 0
    for split, want in ((a.train, False), (a.validation, True)):
        docs = [DOCS[p] for p in sorted(DOCS, key=str.encode) if C.is_validation(p) == want]
        assert bytes(split.tolist()) == b"".join(d.encode() + b"\0" for d in docs)
    assert a.documents == len(DOCS)
    assert a.validation_documents == sum(C.is_validation(p) for p in DOCS)
    assert a.total_bytes == sum(len(d) for d in DOCS.values())
    # a changed document changes the hash
    (tmp_path / "b" / "about.rst.txt").write_text("About these documents!\n")
    assert C.build_corpus(tmp_path / "b").sha256 != a.sha256


def test_the_corpus_names_the_package_when_missing_or_different(tmp_path):
    version = C.VERSION.replace("+", r"\+")
    with pytest.raises(C.CorpusError, match=rf"missing.*python3\.11-doc {version}"):
        C.load_corpus(tmp_path / "nowhere")
    write_docs(tmp_path / "other", DOCS)
    with pytest.raises(C.CorpusError, match=rf"not the pinned one.*python3\.11-doc {version}"):
        C.load_corpus(tmp_path / "other")
    (tmp_path / "other" / "bad.rst.txt").write_bytes(b"a\0b")
    with pytest.raises(C.CorpusError, match="separator"):
        C.build_corpus(tmp_path / "other")


def test_the_pinned_corpus():
    # installed by .ci/run (and `make corpus`); without it the experiment cannot run
    corpus = C.load_corpus()
    assert corpus.sha256 == C.SHA256
    assert (corpus.documents, corpus.total_bytes) == (C.DOCUMENTS, C.TOTAL_BYTES)
    assert corpus.validation_documents == 49
    assert len(corpus.train) + len(corpus.validation) == C.TOTAL_BYTES + C.DOCUMENTS


# ------------------------------------------------------------------ tasks


def test_prefix_targets_are_the_inputs_m_back():
    generator = torch.Generator().manual_seed(0)
    inputs, targets = prefix_batch(64, 20, vocab_size=5, generator=generator)
    sep = 5
    for x, y in zip(inputs, targets, strict=True):
        m = int((x == sep).nonzero()[0])  # the first separator closes the prefix
        assert 1 <= m <= 10
        assert (y[:m] == -1).all()  # the rest of the prefix and the first separator
        assert torch.equal(y[m:], x[: 20 - m])
        assert (x[m :: m + 1] == sep).all() and (x[:m] < sep).all()
    # every offset from 1 to L / 2 occurs in training
    ms = {int((x == sep).nonzero()[0]) for x in inputs}
    assert ms == set(range(1, 11))


def test_prefix_evaluation_copies_the_first_half():
    inputs, targets = prefix_batch(3, 16, prefix=8, vocab_size=4)
    assert (inputs[:, 8] == 4).all()
    assert torch.equal(targets[:, 8:], inputs[:, :8])  # offset 8 = N / 2: grows with N
    assert (targets[:, :8] == -1).all()
    # through the task's batch: the evaluation fixes the prefix at N // 2
    S = T.SETTINGS
    x, y = T.batch("prefix", 2, 64, S, torch.Generator().manual_seed(1), evaluation=True)
    assert (x[:, 32] == S["prefix"]["vocab_size"]).all() and (y[:, :32] == -1).all()
    with pytest.raises(ValueError, match=r"prefix must be in \[1, seq_len // 2 = 8\]"):
        prefix_batch(2, 16, prefix=9)
    with pytest.raises(ValueError, match="task must be one of"):
        T.batch("sort", 2, 16, S, torch.Generator())


def test_one_call_measures_accuracy_and_loss():
    torch.manual_seed(0)
    model = M.build_model("rope", 17, T.SETTINGS).eval()
    generator = torch.Generator().manual_seed(0)
    inputs, targets = T.batch("prefix", 8, 32, T.SETTINGS, generator, evaluation=True)
    accuracy, loss = T._measure(model, inputs, targets)
    expected = accuracy_by_position(model, inputs, targets)
    torch.testing.assert_close(accuracy, expected, equal_nan=True)
    assert accuracy[:16].isnan().all()  # the prefix and the separator: nothing to score
    assert loss == pytest.approx(M.loss_of(model(inputs), targets).item())


# ------------------------------------------------------------- RoPE regime


def test_turning_pairs_and_the_matched_base():
    assert M.turning_pairs(128, 10000.0, 4096) == 46  # Llama 2
    assert M.turning_pairs(8, 10000.0, 16) == 1  # version 1's toy
    assert M.turning_pairs(16, 10000.0, 16) == 1  # the tasks' plain RoPE: 1 of 8
    assert M.turning_pairs(32, 10000.0, 64) == 5  # the language model's plain RoPE
    base = M.llm_matched_base(16)
    assert base == 3.776 and T.SETTINGS["rope_llm_base"] == base
    assert M.turning_pairs(16, base, 16) == 6  # the tasks' matched RoPE: 75 %, Llama 2 72 %
    assert M.turning_pairs(32, base, 16) == 12
    assert M.turning_pairs(32, M.llm_matched_base(64), 64) == 12
    # the fraction of pairs turning within L does not depend on the head size
    assert M.turning_pairs(128, M.llm_matched_base(16), 16) == 46


# --------------------------------------------------------------- ablations


def test_t5_hf_rescales_only_the_table():
    # posenc's T5 table starts at N(0, 0.02^2); "t5-hf" draws it as Hugging Face's T5,
    # N(0, 1/d_model), by rescaling the same draw: all else is the same model
    assert T5RelativeBias(4).reset_parameters.__doc__.startswith(
        "Draw the table from ``N(0, 0.02^2)``"
    )
    assert T5_INIT_STD == 0.02
    S = T.SETTINGS
    torch.manual_seed(0)
    plain = M.build_model("t5", 17, S)
    torch.manual_seed(0)
    hf = M.build_model("t5-hf", 17, S)
    ratio = S["dim"] ** -0.5 / 0.02
    for (name, a), (_, b) in zip(plain.named_parameters(), hf.named_parameters(), strict=True):
        if name == "t5_bias.relative_attention_bias.weight":
            torch.testing.assert_close(b, a * ratio)
        else:
            assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="t5_init_std"):
        ToyTransformer(8, "t5", t5_init_std=0.0)


def test_t5_far_buckets_get_no_gradient_at_L():
    # at L = 16 a decoder uses buckets 0 .. 15 only: the other 16 keep their draw
    torch.manual_seed(0)
    model = M.build_model("t5-hf", 17, T.SETTINGS)
    inputs, targets = T.batch("copy", 8, 16, T.SETTINGS, torch.Generator().manual_seed(0))
    M.loss_of(model(inputs), targets).backward()
    grad = model.t5_bias.relative_attention_bias.weight.grad  # [buckets, heads]
    assert (grad[:16].abs().sum(1) > 0).all()
    assert (grad[16:] == 0).all()


def test_yarn_without_temperature_keeps_the_frequencies_and_drops_the_factor():
    S = {"L": 16, "finetune_factor": 2}
    yarn = M.rope_scaling("rope+yarn", 128, S)
    flat = M.rope_scaling("rope+yarn-notemp", 128, S)
    assert yarn.factor == flat.factor == 8.0
    assert yarn.attention_factor == pytest.approx(0.1 * math.log(8) + 1)
    assert flat.attention_factor == 1.0
    torch.testing.assert_close(
        rope_frequencies(32, scaling=yarn), rope_frequencies(32, scaling=flat), rtol=0, atol=0
    )
    x, positions = torch.randn(2, 128, 32), torch.arange(128)
    torch.testing.assert_close(
        apply_rope(x, positions, scaling=yarn),
        apply_rope(x, positions, scaling=flat) * yarn.attention_factor,
    )
    # fine-tuned rows keep the fine-tune's factor at and below 2L; no scaling at L
    assert M.rope_scaling("rope+yarn-notemp+ft", 16, S).factor == 2.0
    assert M.rope_scaling("rope+yarn-notemp", 16, S) is None
    assert M.rope_scaling("rope+ft", 128, S) is None
    assert M.rope_scaling("rope-llm+pi", 64, S).factor == 4.0


def test_yarn_paper_ramps_over_the_turns_not_the_index():
    """Peng et al.'s Eqs. 17-20 by hand: gamma = (r - 1) / 31 between 1 and 32 turns."""
    # head 16, base 10^4, L = 16: pair 0 turns 16 / 2 pi = 2.546 times, the others < 1
    r0 = 16 / (2 * math.pi)
    gamma = (r0 - 1) / 31
    for s in (2.0, 8.0):
        paper = M.yarn_paper_multipliers(16, 1e4, 16, s)
        expected = [(1 - gamma) / s + gamma] + [1 / s] * 7
        torch.testing.assert_close(paper, torch.tensor(expected, dtype=torch.float64))
    assert round(float(M.yarn_paper_multipliers(16, 1e4, 16, 2.0)[0]), 3) == 0.525
    # head 32, L = 64: pairs 0-4 turn 10.19, 5.73, 3.22, 1.81, 1.02 times
    paper = M.yarn_paper_multipliers(32, 1e4, 64, 2.0)
    assert [round(v, 3) for v in paper[:6].tolist()] == [0.648, 0.576, 0.536, 0.513, 0.5, 0.5]
    # a pair that turns more than beta times is kept whole, one below alpha divided by s
    kept = M.yarn_paper_multipliers(2, 1e4, 1000, 4.0)  # theta_0 = 1: 159 turns
    assert kept.tolist() == [1.0]
    # the code's ramp (posenc.YarnScaling) keeps pair 0 whole in both settings
    for head, L in ((16, 16), (32, 64)):
        code = rope_frequencies(head, scaling=YarnScaling(2.0, L)) / rope_frequencies(head)
        assert code[0] == 1.0


def test_yarn_paper_row_scales_each_pair_and_keeps_the_temperature():
    S = {"L": 16, "finetune_factor": 2, "dim": 64, "n_heads": 4, "rope_llm_base": 3.776}
    paper = M.rope_scaling("rope+yarn-paper", 64, S)  # s = 4
    assert paper.attention_factor == pytest.approx(0.1 * math.log(4) + 1)
    for base, row in ((1e4, "rope+yarn-paper"), (3.776, "rope-llm+yarn-paper")):
        scaling = M.rope_scaling(row, 64, S)
        torch.testing.assert_close(
            rope_frequencies(16, base=base, scaling=scaling, seq_len=64).double(),
            rope_frequencies(16, base=base).double() * M.yarn_paper_multipliers(16, base, 16, 4.0),
        )
    assert M.rope_scaling("rope+yarn-paper", 16, S) is None  # no scaling at L


def test_rows_of_each_kind():
    assert M.rope_rows("alibi") == ["alibi"]
    assert M.rope_rows("rope-llm", ("", "+pi+ft")) == ["rope-llm", "rope-llm+pi+ft"]
    assert len(M.rope_rows("rope")) == 8
    with pytest.raises(ValueError, match="kind must be one of"):
        M.build_model("xpos", 8, T.SETTINGS)


# -------------------------------------------------------------- evaluation


def _tiny_lm(seed: int = 0) -> ToyTransformer:
    torch.manual_seed(seed)
    return ToyTransformer(11, "alibi", dim=16, n_heads=2, max_len=64).eval()


def _loss_after(model, context: torch.Tensor, target: int) -> float:
    """The loss of ``target`` predicted from ``context`` alone: one call, the last position."""
    logits = model(context[None])[0, -1]
    return -F.log_softmax(logits, -1)[target].item()


def test_nonoverlapping_windows_by_hand():
    model = _tiny_lm()
    blocks = torch.randint(11, (3, 17), generator=torch.Generator().manual_seed(0))  # span 8
    losses = X.nonoverlapping(model, blocks, 4)
    assert losses.shape == (3, 8)  # every token of the second halves, in block order
    got = X.by_position(losses, 4)
    # the scored half of each block (tokens 8 .. 16) cut into windows of 4 inputs:
    # position p of a window starting at s predicts token s + p + 1 from tokens s .. s + p
    expected = torch.zeros(4)
    for block in blocks:
        for start in (8, 12):
            for p in range(4):
                expected[p] += _loss_after(
                    model, block[start : start + p + 1], block[start + p + 1]
                )
    torch.testing.assert_close(got, expected / 6)
    # at N = span, one window per block: position 0 predicts token 9 from token 8 alone
    whole = X.by_position(X.nonoverlapping(model, blocks, 8), 8)
    first = sum(_loss_after(model, block[8:9], block[9]) for block in blocks) / 3
    assert whole.shape == (8,) and whole[0].item() == pytest.approx(first, rel=1e-5)
    # token j of a block's second half: the same loss in windows of 4 when j % 4 == j % 8
    torch.testing.assert_close(losses[:, :4], X.nonoverlapping(model, blocks, 8)[:, :4])
    with pytest.raises(ValueError, match="N must divide the span 8"):
        X.nonoverlapping(model, blocks, 3)


def test_sliding_window_by_hand():
    model = _tiny_lm(1)
    blocks = torch.randint(11, (2, 17), generator=torch.Generator().manual_seed(1))
    got = X.sliding(model, blocks, 4, 2, 4)  # N = 4, stride 2, the last 4 tokens scored
    # windows of 4 inputs end at 14 and at 16 and score their last 2 positions: token u is
    # predicted from the 3 or 4 tokens before it, never fewer than N - stride + 1
    expected = torch.zeros(2)
    for block in blocks:
        for u, context in ((13, 3), (14, 4), (15, 3), (16, 4)):
            expected[context - 3] += _loss_after(model, block[u - context : u], block[u])
    torch.testing.assert_close(got, expected / 4)
    with pytest.raises(ValueError, match="stride"):
        X.sliding(model, blocks, 4, 3, 4)


def test_sliding_with_the_stride_of_a_window_is_the_nonoverlapping_evaluation():
    model = _tiny_lm(2)
    blocks = torch.randint(11, (2, 17), generator=torch.Generator().manual_seed(2))
    # stride N: windows of N back to back over the last 8 tokens = the scored half
    torch.testing.assert_close(
        X.sliding(model, blocks, 4, 4, 8), X.by_position(X.nonoverlapping(model, blocks, 4), 4)
    )


def test_eval_blocks_spread_over_the_validation_split():
    S = {"L": 2, "factors": [1, 2], "eval_blocks": 3}
    validation = torch.arange(40, dtype=torch.uint8)
    blocks = X.eval_blocks(validation, S)
    assert blocks.shape == (3, 9)  # 2 * span + 1, span = 4
    assert blocks[:, 0].tolist() == [0, 10, 20]  # b * (40 - 9) // 3
    assert torch.equal(blocks[1], torch.arange(10, 19))
    with pytest.raises(ValueError, match="at least 9 tokens"):
        X.eval_blocks(validation[:8], S)


# ------------------------------------------------------------------ runner


def tiny_designs(corpus_dir: Path) -> list[dict]:
    tasks = copy.deepcopy(T.SETTINGS) | {
        "lr_sweep": [1e-3, 3e-3],
        "tasks": ["copy", "prefix"],
        "kinds": ["rope", "alibi"],
        "seeds": [0, 1],
        "L": 8,
        "factors": [1, 2],
        "dim": 16,
        "steps": {"copy": 6, "recall": 2, "prefix": 4},
        "warmup": 2,
        "check_every": 3,
        "log_every": 2,
        "batch_size": 4,
        "n_validation": 4,
        "n_eval": 4,
        "finetune_steps": 2,
        "rope_rows": ["", "+yarn-notemp", "+pi+ft"],
    }
    text = copy.deepcopy(X.SETTINGS) | {
        "corpus": str(corpus_dir),
        "kinds": ["learned", "fire"],
        "seeds": [0],
        "L": 4,
        "factors": [1, 2, 4],
        "dim": 16,
        "steps": 4,
        "warmup": 2,
        "check_every": 2,
        "log_every": 2,
        "batch_size": 4,
        "n_validation": 4,
        "finetune_steps": 2,
        "eval_blocks": 2,
        "sliding_stride": 2,
        "sliding_tokens": 4,
    }
    return [tasks, text]


def strip_times(record: dict) -> dict:
    """The record without what depends on the clock and the session."""
    out = {k: v for k, v in record.items() if k not in ("sessions", "wall_s", "command")}
    out.pop("cell_wall_s_total"), out.pop("cell_cpu_s_total")
    for key in ("runs", "sweep"):
        if key in out:
            out[key] = [
                {k: v for k, v in r.items() if k not in ("wall_s", "cpu_s")} for r in out[key]
            ]
    return out


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny design run once, in one process, without a stop."""
    root = tmp_path_factory.mktemp("tiny")
    corpus_dir = write_docs(root / "docs", DOCS)
    designs = tiny_designs(corpus_dir)
    records = R.run(designs, cells=root / "cells", records=root, jobs=1, progress=False)
    return designs, records, corpus_dir


def test_a_tiny_design_runs_and_is_recorded(tiny_run):
    _designs, records, corpus_dir = tiny_run
    tasks, text = records["tasks"], records["text"]
    # 2 tasks x 2 kinds x 2 rates in the sweep, then 2 seeds at the chosen rate
    assert len(tasks["sweep"]) == 8 and len(tasks["runs"]) == 8
    for run in tasks["runs"]:
        chosen = tasks["lr"][run["task"]][run["kind"]]
        assert run["lr"] == chosen
        sweep = {
            r["lr"]: r
            for r in tasks["sweep"]
            if (r["task"], r["kind"]) == (run["task"], run["kind"])
        }
        assert chosen == T.choose_lr(sweep)
        if run["task"] == "copy":  # 6 steps, logged every 2, checked every 3 and at the end
            assert len(run["loss"]) == 3 and run["curve"]["step"] == [3, 6]
        else:  # prefix: 4 steps
            assert len(run["loss"]) == 2 and run["curve"]["step"] == [3, 4]
    rope = next(r for r in tasks["runs"] if r["kind"] == "rope")
    assert set(rope["rows"]) == {"rope", "rope+yarn-notemp", "rope+pi+ft"}
    assert list(rope["finetune_losses"]) == ["rope+pi+ft"]
    assert set(rope["rows"]["rope"]["accuracy"]) == {"8", "16"}
    # text: the corpus it used, losses by position at every length, both evaluations
    assert text["corpus"]["sha256"] == C.build_corpus(corpus_dir).sha256
    fire = next(r for r in text["runs"] if r["kind"] == "fire")
    assert set(fire["rows"]["fire"]["loss"]) == {"4", "8", "16"}
    assert len(fire["rows"]["fire"]["by_position"]["16"]) == 16
    assert len(fire["rows"]["fire"]["sliding_by_position"]["16"]) == 2
    assert set(fire["rows"]["fire"]["loss_sliding_tokens"]) == {"4", "8", "16"}
    assert fire["fire_threshold"] > 0
    learned = next(r for r in text["runs"] if r["kind"] == "learned")
    assert set(learned["rows"]["learned"]["loss"]) == {"4"}  # no row beyond L
    for record in (tasks, text):
        assert record["versions"]["torch"] == torch.__version__
        assert record["machine"]["cpus"] == os.cpu_count()
        assert record["wall_s"] > 0 and len(record["sessions"]) == 1
    # another seed, other numbers
    a, b = (r["loss"] for r in tasks["runs"] if (r["task"], r["kind"]) == ("copy", "alibi"))
    assert a != b


def test_two_processes_give_the_same_record(tiny_run, tmp_path):
    designs, records, _ = tiny_run
    two = R.run(designs, cells=tmp_path / "cells", records=None, jobs=2, progress=False)
    for name in records:
        assert strip_times(two[name]) == strip_times(records[name])


def test_a_stopped_run_resumes_where_it_stopped(tiny_run, tmp_path):
    designs, records, _ = tiny_run
    cells = tmp_path / "cells"
    first = R.run(designs, cells=cells, records=None, jobs=1, progress=False, max_cells=5)
    assert first == {"tasks": None, "text": None}
    done = {p: p.stat().st_mtime_ns for p in cells.rglob("*.json") if p.name != "sessions.json"}
    assert len(done) == 5
    again = R.run(designs, cells=cells, records=None, jobs=1, progress=False)
    for path, mtime in done.items():
        assert path.stat().st_mtime_ns == mtime  # not run again
    for name in records:
        assert strip_times(again[name]) == strip_times(records[name])
    assert [s["cells_run"] for s in again["tasks"]["sessions"]] == [5, 16 + 2 - 5]


def test_cells_of_other_settings_are_refused(tiny_run, tmp_path):
    designs, _, _ = tiny_run
    cells = tmp_path / "cells"
    R.run(designs[1:], cells=cells, records=None, jobs=1, progress=False, max_cells=1)
    changed = copy.deepcopy(designs[1]) | {"steps": 5}
    with pytest.raises(ValueError, match="made with other settings"):
        R.run([changed], cells=cells, records=None, jobs=1, progress=False)


def _cells_run(cells: Path) -> int:
    """Cells the running session has counted (0 until its file exists)."""
    try:
        return json.loads((cells / "sessions.json").read_text())[-1]["cells_run"]
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def test_a_killed_run_resumes_from_its_files(tiny_run, tmp_path):
    designs, records, _corpus_dir = tiny_run
    tasks, _ = designs
    cells = tmp_path / "cells"
    sets = [
        f"tasks.{k}={json.dumps(tasks[k])}"
        for k in (
            "lr_sweep",
            "steps",
            "warmup",
            "check_every",
            "log_every",
            "batch_size",
            "n_validation",
            "n_eval",
            "finetune_steps",
            "rope_rows",
            "L",
            "factors",
            "dim",
        )
    ]
    argv = [
        "--experiments",
        "tasks",
        "--tasks",
        "copy",
        "prefix",
        "--kinds",
        "rope",
        "alibi",
        "--seeds",
        "2",
        "--cells",
        str(cells),
        "--records",
        str(tmp_path),
        "--quiet",
    ]
    for s in sets:
        argv += ["--set", s]
    command = [sys.executable, "-m", "posenc_lab.extrapolation", *argv]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    # Kill once the session file counts a finished cell. A cell's file is
    # written before the count, so the kill may fall between the two: the
    # killed session counts the cells it stored, or one fewer.
    while _cells_run(cells) < 1:
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "no cell finished in 10 minutes"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    stored = len(list((cells / "tasks").glob("*.json")))
    assert 1 <= stored < 16
    assert main(argv) == 0
    record = json.loads((tmp_path / "extrapolation-tasks.json").read_text())
    assert strip_times(record) == strip_times(records["tasks"])
    total = len(list((cells / "tasks").glob("*.json")))
    killed, resumed = (s["cells_run"] for s in record["sessions"])
    assert stored - 1 <= killed <= stored
    assert resumed == total - stored  # nothing stored by the killed run is run again
    assert record["command"].startswith("python -m posenc_lab.extrapolation --experiments tasks")


def test_the_plan_and_the_cli(capsys):
    assert main(["--plan", "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "tasks: 180 cells" in out and "text: 18 cells" in out
    with pytest.raises(SystemExit):
        main(["--jobs", "0"])
    with pytest.raises(SystemExit, match="not a setting"):
        main(["--plan", "--set", "tasks.step=3"])


def test_the_choice_of_rate():
    def cell(*losses):
        return {"curve": {"loss": list(losses)}}

    assert T.choose_lr({1e-3: cell(2.0, 0.5), 3e-3: cell(1.0, 0.4)}) == 3e-3
    assert T.choose_lr({3e-3: cell(0.5), 1e-3: cell(0.5)}) == 1e-3  # a tie: the lower rate
    # a single rate (the stored design): no sweep, every reported cell at that rate
    cells = R.plan(T.SETTINGS)
    assert not any(c.sweep for c in cells) and {c.lr for c in cells} == {3e-3}
    assert len(cells) == 3 * 12 * 5
    two = copy.deepcopy(T.SETTINGS) | {"lr_sweep": [1e-3, 3e-3]}
    assert sum(c.sweep for c in R.plan(two)) == 3 * 12 * 2


# ------------------------------------------------------ the stored records

#: The CI slice (lab/README.md, "The CI slice"): about 50 s of one core in all.
#: REPLAYS re-run the first steps of stored cells, the same model, data, schedule
#: and checks, and compare the training loss (every 10 steps) and the learning
#: curve's checks with the record's: ALiBi and RoPE on text (the corpus, the
#: byte-level model, the validation windows at L), RoPE on prefix (the new task).
#: WHOLE re-runs one whole cell, training and evaluation: T5 with Hugging Face's
#: draw on recall (the ablation, the task evaluation at L .. 8L with the window and
#: the clip), the one cell cheap enough (1,500 steps of the task model).
REPLAYS = [
    ("text", "text", "alibi", 0, 110),
    ("text", "text", "rope", 0, 110),
    ("tasks", "prefix", "rope", 0, 300),
]
WHOLE = [("tasks", "recall", "t5-hf", 0)]

#: How far a re-run may drift from the record. On the CPU that made the record (same
#: processor and vector extensions), one thread and deterministic algorithms give the
#: same numbers: everything is compared to SAME_CPU_ATOL (the record rounds to 6
#: decimals). On another CPU the float reductions run in another order, which was
#: measured on the Intel Xeon of the pilot by re-running with 2 threads instead of 1,
#: and with torch's AVX2 and plain C++ kernels instead of AVX-512:
#: - the replays: the first 110 text steps did not move (to 6 decimals), the first
#:   300 prefix steps by at most 1e-6; REPLAY_ATOL is a hundred times that, and a
#:   hundredth of what a rate 1 % higher moves (0.010 on text, 0.013 on prefix);
#: - a whole text cell (2 threads): ALiBi moved by at most 1e-4 anywhere (the
#:   4-decimal rounding of the losses by position), so text is compared to TEXT_ATOL;
#: - a whole task cell (2 threads): RoPE on prefix (4,000 steps) moved its training
#:   loss (means of 10 steps) by up to 0.012, single fine-tune steps by up to 0.31,
#:   its accuracies at L by 0.001 and beyond L by up to 0.062 (YaRN at 8L: 0.68
#:   against 0.62) and its losses at 8L by up to 0.46: a long training amplifies a
#:   rounding difference, as a different seed would, most of all far beyond L where
#:   the models fail. So a task cell from another CPU is compared on what the
#:   chapters' verdicts read, the mean accuracies, within twice the drift seen (at L
#:   0.01, beyond L 0.15), and on its final training loss and validation accuracy.
SAME_CPU_ATOL = 2e-6
REPLAY_ATOL = 1e-4
TEXT_ATOL = 1e-3
TASK_ACCURACY_ATOL = {"at L": 0.01, "beyond L": 0.15}
TASK_FINAL_LOSS_ATOL = 0.05
EXACT = ("experiment", "task", "kind", "seed", "lr", "settings_sha256")


def _same_cpu(record: dict) -> bool:
    here = R._machine()
    return all(record["machine"].get(k) == here[k] for k in ("processor", "isa"))


def _drift(fresh, stored, atol: float, path: str = "") -> list[str]:
    """Where ``fresh`` differs from ``stored`` by more than ``atol``."""
    if isinstance(stored, dict):
        if set(fresh) != set(stored):
            return [f"{path}: keys {sorted(set(fresh) ^ set(stored))} differ"]
        return [d for k in stored for d in _drift(fresh[k], stored[k], atol, f"{path}/{k}")]
    if isinstance(stored, list):
        if len(fresh) != len(stored):
            return [f"{path}: {len(fresh)} values, the record has {len(stored)}"]
        return [
            d
            for i, (a, b) in enumerate(zip(fresh, stored, strict=True))
            for d in _drift(a, b, atol, f"{path}[{i}]")
        ]
    if stored is None or fresh is None or isinstance(stored, str):
        return [] if fresh == stored else [f"{path}: {fresh!r} != {stored!r}"]
    return (
        []
        if math.isclose(fresh, stored, rel_tol=0, abs_tol=atol)
        else [f"{path}: {fresh} vs {stored}"]
    )


def test_drift_finds_what_it_must():
    stored = {"loss": [1.0, 2.0], "rows": {"a": {"accuracy": {"16": 0.5}}}, "kind": "rope"}
    assert _drift(copy.deepcopy(stored), stored, 1e-3) == []
    moved = copy.deepcopy(stored)
    moved["loss"][1] += 2e-3
    moved["loss"][0] += 5e-4
    moved["kind"] = "alibi"
    assert _drift(moved, stored, 1e-3) == ["/loss[1]: 2.002 vs 2.0", "/kind: 'alibi' != 'rope'"]


def _stored_run(record: dict, task: str, kind: str, seed: int) -> dict:
    return next(
        r for r in record["runs"] if (r["task"], r["kind"], r["seed"]) == (task, kind, seed)
    )


def record_mismatch(record: dict, settings: dict) -> list[str]:
    """Where ``record`` is not what the code makes: its settings, its cells' fingerprint, corpus."""
    found = [] if record["settings"] == settings else ["settings differ from the code's"]
    sha = R.settings_sha256(settings)
    found += [
        f"{r['task']}-{r['kind']}-seed{r['seed']}: settings_sha256 {r['settings_sha256']!r}"
        for r in record["runs"]
        if r["settings_sha256"] != sha
    ]
    if record["experiment"] == "text":
        corpus = X.corpus_for(settings).describe()
        found += _drift(record["corpus"], corpus, 0, "corpus")
    return found


def replay_drift(record: dict, task: str, kind: str, seed: int, steps: int) -> list[str]:
    """Replay the first ``steps`` steps of a cell of ``record``; where they drift from it."""
    experiment, settings = record["experiment"], record["settings"]
    stored = _stored_run(record, task, kind, seed)
    fresh = R.replay(R.Cell(experiment, task, kind, seed, stored["lr"]), settings, steps)
    checks = sum(step <= steps for step in stored["curve"]["step"])
    expected = {
        "loss": stored["loss"][: steps // settings["log_every"]],
        "curve": {k: v[:checks] for k, v in stored["curve"].items() if checks or k == "step"},
    }
    atol = SAME_CPU_ATOL if _same_cpu(record) else REPLAY_ATOL
    return _drift(fresh, expected, atol)


def slice_drift(record: dict, task: str, kind: str, seed: int, cells: Path) -> list[str]:
    """Re-run one whole cell of ``record`` and say where it drifts beyond the tolerances."""
    experiment, settings = record["experiment"], record["settings"]
    stored = _stored_run(record, task, kind, seed)
    stored = {k: v for k, v in stored.items() if k not in ("wall_s", "cpu_s")}
    fresh = R.run_cell(R.Cell(experiment, task, kind, seed, stored["lr"]), settings, cells)
    fresh = {k: v for k, v in fresh.items() if k not in ("wall_s", "cpu_s")}
    exact = [f"{k}: {fresh[k]!r} != {stored[k]!r}" for k in EXACT if fresh[k] != stored[k]]
    if exact or set(fresh) != set(stored):
        return exact or [f"keys {sorted(set(fresh) ^ set(stored))} differ"]
    if _same_cpu(record) or experiment == "text":
        return _drift(fresh, stored, SAME_CPU_ATOL if _same_cpu(record) else TEXT_ATOL)
    L, drift = str(settings["L"]), []
    for row, result in stored["rows"].items():
        for N, accuracy in result["accuracy"].items():
            atol = TASK_ACCURACY_ATOL["at L" if N == L else "beyond L"]
            drift += _drift(fresh["rows"][row]["accuracy"][N], accuracy, atol, f"{row}/{N}")
    drift += _drift(fresh["loss"][-1], stored["loss"][-1], TASK_FINAL_LOSS_ATOL, "loss")
    final = fresh["curve"]["accuracy"][-1], stored["curve"]["accuracy"][-1]
    return drift + _drift(*final, TASK_ACCURACY_ATOL["at L"], "curve/accuracy")


def test_the_slice_check_on_a_tiny_record(tiny_run, tmp_path):
    designs, records, _ = tiny_run
    tasks, text = copy.deepcopy(records["tasks"]), copy.deepcopy(records["text"])
    assert record_mismatch(tasks, designs[0]) == record_mismatch(text, designs[1]) == []
    # replays: copy has 6 steps (logged every 2, checked at 3 and 6), text 4 (checked at 2, 4)
    assert replay_drift(tasks, "copy", "rope", 0, 4) == []  # this CPU made it
    assert replay_drift(text, "text", "fire", 0, 3) == []
    assert len(R.replay(R.Cell("text", "text", "fire", 0, 2e-3), designs[1], 3)["loss"]) == 1
    assert slice_drift(tasks, "prefix", "rope", 0, tmp_path) == []
    assert slice_drift(text, "text", "fire", 0, tmp_path) == []
    run = _stored_run(tasks, "copy", "rope", 0)
    run["loss"][1] += 1e-5  # more than the rounding: found on the same CPU
    found = replay_drift(tasks, "copy", "rope", 0, 4)
    assert len(found) == 1 and found[0].startswith("/loss[1]: ")
    assert replay_drift(tasks, "copy", "rope", 0, 2) == []  # loss[1] is not replayed
    run["curve"]["accuracy"][0] += 0.002  # the check at step 3
    assert replay_drift(tasks, "copy", "rope", 0, 4)[1].startswith("/curve/accuracy[0]: ")
    # from another CPU, within the measured tolerance, not beyond
    tasks["machine"]["processor"] = "another CPU"
    run["loss"][1] -= 1e-5
    run["curve"]["accuracy"][0] -= 0.002 - REPLAY_ATOL / 2
    assert replay_drift(tasks, "copy", "rope", 0, 4) == []
    run["loss"][0] += 2 * REPLAY_ATOL
    assert replay_drift(tasks, "copy", "rope", 0, 4)[0].startswith("/loss[0]: ")
    # a whole task cell from another CPU is compared on its accuracies and final numbers
    whole = _stored_run(tasks, "prefix", "rope", 0)
    assert slice_drift(tasks, "prefix", "rope", 0, tmp_path) == []
    whole["rows"]["rope+pi+ft"]["accuracy"]["16"] += 0.2
    assert slice_drift(tasks, "prefix", "rope", 0, tmp_path)[0].startswith("rope+pi+ft/16: ")
    # a record made with other settings, or on another corpus, is found
    whole["settings_sha256"] = "made with other settings"
    assert record_mismatch(tasks, designs[0]) == [
        "prefix-rope-seed0: settings_sha256 'made with other settings'"
    ]
    assert slice_drift(tasks, "prefix", "rope", 0, tmp_path) == [
        f"settings_sha256: {R.settings_sha256(tasks['settings'])!r} != 'made with other settings'"
    ]
    changed = record_mismatch(text, designs[1] | {"steps": 5})
    assert changed[0] == "settings differ from the code's"
    assert len(changed) == 1 + len(text["runs"])  # and every cell's fingerprint
    text["corpus"]["sha256"] = "0" * 64
    assert record_mismatch(text, designs[1]) == [
        f"corpus/sha256: {'0' * 64!r} != {C.build_corpus(text['settings']['corpus']).sha256!r}"
    ]


def _stored(experiment: str) -> dict:
    path = RECORDS / f"extrapolation-{experiment}.json"
    if not path.is_file():
        pytest.skip(
            f"no stored record {path.name} yet: the full run (`make extrapolation`, "
            "lab/README.md) is made on an idle machine; until then there is nothing to compare"
        )
    return json.loads(path.read_text())


@pytest.mark.parametrize("experiment", ["tasks", "text"])
def test_the_records_are_what_the_code_makes(experiment):
    record = _stored(experiment)
    assert record_mismatch(record, R.EXPERIMENTS[experiment]) == []


@pytest.mark.parametrize(("experiment", "task", "kind", "seed", "steps"), REPLAYS)
def test_the_first_steps_reproduce_the_record(experiment, task, kind, seed, steps):
    drift = replay_drift(_stored(experiment), task, kind, seed, steps)
    assert drift == [], drift[:10]


@pytest.mark.parametrize(("experiment", "task", "kind", "seed"), WHOLE)
def test_a_whole_cell_reproduces_the_record(experiment, task, kind, seed, tmp_path):
    drift = slice_drift(_stored(experiment), task, kind, seed, tmp_path)
    assert drift == [], drift[:10]


#: The re-run of seed 0 with YaRN as the paper writes it (lab/README.md, "YaRN as the
#: paper writes it"): RoPE's cells with the rows "", "+pi", "+yarn" and "+yarn-paper".
YARN_PAPER_ROWS = ["", "+pi", "+yarn", "+yarn-paper"]


@pytest.mark.parametrize("experiment", ["tasks", "text"])
def test_the_yarn_paper_rerun_is_the_records_seed_0(experiment):
    """Its settings are the design's but for the part run; its shared rows are the record's."""
    rerun = json.loads((RECORDS / f"yarn-paper-{experiment}.json").read_text())
    design = R.EXPERIMENTS[experiment]
    part = {"kinds": ["rope"], "seeds": [0], "rope_rows": YARN_PAPER_ROWS}
    if experiment == "tasks":
        part["tasks"] = ["copy", "prefix"]
    assert rerun["settings"] == design | part
    assert "uncommitted" not in rerun["git_commit"]
    stored = _stored(experiment)
    for run in rerun["runs"]:
        same = _stored_run(stored, run["task"], "rope", 0)
        assert run["loss"] == same["loss"] and run["curve"] == same["curve"]
        for row in ("rope", "rope+pi", "rope+yarn"):
            drift = _drift(run["rows"][row], same["rows"][row], SAME_CPU_ATOL)
            assert drift == [], drift[:10]
        assert set(run["rows"]) == {f"rope{s}" for s in YARN_PAPER_ROWS}
