"""The reversal toy: one attention layer that must reverse its input.

The task needs positions and nothing else: the input is ``T`` random tokens
out of ``V``, and the target at position ``p`` is the input token at
``T - 1 - p``. Every answer is in the input, so the only question is where
to look, and that depends on ``p`` alone. The model is as small as that
allows: token embedding plus a positional module (width ``D``), one
attention layer with a residual connection, a linear readout. It trains on
a CPU in about a second (float64, 301 Adam updates of 64 sequences).

The chapter on learned embeddings trains position tables with it; the
chapter on sinusoid variants trains it with one variant and loads it under
the others. Shapes: ``b`` batch, ``s`` sequence, ``d`` width.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from posenc import attention

#: Sequence length, vocabulary size and width of the chapters' runs.
T, V, D = 16, 10, 32


class Reverser(nn.Module):
    """Token + position embedding, attention with a residual, a readout.

    Args:
        position_embedding (nn.Module): maps positions ``[s]`` to ``[s, d]``
            (a table such as :class:`posenc.LearnedPositionalEmbedding`, or
            :class:`NoPositions`).
        vocab_size (int): token ids. Default ``V``.
        dim (int): width ``d``. Default ``D``.
    """

    def __init__(self, position_embedding: nn.Module, *, vocab_size: int = V, dim: int = D):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, dim)
        nn.init.normal_(self.tok.weight, std=0.02)
        self.pos = position_embedding
        self.w_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.readout = nn.Linear(dim, vocab_size)

    def qkv(self, tokens: torch.Tensor, positions: torch.Tensor | None = None):
        """The residual input and the queries, keys and values, each ``[b, s, d]``.

        ``positions`` (``[s]``) replaces ``0 .. s - 1``.
        """
        if positions is None:
            positions = torch.arange(tokens.shape[-1])
        x = self.tok(tokens) + self.pos(positions)
        return x, *self.w_qkv(x).chunk(3, dim=-1)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[b, s, V]`` for token ids ``[b, s]``."""
        x, q, k, v = self.qkv(tokens, positions)
        return self.readout(x + attention(q, k, v))


class NoPositions(nn.Module):
    """Adds nothing: the model without positions (float64 zeros ``[s, dim]``)."""

    def __init__(self, dim: int = D):
        super().__init__()
        self.dim = dim

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(positions), self.dim, dtype=torch.float64)


def batch(
    generator: torch.Generator, size: int = 64, *, length: int = T, vocab_size: int = V
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens ``[size, length]`` and their reversal, the targets."""
    tokens = torch.randint(vocab_size, (size, length), generator=generator)
    return tokens, tokens.flip(-1)  # target at p: the token at length - 1 - p


@torch.no_grad()
def accuracy(
    model: nn.Module,
    *,
    task: Callable = batch,
    size: int = 1000,
    seed: int = 2,
) -> float:
    """Fraction of tokens put in their place, over ``size`` new sequences.

    The sequences come from a generator seeded with ``seed``, the same for
    every model.
    """
    tokens, target = task(torch.Generator().manual_seed(seed), size=size)
    return (model(tokens).argmax(-1) == target).double().mean().item()


def train(
    model: nn.Module,
    steps: int = 300,
    report: tuple[int, ...] = (0, 50, 100, 150, 200, 300),
    *,
    task: Callable = batch,
    optimizer: torch.optim.Optimizer | None = None,
) -> tuple[float, list[str], list[float]]:
    """Steps ``0 .. steps`` of Adam (learning rate 0.01, or ``optimizer``) on ``task``.

    Each step draws a fresh batch from a generator seeded with 1. Returns
    the :func:`accuracy` after training, a log (the loss at the ``report``
    steps) and the loss of every step.
    """
    generator = torch.Generator().manual_seed(1)
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=0.01)
    vocab_size = model.readout.out_features
    log, losses = [f"ln {vocab_size} = {math.log(vocab_size):.4f}"], []
    for step in range(steps + 1):
        tokens, target = task(generator)
        logits = model(tokens).flatten(0, 1)
        loss = nn.functional.cross_entropy(logits, target.flatten())
        losses.append(loss.item())
        if step in report:
            log.append(f"step {step:3d}: loss {loss.item():.4f}")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    score = accuracy(model, task=task)
    log.append(f"accuracy on 1000 new sequences: {score:.3f}")
    return score, log, losses
