"""The length-generalisation experiment: train toy models short, test them long.

``python -m posenc_lab.experiments`` trains :class:`posenc_lab.toy.ToyTransformer`
models with every positional encoding, on two tasks, from several seeds,
and writes one JSON record (see :func:`run`),
``posenc_lab/records/length-generalisation.json``. No chapter reads it now
(chapter *Which encodings extrapolate?* reads version 2's record, made by
:mod:`posenc_lab.extrapolation`); the tests re-run a slice of it and match
it exactly.

The design, for each task and seed:

- one model per *kind* (:data:`KINDS`): every encoding of
  :data:`posenc_lab.toy.ENCODINGS`, plus RoPE trained on randomised positions
  (Ruoss et al. 2023: a sorted random subset of ``0 .. 8L - 1`` for every
  batch). Training stops as soon as a fixed validation set at length ``L``
  is predicted with accuracy at least ``target_accuracy`` (checked every
  ``check_every`` steps), or after ``max_steps``; the record keeps the step
  and the accuracy, so a model that never learned the task shows it;
- the trained RoPE model is evaluated as it is, with position interpolation
  and with YaRN (factor ``N / L`` at length ``N``), and again after a short
  fine-tune at ``2L`` (Chen et al. 2023, scaled down): without scaling,
  with PI and with YaRN (factor 2 during the fine-tune, ``max(2, N / L)``
  at evaluation);
- every model is evaluated at ``L, 2L, 4L, 8L`` on one fixed set of
  sequences per task (the first ``N`` tokens of each): the accuracy at
  every position and its mean over the scored positions;
- the relative encodings (:data:`posenc_lab.toy.RELATIVE`) are evaluated once
  more at ``8L`` with a sliding window of ``L`` keys and with every distance
  clipped to ``L - 1`` (all keys visible), which separates distances never
  seen in training from attention spread over more keys.

Every run is deterministic on a CPU: ``torch.manual_seed(seed)`` before the
model is built, a data generator seeded with ``seed``, one thread,
``torch.use_deterministic_algorithms(True)``. Runs are independent, so
``--jobs`` runs them in parallel processes without changing a number.
Another CPU model may round differently (other SIMD kernels, other
reduction orders): its losses differ in the sixth decimal, and the slice
test in ``tests/lab/test_experiments.py`` allows for that.

Two choices keep the seeds independent and every encoding doing what its
paper describes:

- the short fine-tune of seed ``k`` draws its batches from a stream of its
  own, seeded with ``finetune_seed + k`` (far from every pre-training,
  validation and evaluation seed), so it never sees another seed's
  pre-training batches (the record of session 3 reused seed ``k + 1``'s);
- ``"fire"`` starts with the threshold ``fire_threshold = L``, so on every
  evaluated length beyond ``L`` its progressive interpolation (each query
  divides by the log of its own position) acts, as in Li et al. (2024);
  each run records the threshold it learned (``fire_threshold``).

:func:`t_interval` and :func:`paired_difference` are the statistics the
chapter quotes: means over seeds with Student-t 95 % intervals, and
differences between two rows paired by seed (defined in
:mod:`posenc_lab.stats`, which version 2, :mod:`posenc_lab.extrapolation`,
shares; re-exported here).
"""

from __future__ import annotations

import copy
import json
import math
import os
import platform
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from posenc.randomized import random_positions
from posenc.scaling import LinearScaling, YarnScaling
from posenc_lab import record_path
from posenc_lab.stats import paired_difference, t_interval, t_quantile
from posenc_lab.toy import (
    RELATIVE,
    ToyTransformer,
    accuracy_by_position,
    periodic_batch,
    recall_batch,
)

__all__ = [
    "KINDS",
    "RECORD",
    "ROWS",
    "SETTINGS",
    "TASKS",
    "load_record",
    "paired_difference",
    "run",
    "run_one",
    "summary",
    "t_interval",
    "t_quantile",
]

#: The stored record that the chapter reads.
RECORD = record_path("length-generalisation")

#: The two tasks: the periodic copy (the answer a fixed distance back) and
#: associative recall (the answer in the first tokens, found by content).
TASKS = ("copy", "recall")

