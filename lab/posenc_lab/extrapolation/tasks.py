"""The task experiment: three synthetic tasks, every kind trained for the same number of steps.

The tasks (token generators in :mod:`posenc_lab.toy`):

- ``"copy"``: :func:`~posenc_lab.toy.periodic_batch`, the answer a fixed
  distance back (the period), at any length;
- ``"recall"``: :func:`~posenc_lab.toy.recall_batch`, the answer in the
  first tokens, found by content, however far back;
- ``"prefix"``: :func:`~posenc_lab.toy.prefix_batch`, a prefix copied after
  a separator: the answer is ``m`` places back, found by position. Training
  draws ``m`` from ``1 .. L / 2``; the evaluation at length ``N`` takes
  ``m = N / 2``, so the offset grows with the length.

For each task, kind and seed (:func:`run_cell`): one model, trained for
``steps`` steps at ``L`` (no early stopping; the learning curve on a fixed
validation set at ``L`` is kept), then every row of the kind
(:func:`posenc_lab.extrapolation.models.rope_rows`) evaluated at every
length ``factor * L``: accuracy and loss, overall and by position. The
relative kinds are also evaluated at the longest length with a window of
``L`` keys and with distances clipped to ``L - 1``, as in version 1.

With two or more rates in ``lr_sweep``, the rate of each task and kind
comes from a sweep on a seed of its own (``sweep_seed``), not one of the
reported seeds: the rate with the lowest validation loss at ``L`` at the
end of training (:func:`choose_lr`). The stored design uses one rate,
3e-3, for every task and kind: in the pilot's two-point comparison (1e-3
and 3e-3 on ``sweep_seed``, lab/README.md) 3e-3 reached the target
accuracy as soon as or sooner than 1e-3 in every case, so the time a
sweep would cost went to training every cell longer. The number of steps
is fixed per task (``steps``), the same for every kind.
"""

from __future__ import annotations

import torch

from posenc_lab.extrapolation.models import (
    ROPE_ROWS,
    build_model,
    fine_tune,
    llm_matched_base,
    loss_of,
    rope_rows,
    rope_scaling,
    round_list,
    train,
    train_positions,
)
from posenc_lab.toy import (
    RELATIVE,
    periodic_batch,
    prefix_batch,
    recall_batch,
)

__all__ = ["SETTINGS", "TASKS", "batch", "choose_lr", "run_cell", "steps_of", "vocab_size"]

#: The tasks, in the record's order.
TASKS = ("copy", "recall", "prefix")

#: The design of the stored record.
SETTINGS = {
    "experiment": "tasks",
    "tasks": list(TASKS),
    "kinds": [
        "nope",
        "sinusoidal",
        "learned",
        "rope",
        "rope-llm",
        "alibi",
        "t5",
        "t5-hf",
        "kerple",
        "fire",
        "cope",
        "random",
    ],
    "seeds": [0, 1, 2, 3, 4],
    "L": 16,
    "factors": [1, 2, 4, 8],
    "dim": 64,
    "n_heads": 4,  # head size 16: 8 RoPE pairs; ALiBi's slopes 1/4 .. 1/256
    "n_layers": 2,
    "rope_llm_base": llm_matched_base(16),
    "batch_size": 32,
    # per task, the same for every kind: recall is learned in a few hundred steps
    "steps": {"copy": 3500, "recall": 1500, "prefix": 3500},
    "warmup": 100,
    "min_lr_ratio": 0.1,
    "weight_decay": 0.01,
    "lr_sweep": [3e-3],  # one rate: no sweep (see the module's docstring)
    "sweep_seed": 100,
    "log_every": 10,
    "check_every": 100,
    "n_validation": 128,
    "n_eval": 128,
    "rope_rows": list(ROPE_ROWS),
    "finetune_steps": 50,
    "finetune_lr": 1e-3,
    "finetune_factor": 2,
    "copy": {"period": 4, "vocab_size": 16, "bos": True},
    "recall": {"n_keys": 6, "n_values": 6},
    "prefix": {"vocab_size": 16},
    "eval_seed": 10_000,
    "validation_seed": 20_000,
    "finetune_seed": 30_000,
    "threads": 1,
}


