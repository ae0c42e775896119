"""What the two experiments share: the kinds of model, the RoPE rows, training and fine-tuning.

A *kind* is a model as trained (:data:`KINDS`): an encoding of
:class:`posenc_lab.toy.ToyTransformer` with its settings. A *row* is a
trained model as evaluated: the kind itself, or a RoPE kind with a
frequency scaling chosen at evaluation time and, for the ``+ft`` rows,
after a short fine-tune at ``finetune_factor * L`` with that scaling
(:func:`rope_rows`, :func:`rope_scaling`).

Training (:func:`train`) takes a fixed number of steps for every kind, with
no early stopping: AdamW, a linear warm-up, then a cosine decay to
``min_lr_ratio`` of the rate. It records the training loss (the mean of
every ``log_every`` steps) and, every ``check_every`` steps, what the
experiment measures on its validation set at ``L`` (the learning curve).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from posenc.randomized import random_positions
from posenc.rope import rope_frequencies
from posenc.scaling import LinearScaling, LongRopeScaling, YarnScaling
from posenc_lab.toy import ToyTransformer

__all__ = [
    "KINDS",
    "LLAMA2",
    "ROPE_ROWS",
    "build_model",
    "fine_tune",
    "llm_matched_base",
    "rope_rows",
    "rope_scaling",
    "round_list",
    "train",
    "train_positions",
    "turning_pairs",
    "yarn_paper_multipliers",
]

#: Every kind of model, and what it is: the encoding of
#: :class:`~posenc_lab.toy.ToyTransformer` and how it differs from the default.
KINDS = {
    "nope": "no positional encoding; only the causal mask carries order",
    "sinusoidal": "Vaswani et al.'s sinusoids added to the token embeddings",
    "learned": "a learned table of L rows added to the token embeddings (undefined beyond L)",
    "rope": "RoPE with base 10^4 (RoFormer, Llama 2)",
    "rope-llm": "RoPE with the base that makes Llama 2's share of pairs turn within L",
    "alibi": "ALiBi's fixed linear biases",
    "t5": "T5's bucketed learned bias, drawn from N(0, 0.02^2) (posenc's default)",
    "t5-hf": "T5's bucketed learned bias, drawn as Hugging Face does: N(0, 1/d)",
    "kerple": "KERPLE's logarithmic kernel",
    "fire": "FIRE, its threshold starting at L (progressive interpolation beyond L)",
    "cope": "CoPE, L * max(factors) + 1 integer positions starting at zero (8L + 1 in the task experiment)",
    "random": "RoPE (base 10^4) on a sorted random subset of 0 .. max_factor L - 1 (Ruoss et al.)",
}

#: Llama 2's RoPE (Touvron et al. 2023): head size, base, training length.
LLAMA2 = {"head_dim": 128, "base": 10000.0, "L": 4096}

#: The rows of a RoPE kind ``k``: ``k + suffix`` for every suffix here, ``""`` the kind.
#: ``+yarn-notemp`` is YaRN with its attention factor (temperature) set to 1. Every
#: ``+yarn`` row is YaRN as its reference code and Hugging Face implement it
#: (:class:`posenc.YarnScaling`); ``+yarn-paper`` (not in the stored design) is YaRN as
#: the paper's equations write it (:func:`yarn_paper_multipliers`).
ROPE_ROWS = ("", "+pi", "+yarn", "+yarn-notemp", "+ft", "+pi+ft", "+yarn+ft", "+yarn-notemp+ft")


def turning_pairs(head_dim: int, base: float, L: int) -> int:
    """How many of RoPE's ``head_dim / 2`` pairs turn at least once within ``L`` positions.

    Pair ``i`` turns by ``theta_i`` per position, so it completes a turn
    within ``L`` positions when ``L * theta_i >= 2 pi``. Llama 2
    (:data:`LLAMA2`): 46 of 64; head size 8, base 10^4, ``L = 16``: 1 of 4.
    """
    theta = rope_frequencies(head_dim, base=base).double()
    return int((L * theta >= 2 * math.pi).sum())


def llm_matched_base(L: int) -> float:
    """The RoPE base that puts ``L`` where Llama 2 puts its training length among the pairs.

    Pair ``i`` of ``h / 2`` has the wavelength ``2 pi base^(2i / h)``; the
    wavelength equals ``L`` at the fraction ``ln(L / 2 pi) / ln(base)`` of
    the pairs, whatever the head size. Llama 2's fraction is
    ``ln(4096 / 2 pi) / ln(10^4) = 0.7036``; this base gives ``L`` the same,
    ``(L / 2 pi) ** (1 / 0.7036)``, rounded to 4 significant digits. At head
    size 32 and ``L = 16`` it is 3.776, and 12 of the 16 pairs turn within
    ``L`` (Llama 2: 46 of 64). What it cannot match: the shortest
    wavelength is ``2 pi`` at any base, so at a small ``L`` there are no
    pairs that turn hundreds of times within ``L``, as Llama 2's fastest do.
    """
    fraction = math.log(LLAMA2["L"] / (2 * math.pi)) / math.log(LLAMA2["base"])
    base = (L / (2 * math.pi)) ** (1 / fraction)
    return float(f"{base:.4g}")


def yarn_paper_multipliers(
    head_dim: int, base: float, L: int, factor: float, alpha: float = 1.0, beta: float = 32.0
) -> torch.Tensor:
    """YaRN's frequency multipliers ``h(theta_d) / theta_d`` as Peng et al.'s paper writes them.

    Peng, Quesnelle, Fan and Shippole (2023, arXiv:2309.00071), Section 3.2,
    Eqs. 17 to 20: pair ``d`` turns ``r(d) = L / lambda_d = L theta_d / (2 pi)``
    times within ``L``; the ramp ``gamma(r)`` is 0 for ``r < alpha``, 1 for
    ``r > beta`` and ``(r - alpha) / (beta - alpha)`` between; the new
    frequency is ``(1 - gamma) theta_d / s + gamma theta_d``. ``alpha = 1``
    and ``beta = 32`` are the paper's values for the Llama family.

    The reference code and Hugging Face (:class:`posenc.YarnScaling`) ramp
    over the pair *index* instead, between the indices where ``r`` would be
    ``beta`` and ``alpha``, rounded outward (floor, ceil) and clamped to the
    pairs there are. At a small head the two differ: with head size 16,
    base 10^4 and ``L = 16``, pair 0 turns 2.5 times within ``L``; the code
    keeps it whole, the paper multiplies it by 0.525 at ``s = 2``. Returns
    ``head_dim / 2`` multipliers (float64).
    """
    theta = rope_frequencies(head_dim, base=base).double()
    r = L * theta / (2 * math.pi)
    gamma = ((r - alpha) / (beta - alpha)).clamp(0.0, 1.0)
    return (1 - gamma) / factor + gamma


def rope_rows(kind: str, suffixes: tuple[str, ...] = ROPE_ROWS) -> list[str]:
    """The rows evaluated for ``kind``: the kind alone, or every RoPE row of a RoPE kind."""
    if kind not in ("rope", "rope-llm"):
        return [kind]
    return [kind + suffix for suffix in suffixes]


def rope_scaling(row: str, N: int, settings: dict):
    """The frequency scaling of ``row`` at evaluation length ``N``, or ``None``.

    The factor is ``N / L``; for a fine-tuned row at least the fine-tune's
    factor, so the scaling it was tuned with stays at and below that length.
    """
    base = row.split("+")[0]
    if "+" not in row or row == f"{base}+ft":
        return None
    L = settings["L"]
    factor = N / L if not row.endswith("+ft") else max(settings["finetune_factor"], N / L)
    if factor <= 1:
        return None
    if "+pi" in row:
        return LinearScaling(float(factor))
    if "+yarn-paper" in row:  # the paper's ramp, one divisor per pair, YaRN's temperature
        head_dim = settings["dim"] // settings["n_heads"]
        rope_base = settings["rope_llm_base"] if base == "rope-llm" else 10000.0
        divisors = (1 / yarn_paper_multipliers(head_dim, rope_base, L, factor)).tolist()
        return LongRopeScaling(
            divisors,
            divisors,
            L,
            factor=float(factor),
            attention_factor=0.1 * math.log(factor) + 1,
        )
    if "+yarn-notemp" in row:  # mscale = mscale_all_dim: attention factor 1
        return YarnScaling(float(factor), original_max_positions=L, mscale=1.0, mscale_all_dim=1.0)
    return YarnScaling(float(factor), original_max_positions=L)


def build_model(kind: str, vocab_size: int, settings: dict) -> ToyTransformer:
    """A fresh model of ``kind``, drawn from torch's global generator (seed it first)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {tuple(KINDS)}, got {kind!r}")
    L, longest = settings["L"], settings["L"] * max(settings["factors"])
    encoding = {"rope-llm": "rope", "random": "rope", "t5-hf": "t5"}.get(kind, kind)
    return ToyTransformer(
        vocab_size,
        encoding,
        dim=settings["dim"],
        n_heads=settings["n_heads"],
        n_layers=settings["n_layers"],
        max_len=L if kind == "learned" else longest + 1,
        fire_threshold=float(L),
        rope_base=settings["rope_llm_base"] if kind == "rope-llm" else 10000.0,
        t5_init_std=settings["dim"] ** -0.5 if kind == "t5-hf" else None,
    )