#: The models trained for each task and seed.
KINDS = (
    "nope",
    "sinusoidal",
    "learned",
    "rope",
    "alibi",
    "t5",
    "kerple",
    "fire",
    "cope",
    "random",
)

#: The rows of the results: a trained model, possibly scaled or fine-tuned.
ROWS = (
    "nope",
    "sinusoidal",
    "learned",
    "rope",
    "rope+pi",
    "rope+yarn",
    "rope+ft",
    "rope+pi+ft",
    "rope+yarn+ft",
    "alibi",
    "t5",
    "kerple",
    "fire",
    "cope",
    "random",
)

#: The settings of the stored record (scaled to a shared two-core machine).
SETTINGS = {
    "L": 16,
    "factors": [1, 2, 4, 8],
    "dim": 32,
    "n_heads": 4,
    "n_layers": 2,
    "batch_size": 32,
    "lr": 3e-3,
    "weight_decay": 0.01,
    "warmup": 20,
    "max_steps": 600,
    "check_every": 50,
    "target_accuracy": 0.99,
    "n_validation": 64,
    "n_eval": 64,
    "finetune_steps": 50,
    "finetune_lr": 1e-3,
    "finetune_factor": 2,
    "copy": {"period": 4, "vocab_size": 16, "bos": True},
    "recall": {"n_keys": 6, "n_values": 6},
    "fire_threshold": 16.0,
    "eval_seed": 10_000,
    "validation_seed": 20_000,
    "finetune_seed": 30_000,
    "threads": 1,
}


# ------------------------------------------------------------------ tasks


def vocab_size(task: str, settings: dict) -> int:
    """Token ids the model needs for ``task``."""
    if task == "copy":
        return settings["copy"]["vocab_size"] + int(settings["copy"]["bos"])
    return settings["recall"]["n_keys"] * (settings["recall"]["n_values"] + 1)


