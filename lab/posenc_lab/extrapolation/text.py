"""The real-text experiment: byte-level language models trained at ``L``, measured up to ``16L``.

The corpus is :mod:`posenc_lab.extrapolation.corpus` (Python 3.11's
documentation sources, pinned). For each kind and seed (:func:`run_cell`):
a model trained for ``steps`` steps on windows of ``L + 1`` bytes drawn at
random offsets of the training split (the learning curve: the loss on
fixed validation windows at ``L``), then every row evaluated on the
validation split at every length ``N = factor * L`` in two ways:

- *non-overlapping windows*, as Press et al. (2022) evaluate for their
  Figure 1: the evaluation text is cut into windows of ``N`` tokens and
  every token is predicted from the ones before it in its window, so the
  first tokens of each window have little context. The record keeps the
  loss at every position of the window (:func:`nonoverlapping`,
  :func:`by_position`), their mean (perplexity ``exp(mean)``), and the mean
  over the tokens the sliding window scores (the same tokens as below, with
  less context);
- a *sliding window* of ``N`` tokens moved ``sliding_stride`` tokens at a
  time, each window scoring only its last ``sliding_stride`` tokens, so
  every scored token has at least ``N - sliding_stride`` tokens of context
  (:func:`sliding`); the record keeps the loss at each scored position and
  their mean.

The evaluation text is ``eval_blocks`` blocks spread evenly over the
validation split, each ``2 * span + 1`` tokens (``span = 16L``, the longest
length): the second half of a block is what the non-overlapping windows
score at every length (the same tokens at every ``N``), the first half the
context that the sliding windows may need; the sliding windows score the
last ``sliding_tokens`` tokens of each block.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from posenc_lab.extrapolation.corpus import SOURCES, build_corpus, load_corpus
from posenc_lab.extrapolation.models import (
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

__all__ = [
    "SETTINGS",
    "VOCAB",
    "by_position",
    "corpus_for",
    "eval_blocks",
    "nonoverlapping",
    "run_cell",
    "sliding",
    "token_losses",
    "windows",
]

#: Byte-level: one token id per byte value.
VOCAB = 256

#: The design of the stored record.
SETTINGS = {
    "experiment": "text",
    "corpus": "pinned",  # the pinned corpus; a directory builds one from its files
    # Press et al.'s four (sinusoidal, RoPE with PI and YaRN, T5, ALiBi), NoPE and FIRE;
    # trimmed to fit the budget (lab/README.md): "learned" (undefined beyond L, nothing to
    # extrapolate), "kerple" (FIRE's family), "cope" (the costliest, 1.8x) and "random"
    # are in the task experiment only; --kinds adds them back
    "kinds": ["nope", "sinusoidal", "rope", "alibi", "t5", "fire"],
    "seeds": [0, 1, 2],
    "L": 64,
    "factors": [1, 2, 4, 8, 16],
    "dim": 128,
    "n_heads": 4,  # head size 32: 16 RoPE pairs
    "n_layers": 2,
    "rope_llm_base": llm_matched_base(64),
    "batch_size": 32,
    "steps": 2000,
    "warmup": 100,
    "min_lr_ratio": 0.1,
    "weight_decay": 0.01,
    "lr": 2e-3,
    "log_every": 10,
    "check_every": 100,
    "n_validation": 64,
    "rope_rows": ["", "+pi", "+yarn", "+yarn-notemp", "+ft", "+pi+ft", "+yarn+ft"],
    "finetune_steps": 100,
    "finetune_batch_size": 16,  # windows of 2L: as many tokens per step as in training
    "finetune_lr": 5e-4,
    "finetune_factor": 2,
    "eval_blocks": 16,
    "sliding_stride": 16,
    "sliding_tokens": 64,
    "eval_seed": 10_000,
    "finetune_seed": 30_000,
    "threads": 1,
}


def corpus_for(settings: dict):
    """The corpus ``settings["corpus"]`` names: the pinned one, or one built from a directory."""
    if settings["corpus"] == "pinned":
        return load_corpus(SOURCES)
    return build_corpus(Path(settings["corpus"]))


def windows(stream: torch.Tensor, offsets: torch.Tensor, length: int) -> torch.Tensor:
    """``stream[o : o + length]`` for every offset ``o``, as token ids ``[len(offsets), length]``."""
    return stream[offsets[:, None] + torch.arange(length)].long()


def _random_windows(stream: torch.Tensor, batch_size: int, seq_len: int, generator):
    offsets = torch.randint(len(stream) - seq_len - 1, (batch_size,), generator=generator)
    x = windows(stream, offsets, seq_len + 1)
    return x[:, :-1], x[:, 1:]


def eval_blocks(validation: torch.Tensor, settings: dict) -> torch.Tensor:
    """``eval_blocks`` blocks of ``2 * span + 1`` tokens spread evenly over ``validation``."""
    span = settings["L"] * max(settings["factors"])
    size, n = 2 * span + 1, settings["eval_blocks"]
    if len(validation) < size:
        raise ValueError(f"validation must hold at least {size} tokens, got {len(validation)}")
    offsets = torch.tensor([b * (len(validation) - size) // n for b in range(n)])
    return windows(validation, offsets, size)


@torch.no_grad()
def token_losses(model, inputs: torch.Tensor, targets: torch.Tensor, **options) -> torch.Tensor:
    """Cross-entropy of every prediction ``[b, s]``, in batches small enough for memory.

    ``options`` (``rope_scaling``, ``positions``) go to the model.
    """
    model.eval()
    s = inputs.shape[-1]
    chunk = max(1, 2**23 // (model.n_heads * s * s))  # scores of at most 2^23 floats
    out = []
    for i in range(0, len(inputs), chunk):
        logits = model(inputs[i : i + chunk], **options)
        out.append(
            F.cross_entropy(logits.transpose(1, 2), targets[i : i + chunk], reduction="none")
        )
    return torch.cat(out)


def nonoverlapping(model, blocks: torch.Tensor, N: int, **options) -> torch.Tensor:
    """The loss of every token of the blocks' second halves, in windows of ``N``: ``[n, span]``.

    The windows tile the second half of every block (``span`` tokens, a
    multiple of ``N``): the input at ``span + j`` predicts the token after
    it from the tokens before it in its window, so the loss at ``[b, j]``
    is at window position ``j % N``; the target of a window's last token
    is the next token of the block. ``.view(n, -1, N).mean((0, 1))`` is the
    mean loss at each window position (:func:`by_position`).
    """
    span = (blocks.shape[1] - 1) // 2
    if span % N:
        raise ValueError(f"N must divide the span {span}, got {N}")
    scored = blocks[:, span:]  # [n, span + 1]
    inputs = scored[:, :-1].reshape(-1, N)
    targets = scored[:, 1:].reshape(-1, N)
    return token_losses(model, inputs, targets, **options).view(len(blocks), span)


def by_position(losses: torch.Tensor, N: int) -> torch.Tensor:
    """The mean of :func:`nonoverlapping`'s losses at each window position, ``[N]``."""
    return losses.view(len(losses), -1, N).mean((0, 1))