def vocab_size(task: str, settings: dict) -> int:
    """Token ids the model needs for ``task``."""
    if task == "copy":
        return settings["copy"]["vocab_size"] + int(settings["copy"]["bos"])
    if task == "recall":
        return settings["recall"]["n_keys"] * (settings["recall"]["n_values"] + 1)
    if task == "prefix":
        return settings["prefix"]["vocab_size"] + 1
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def batch(
    task: str,
    batch_size: int,
    seq_len: int,
    settings: dict,
    generator: torch.Generator,
    *,
    evaluation: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets ``[b, s]`` of ``task``; ``evaluation`` fixes the prefix at ``s // 2``."""
    if task == "copy":
        return periodic_batch(batch_size, seq_len, generator=generator, **settings["copy"])
    if task == "recall":
        return recall_batch(batch_size, seq_len, generator=generator, **settings["recall"])
    if task == "prefix":
        prefix = seq_len // 2 if evaluation else None
        return prefix_batch(
            batch_size, seq_len, prefix=prefix, generator=generator, **settings["prefix"]
        )
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


@torch.no_grad()
def _measure(model, inputs, targets, **options) -> tuple[torch.Tensor, float]:
    """Accuracy by position ``[s]`` (as :func:`~posenc_lab.toy.accuracy_by_position`, ``nan``
    where nothing is scored) and the mean loss over the scored targets, from one call."""
    model.eval()
    logits = model(inputs, **options)
    known = targets >= 0
    correct = ((logits.argmax(-1) == targets) & known).sum(0)
    return correct / known.sum(0), loss_of(logits, targets).item()


def _eval_sets(task: str, settings: dict) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """The evaluation inputs and targets at every length.

    Copy and recall: the first ``N`` tokens of one set at the longest length
    (a causal model predicts them as it would at length ``N``). Prefix: a
    set of its own at every length (its prefix is half the length).
    """
    L, n = settings["L"], settings["n_eval"]
    lengths = [f * L for f in settings["factors"]]
    if task == "prefix":
        return {
            N: batch(
                task,
                n,
                N,
                settings,
                torch.Generator().manual_seed(settings["eval_seed"] + N),
                evaluation=True,
            )
            for N in lengths
        }
    generator = torch.Generator().manual_seed(settings["eval_seed"])
    inputs, targets = batch(task, n, max(lengths), settings, generator, evaluation=True)
    return {N: (inputs[:, :N], targets[:, :N]) for N in lengths}


def evaluate(model, row: str, task: str, settings: dict, sets: dict) -> dict:
    """Accuracy (mean and by position) and loss of ``row`` at every length."""
    L = settings["L"]
    longest = max(sets)
    result: dict = {"accuracy": {}, "loss": {}, "by_position": {}}
    for N, (inputs, targets) in sets.items():
        if row == "learned" and N > L:
            continue  # the table has no row for position L
        positions = None
        if row == "random":
            generator = torch.Generator().manual_seed(settings["eval_seed"] + N)
            positions = train_positions("random", N, settings, generator)
        accuracy, loss = _measure(
            model, inputs, targets, rope_scaling=rope_scaling(row, N, settings), positions=positions
        )
        result["accuracy"][str(N)] = round(accuracy.nanmean().item(), 6)
        result["loss"][str(N)] = round(loss, 6)
        result["by_position"][str(N)] = round_list(accuracy.tolist(), 4)
    if model.encoding in RELATIVE and "+" not in row and row != "random":
        inputs, targets = sets[longest]
        for condition in ("window", "clip"):
            accuracy, _ = _measure(model, inputs, targets, **{condition: L})
            result[condition] = round_list(accuracy.tolist(), 4)
    return result


def steps_of(task: str, settings: dict) -> int:
    """Training steps of ``task``: ``steps``, a number or ``{task: number}``."""
    steps = settings["steps"]
    return steps[task] if isinstance(steps, dict) else steps


def choose_lr(sweep: dict[float, dict]) -> float:
    """The rate of ``{lr: cell}`` whose final validation loss at ``L`` is lowest (ties: lowest lr)."""
    return min(sorted(sweep), key=lambda lr: sweep[lr]["curve"]["loss"][-1])


def run_cell(
    task: str, kind: str, seed: int, lr: float, settings: dict, stop_after: int | None = None
) -> dict:
    """Train one model of ``kind`` on ``task`` and evaluate every row; a JSON-ready dict.

    ``stop_after``: only the first steps of the training, without the
    evaluation (:func:`posenc_lab.extrapolation.models.train`).
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    L = settings["L"]
    torch.manual_seed(seed)
    model = build_model(kind, vocab_size(task, settings), settings)
    val_generator = torch.Generator().manual_seed(settings["validation_seed"])
    val_inputs, val_targets = batch(task, settings["n_validation"], L, settings, val_generator)
    val_positions = train_positions(kind, L, settings, val_generator)

    def check(m) -> dict:
        accuracy, loss = _measure(m, val_inputs, val_targets, positions=val_positions)
        return {"loss": loss, "accuracy": accuracy.nanmean().item()}

    def next_batch(generator):
        return batch(task, settings["batch_size"], L, settings, generator)

    steps = steps_of(task, settings)
    training = train(
        model,
        kind,
        next_batch,
        check,
        seed=seed,
        lr=lr,
        settings=settings | {"steps": steps},
        stop_after=stop_after,
    )
    if stop_after is not None:
        return training
    sets = _eval_sets(task, settings)
    rows, finetune = {}, {}
    for row in rope_rows(kind, tuple(settings["rope_rows"])):
        evaluated = model
        if row.endswith("+ft"):
            N = settings["finetune_factor"] * L

            def tune_batch(generator, N=N):
                return batch(task, settings["batch_size"], N, settings, generator)

            evaluated, finetune[row] = fine_tune(
                model, tune_batch, rope_scaling(row, N, settings), seed=seed, settings=settings
            )
        rows[row] = evaluate(evaluated, row, task, settings, sets)
    extra = {}
    if kind == "fire":  # the threshold it learned decides where interpolation starts
        extra["fire_threshold"] = round(model.fire_bias.threshold.item(), 6)
    return {**training, **extra, "finetune_losses": finetune, "rows": rows}