def batch(
    task: str, batch_size: int, seq_len: int, settings: dict, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets ``[b, s]`` of ``task`` (:func:`periodic_batch` or :func:`recall_batch`)."""
    if task == "copy":
        return periodic_batch(batch_size, seq_len, generator=generator, **settings["copy"])
    if task == "recall":
        return recall_batch(batch_size, seq_len, generator=generator, **settings["recall"])
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


# --------------------------------------------------------------- training


def _loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)


def _accuracy(model, inputs, targets, **kwargs) -> float:
    return accuracy_by_position(model, inputs, targets, **kwargs).nanmean().item()


def _train_positions(kind: str, seq_len: int, settings: dict, generator: torch.Generator):
    if kind != "random":
        return None
    longest = settings["L"] * max(settings["factors"])
    return random_positions(seq_len, longest, generator=generator)


def train_until_learned(
    model: ToyTransformer, task: str, kind: str, seed: int, settings: dict
) -> dict:
    """AdamW with a linear warm-up, then a constant rate, until the task is learned at ``L``.

    Returns the losses of every step, the validation accuracy at every check,
    the number of steps taken and whether the target accuracy was reached.
    """
    L = settings["L"]
    generator = torch.Generator().manual_seed(seed)
    val = batch(
        task,
        settings["n_validation"],
        L,
        settings,
        torch.Generator().manual_seed(settings["validation_seed"]),
    )
    val_positions = _train_positions(
        kind, L, settings, torch.Generator().manual_seed(settings["validation_seed"])
    )
    opt = torch.optim.AdamW(
        model.parameters(), lr=settings["lr"], weight_decay=settings["weight_decay"]
    )
    warmup = settings["warmup"]
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup))
    losses, checks, learned = [], [], False
    for step in range(1, settings["max_steps"] + 1):
        model.train()
        inputs, targets = batch(task, settings["batch_size"], L, settings, generator)
        positions = _train_positions(kind, L, settings, generator)
        loss = _loss(model(inputs, positions=positions), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
        losses.append(loss.item())
        if step % settings["check_every"] == 0:
            acc = _accuracy(model, *val, positions=val_positions)
            checks.append(acc)
            if acc >= settings["target_accuracy"]:
                learned = True
                break
    return {"losses": losses, "checks": checks, "steps": len(losses), "learned": learned}


def fine_tune(model: ToyTransformer, task: str, seed: int, settings: dict, scaling) -> list[float]:
    """``finetune_steps`` steps at ``2L`` with ``rope_scaling=scaling``.

    After Chen et al. (2023), scaled down, with these differences from their
    section 3.1: a fresh AdamW with PyTorch's betas (theirs 0.9, 0.95), no
    warm-up (theirs: 20 steps from 10 % of the rate), the run's weight decay
    (theirs 0), the same number of steps with and without scaling (they
    gave direct fine-tuning 10 times PI's steps), and a rate of a third of
    pre-training's (``finetune_lr / lr``; theirs, 2e-5 and 1e-5, is about a
    fifteenth of LLaMA's peak pre-training rates, 3e-4 and 1.5e-4).

    The batches come from a stream of their own, seeded with
    ``finetune_seed + seed``, so that no fine-tune sees batches another
    seed pre-trains on.
    """
    generator = torch.Generator().manual_seed(settings["finetune_seed"] + seed)
    opt = torch.optim.AdamW(
        model.parameters(), lr=settings["finetune_lr"], weight_decay=settings["weight_decay"]
    )
    seq_len = settings["finetune_factor"] * settings["L"]
    losses = []
    model.train()
    for _ in range(settings["finetune_steps"]):
        inputs, targets = batch(task, settings["batch_size"], seq_len, settings, generator)
        loss = _loss(model(inputs, rope_scaling=scaling), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# ------------------------------------------------------------- evaluation


def _scaling(row: str, N: int, settings: dict):
    """The RoPE scaling of ``row`` at length ``N``, or ``None``."""
    L = settings["L"]
    if "+pi" not in row and "+yarn" not in row:
        return None
    factor = N / L if not row.endswith("+ft") else max(settings["finetune_factor"], N / L)
    if factor <= 1:
        return None
    if "+pi" in row:
        return LinearScaling(float(factor))
    return YarnScaling(float(factor), original_max_positions=L)


def _round(values: Iterable[float]) -> list[float | None]:
    return [None if math.isnan(v) else round(v, 6) for v in values]


def evaluate(model: ToyTransformer, row: str, task: str, settings: dict) -> dict:
    """Mean accuracy and accuracy by position at every length of ``settings``."""
    L = settings["L"]
    lengths = [f * L for f in settings["factors"]]
    inputs, targets = batch(
        task,
        settings["n_eval"],
        max(lengths),
        settings,
        torch.Generator().manual_seed(settings["eval_seed"]),
    )
    result = {"mean": {}, "by_position": {}}
    for N in lengths:
        if row == "learned" and N > L:
            continue  # the table has no row for position L
        positions = None
        if row == "random":
            generator = torch.Generator().manual_seed(settings["eval_seed"] + N)
            positions = random_positions(N, max(lengths), generator=generator)
        acc = accuracy_by_position(
            model,
            inputs[:, :N],
            targets[:, :N],
            rope_scaling=_scaling(row, N, settings),
            positions=positions,
        )
        result["mean"][str(N)] = round(acc.nanmean().item(), 6)
        result["by_position"][str(N)] = _round(acc.tolist())
    if model.encoding in RELATIVE and "+" not in row and row != "random":
        N = max(lengths)
        for condition in ("window", "clip"):
            acc = accuracy_by_position(model, inputs[:, :N], targets[:, :N], **{condition: L})
            result[condition] = _round(acc.tolist())
    return result


# -------------------------------------------------------------------- runs


def _setup(threads: int) -> None:
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


def run_one(task: str, kind: str, seed: int, settings: dict | None = None) -> dict:
    """Train one model and evaluate every row that comes from it; a JSON-ready dict."""
    settings = SETTINGS if settings is None else settings
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    _setup(settings["threads"])
    wall = time.perf_counter()
    L = settings["L"]
    encoding = "rope" if kind == "random" else kind
    torch.manual_seed(seed)
    model = ToyTransformer(
        vocab_size(task, settings),
        encoding,
        dim=settings["dim"],
        n_heads=settings["n_heads"],
        n_layers=settings["n_layers"],
        max_len=L if kind == "learned" else L * max(settings["factors"]) + 1,
        fire_threshold=settings["fire_threshold"],
    )
    training = train_until_learned(model, task, kind, seed, settings)
    rows = {kind: evaluate(model, kind, task, settings)}
    finetune = {}
    if kind == "rope":
        for row in ("rope+pi", "rope+yarn"):
            rows[row] = evaluate(model, row, task, settings)
        factor = float(settings["finetune_factor"])
        for row, scaling in (
            ("rope+ft", None),
            ("rope+pi+ft", LinearScaling(factor)),
            ("rope+yarn+ft", YarnScaling(factor, original_max_positions=L)),
        ):
            tuned = copy.deepcopy(model)
            finetune[row] = _round(fine_tune(tuned, task, seed, settings, scaling))
            rows[row] = evaluate(tuned, row, task, settings)
    extra = {}
    if kind == "fire":  # the threshold it learned, which decides where interpolation starts
        extra["fire_threshold"] = round(model.fire_bias.threshold.item(), 6)
    return {
        "task": task,
        "kind": kind,
        "seed": seed,
        **extra,
        "steps": training["steps"],
        "learned": training["learned"],
        "checks": _round(training["checks"]),
        "losses": _round(training["losses"]),
        "finetune_losses": finetune,
        "rows": rows,
        "wall_s": round(time.perf_counter() - wall, 2),
    }


def _job(args: tuple) -> dict:
    return run_one(*args)


class _Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, stream=sys.stderr) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self.start = time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        filled = round(30 * self.done / self.total)
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
            f"{elapsed:5.0f} s, ~{eta:4.0f} s left  {label:24s}"
        )
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def run(
    tasks: Sequence[str] = TASKS,
    kinds: Sequence[str] = KINDS,
    seeds: Sequence[int] = range(5),
    *,
    settings: dict | None = None,
    jobs: int = 1,
    progress: bool = True,
) -> dict:
    """Every ``task x kind x seed`` of :func:`run_one`, with the context of the run.

    ``jobs > 1`` runs them in that many processes (one thread each); the
    numbers do not depend on it.
    """
    settings = SETTINGS if settings is None else settings
    work = [(t, k, s, settings) for t in tasks for k in kinds for s in seeds]
    # the slow kinds first, so that the parallel processes end together
    work.sort(key=lambda w: (w[1] not in ("rope", "nope", "random", "cope"), w[1]))
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    wall, cpu = time.perf_counter(), time.process_time()
    bar = _Progress(len(work)) if progress else None
    runs = []
    if jobs == 1:
        for args in work:
            runs.append(run_one(*args))
            if bar:
                bar.step(f"{args[0]} {args[1]} {args[2]}")
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            for result in pool.imap_unordered(_job, work):
                runs.append(result)
                if bar:
                    bar.step(f"{result['task']} {result['kind']} {result['seed']}")
    runs.sort(key=lambda r: (TASKS.index(r["task"]), KINDS.index(r["kind"]), r["seed"]))
    return {
        "settings": settings,
        "tasks": list(tasks),
        "kinds": list(kinds),
        "seeds": list(seeds),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "jobs": jobs,
        "started": started,
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s_main": round(time.process_time() - cpu, 1),
        "run_wall_s_total": round(sum(r["wall_s"] for r in runs), 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "runs": runs,
    }


# -------------------------------------------------------------- statistics


def load_record(path: str | Path = RECORD) -> dict:
    """The stored record (JSON) as a dict."""
    return json.loads(Path(path).read_text())


def values(record: dict, task: str, row: str, N: int) -> list[float]:
    """The mean accuracy of ``row`` at length ``N`` for each seed, in seed order."""
    kind = row.split("+")[0] if row.startswith("rope") else row
    out = []
    for r in record["runs"]:
        if r["task"] == task and r["kind"] == kind and str(N) in r["rows"][row]["mean"]:
            out.append(r["rows"][row]["mean"][str(N)])
    return out


def summary(record: dict, task: str) -> dict:
    """``{(row, N): (mean, low, high)}`` for every row and length of ``task``."""
    L, factors = record["settings"]["L"], record["settings"]["factors"]
    table = {}
    for row in ROWS:
        for N in (f * L for f in factors):
            xs = values(record, task, row, N)
            if len(xs) >= 2:
                table[row, N] = t_interval(xs)
    return table