def sliding(model, blocks: torch.Tensor, N: int, stride: int, tokens: int, **options):
    """Mean loss at each of the last ``stride`` positions of windows of ``N`` sliding by ``stride``.

    Each block's last ``tokens`` tokens (a multiple of ``stride``) are
    scored, ``stride`` at a time, by the window of ``N`` tokens that ends
    with them: each has at least ``N - stride`` tokens of context. Returns
    ``[stride]``, the loss at window positions ``N - stride .. N - 1``.
    """
    size = blocks.shape[1] - 1  # inputs end before the last token
    if tokens % stride or not 0 < stride <= N or size - tokens + stride < N:
        raise ValueError(
            f"need 0 < stride <= N, tokens a multiple of stride and N <= {size} - tokens + "
            f"stride; got N={N}, stride={stride}, tokens={tokens}"
        )
    losses = []
    for end in range(size - tokens + stride, size + 1, stride):
        inputs, targets = blocks[:, end - N : end], blocks[:, end - N + 1 : end + 1]
        losses.append(token_losses(model, inputs, targets, **options)[:, -stride:])
    return torch.cat(losses).mean(0)


def evaluate(model, row: str, settings: dict, blocks: torch.Tensor) -> dict:
    """Both evaluations of ``row`` at every length: losses by position and their means."""
    L = settings["L"]
    result: dict = {
        "loss": {},
        "by_position": {},
        "loss_sliding_tokens": {},
        "sliding_loss": {},
        "sliding_by_position": {},
    }
    for N in (f * L for f in settings["factors"]):
        if row == "learned" and N > L:
            continue  # the table has no row for position L
        options = {"rope_scaling": rope_scaling(row, N, settings)}
        if row == "random":
            generator = torch.Generator().manual_seed(settings["eval_seed"] + N)
            options["positions"] = train_positions("random", N, settings, generator)
        stride, tokens = settings["sliding_stride"], settings["sliding_tokens"]
        losses = nonoverlapping(model, blocks, N, **options)
        result["loss"][str(N)] = round(losses.mean().item(), 6)
        result["by_position"][str(N)] = round_list(by_position(losses, N).tolist(), 4)
        # the tokens the sliding window scores, in non-overlapping windows: same tokens,
        # less context (their windows' last positions, or all of them below N = tokens)
        result["loss_sliding_tokens"][str(N)] = round(losses[:, -tokens:].mean().item(), 6)
        slid = sliding(model, blocks, N, stride, tokens, **options)
        result["sliding_loss"][str(N)] = round(slid.mean().item(), 6)
        result["sliding_by_position"][str(N)] = round_list(slid.tolist(), 4)
    return result