def train_positions(kind: str, seq_len: int, settings: dict, generator: torch.Generator):
    """The positions a ``"random"`` model sees (``None`` for every other kind)."""
    if kind != "random":
        return None
    return random_positions(seq_len, settings["L"] * max(settings["factors"]), generator=generator)


def loss_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the targets that are not ``-1``."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)


def lr_factor(step: int, settings: dict) -> float:
    """The learning rate's multiplier at ``step`` (from 0) of ``train``.

    A linear warm-up over ``warmup`` steps, then a cosine decay to
    ``min_lr_ratio`` at ``steps``.
    """
    steps, warmup, floor = settings["steps"], settings["warmup"], settings["min_lr_ratio"]
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def train(
    model: ToyTransformer,
    kind: str,
    next_batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    check: Callable[[ToyTransformer], dict],
    *,
    seed: int,
    lr: float,
    settings: dict,
    stop_after: int | None = None,
) -> dict:
    """``settings["steps"]`` steps of AdamW on ``next_batch``; the learning curve.

    ``next_batch(generator)`` draws inputs and targets at ``L`` from the
    stream seeded with ``seed``; ``check(model)`` measures the model on the
    validation set (a dict of numbers), every ``check_every`` steps and at
    the end. Returns ``{"loss": [...], "curve": {"step": [...], name: [...]}}``:
    the training loss averaged over every ``log_every`` steps, and the
    checks. ``stop_after`` stops after that many steps, the schedule still
    spanning ``steps``: the beginning of the same run (the CI slice replays
    it), whose losses and checks are the first ones of the whole run's.
    """
    steps = settings["steps"]
    generator = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=settings["weight_decay"])
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, settings))
    losses, window = [], []
    curve: dict[str, list] = {"step": []}
    last = steps if stop_after is None else stop_after
    if not 1 <= last <= steps:
        raise ValueError(f"stop_after must be in [1, steps = {steps}], got {stop_after}")
    for step in range(1, last + 1):
        model.train()
        inputs, targets = next_batch(generator)
        positions = train_positions(kind, inputs.shape[-1], settings, generator)
        loss = loss_of(model(inputs, positions=positions), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
        window.append(loss.item())
        if len(window) == settings["log_every"] or step == steps:
            losses.append(sum(window) / len(window))
            window = []
        if step % settings["check_every"] == 0 or step == steps:
            curve["step"].append(step)
            for name, value in check(model).items():
                curve.setdefault(name, []).append(value)
    return {"loss": round_list(losses), "curve": {k: round_list(v) for k, v in curve.items()}}


def fine_tune(
    model: ToyTransformer,
    next_batch: Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    scaling,
    *,
    seed: int,
    settings: dict,
) -> tuple[ToyTransformer, list[float]]:
    """A copy of ``model`` after ``finetune_steps`` steps with ``rope_scaling=scaling``.

    After Chen et al. (2023), scaled down: a fresh AdamW at the constant
    rate ``finetune_lr``, on batches of ``next_batch(generator)`` (at
    ``finetune_factor * L``) from a stream of its own, seeded with
    ``finetune_seed + seed``, so that no fine-tune sees a batch any seed
    pre-trains on. Returns the tuned copy and its losses.
    """
    tuned = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(settings["finetune_seed"] + seed)
    opt = torch.optim.AdamW(
        tuned.parameters(), lr=settings["finetune_lr"], weight_decay=settings["weight_decay"]
    )
    losses = []
    tuned.train()
    for _ in range(settings["finetune_steps"]):
        inputs, targets = next_batch(generator)
        loss = loss_of(tuned(inputs, rope_scaling=scaling), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return tuned, round_list(losses)


def round_list(values, digits: int = 6) -> list:
    """``values`` rounded for JSON, ``nan`` as ``None``."""
    return [None if isinstance(v, float) and math.isnan(v) else round(v, digits) for v in values]