def run_cell(
    kind: str, seed: int, lr: float, settings: dict, stop_after: int | None = None
) -> dict:
    """Train one language model of ``kind`` and evaluate every row; a JSON-ready dict.

    ``stop_after``: only the first steps of the training, without the
    evaluation (:func:`posenc_lab.extrapolation.models.train`).
    """
    corpus = corpus_for(settings)
    L = settings["L"]
    torch.manual_seed(seed)
    model = build_model(kind, VOCAB, settings)
    n_val = settings["n_validation"]
    offsets = torch.tensor([b * (len(corpus.validation) - L - 1) // n_val for b in range(n_val)])
    val = windows(corpus.validation, offsets, L + 1)
    val_positions = train_positions(
        kind, L, settings, torch.Generator().manual_seed(settings["eval_seed"])
    )

    def check(m) -> dict:
        m.eval()
        with torch.no_grad():
            return {"loss": loss_of(m(val[:, :-1], positions=val_positions), val[:, 1:]).item()}

    def next_batch(generator):
        return _random_windows(corpus.train, settings["batch_size"], L, generator)

    training = train(
        model, kind, next_batch, check, seed=seed, lr=lr, settings=settings, stop_after=stop_after
    )
    if stop_after is not None:
        return training
    blocks = eval_blocks(corpus.validation, settings)
    rows, finetune = {}, {}
    for row in rope_rows(kind, tuple(settings["rope_rows"])):
        evaluated = model
        if row.endswith("+ft"):
            N = settings["finetune_factor"] * L

            def tune_batch(generator, N=N):
                return _random_windows(corpus.train, settings["finetune_batch_size"], N, generator)

            evaluated, finetune[row] = fine_tune(
                model, tune_batch, rope_scaling(row, N, settings), seed=seed, settings=settings
            )
        rows[row] = evaluate(evaluated, row, settings, blocks)
    extra = {}
    if kind == "fire":
        extra["fire_threshold"] = round(model.fire_bias.threshold.item(), 6)
    return {**training, **extra, "finetune_losses": finetune, "rows": rows}
