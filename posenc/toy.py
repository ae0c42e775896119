"""A toy causal Transformer for positional-encoding experiments.

This is a teaching toy, not a production model: a few dozen lines that
train on a CPU in seconds, so that a reader can rerun the length-
generalisation chapter and change it. One class, :class:`ToyTransformer`,
takes the positional encoding as a parameter; everything else (pre-norm
blocks, a GELU MLP, tied sizes, the training loop) is shared, so the
encodings differ in exactly one place each:

- ``"nope"``: nothing; only the causal mask carries order.
- ``"sinusoidal"``: :func:`posenc.absolute.sinusoidal` added to the token
  embeddings.
- ``"learned"``: a :class:`posenc.absolute.LearnedPositionalEmbedding` of
  ``max_len`` rows added to the token embeddings; undefined beyond them
  (``IndexError``).
- ``"rope"``: :func:`posenc.rope.apply_rope` on the queries and keys of
  every layer, with an optional frequency scaling chosen at call time
  (position interpolation, YaRN, ...) so that one trained model can be
  evaluated with several.
- ``"alibi"``: :func:`posenc.alibi.alibi_bias` added to the scores of every
  layer.
- ``"t5"``: one :class:`posenc.relative.T5RelativeBias` (unidirectional, as
  in a decoder) shared by all layers, as T5 shares it.

The task is :func:`periodic_batch`: random tokens that repeat with a fixed
period, so the next token is always the one ``period`` places back, at
any length. :func:`train` and :func:`accuracy_by_position` are the loop and
the measurement.

Shapes: ``b`` batch, ``s`` sequence, ``d`` width, ``h`` heads, ``h_d``
head size, ``V`` vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from posenc._checks import check_choice, check_size
from posenc.absolute import LearnedPositionalEmbedding, sinusoidal
from posenc.alibi import alibi_bias
from posenc.attention import attention
from posenc.relative import T5RelativeBias
from posenc.rope import apply_rope
from posenc.scaling import RopeScaling

__all__ = [
    "ENCODINGS",
    "ToyTransformer",
    "accuracy_by_position",
    "periodic_batch",
    "train",
]

#: The encodings :class:`ToyTransformer` accepts.
ENCODINGS = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through :func:`posenc.attention.attention`.

    Args:
        dim (int): width ``d``, divisible by ``n_heads``.
        n_heads (int): number of heads ``h``.
        rope (bool): rotate queries and keys with :func:`apply_rope`.
    """

    def __init__(self, dim: int, n_heads: int, *, rope: bool = False) -> None:
        super().__init__()
        self.n_heads, self.rope = n_heads, rope
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def project(
        self, x: torch.Tensor, positions: torch.Tensor, rope_scaling: RopeScaling | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values, each ``[b, h, s, h_d]``; rotated if ``rope``."""
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, d // self.n_heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [b, h, s, h_d]
        if self.rope:
            q = apply_rope(q, positions, scaling=rope_scaling)
            k = apply_rope(k, positions, scaling=rope_scaling)
        return q, k, v

    def scores(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        bias: torch.Tensor | None = None,
        rope_scaling: RopeScaling | None = None,
    ) -> torch.Tensor:
        """The pre-softmax scores ``q k^T / sqrt(h_d) + bias``, ``[b, h, s, s]``, unmasked."""
        q, k, _ = self.project(x, positions, rope_scaling)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return scores if bias is None else scores + bias

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        bias: torch.Tensor | None = None,
        rope_scaling: RopeScaling | None = None,
    ) -> torch.Tensor:
        q, k, v = self.project(x, positions, rope_scaling)
        y = attention(q, k, v, bias=bias, causal=True)  # [b, h, s, h_d]
        return self.out(y.transpose(1, 2).flatten(2))  # [b, s, d]


class Block(nn.Module):
    """Pre-norm Transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, dim: int, n_heads: int, *, rope: bool = False) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, n_heads, rope=rope)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, positions, bias=None, rope_scaling=None):
        x = x + self.attn(self.ln1(x), positions, bias, rope_scaling)
        return x + self.mlp(self.ln2(x))


class ToyTransformer(nn.Module):
    """A small causal Transformer whose positional encoding is a parameter.

    Args:
        vocab_size (int): number of token ids ``V``.
        encoding (str): one of :data:`ENCODINGS`.
        dim (int): width ``d``. Default 64.
        n_heads (int): heads per layer; ``dim`` must be divisible by it, and
            the head size even for ``"rope"``. Default 4.
        n_layers (int): number of blocks. Default 2.
        max_len (int): rows of the ``"learned"`` table (ignored otherwise).
            Default 32.

    Example:
        >>> model = ToyTransformer(16, "alibi")
        >>> model(torch.zeros(2, 40, dtype=torch.long)).shape
        torch.Size([2, 40, 16])
    """

    def __init__(
        self,
        vocab_size: int,
        encoding: str,
        *,
        dim: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        max_len: int = 32,
    ) -> None:
        super().__init__()
        self.encoding = check_choice("encoding", encoding, ENCODINGS)
        self.dim, self.n_heads = check_size("dim", dim), check_size("n_heads", n_heads)
        if dim % n_heads:
            raise ValueError(f"dim must be divisible by n_heads, got dim={dim}, n_heads={n_heads}")
        self.tokens = nn.Embedding(check_size("vocab_size", vocab_size), dim)
        if encoding == "learned":
            self.positions = LearnedPositionalEmbedding(check_size("max_len", max_len), dim)
        if encoding == "t5":
            self.t5_bias = T5RelativeBias(n_heads, bidirectional=False)
        rope = encoding == "rope"
        self.blocks = nn.ModuleList(
            Block(dim, n_heads, rope=rope) for _ in range(check_size("n_layers", n_layers))
        )
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token embeddings plus the absolute encoding, if any: ``[b, s]`` -> ``[b, s, d]``."""
        x = self.tokens(tokens)
        positions = torch.arange(tokens.shape[-1], device=tokens.device)
        if self.encoding == "sinusoidal":
            x = x + sinusoidal(positions, self.dim)
        elif self.encoding == "learned":
            x = x + self.positions(positions)  # IndexError beyond max_len
        return x

    def position_bias(self, seq_len: int) -> torch.Tensor | None:
        """The bias added to every layer's scores, ``[h, s, s]``, or ``None``."""
        if self.encoding == "alibi":
            return alibi_bias(self.n_heads, seq_len, device=self.head.weight.device)
        if self.encoding == "t5":
            return self.t5_bias(seq_len, seq_len)
        return None

    def forward(
        self, tokens: torch.Tensor, *, rope_scaling: RopeScaling | None = None
    ) -> torch.Tensor:
        """Next-token logits ``[b, s, V]`` for token ids ``[b, s]``.

        ``rope_scaling`` (``"rope"`` only) rescales the rotation frequencies
        at call time, e.g. ``LinearScaling(4)`` to evaluate at four times the
        training length with position interpolation.
        """
        if rope_scaling is not None and self.encoding != "rope":
            raise ValueError(f"rope_scaling needs encoding='rope', got {self.encoding!r}")
        positions = torch.arange(tokens.shape[-1], device=tokens.device)
        bias = self.position_bias(tokens.shape[-1])
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, positions, bias, rope_scaling)
        return self.head(self.ln(x))


def periodic_batch(
    batch_size: int,
    seq_len: int,
    *,
    period: int = 8,
    vocab_size: int = 16,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens repeating with period ``period``: inputs and next-token targets.

    A sequence ``z`` of ``seq_len + 1`` tokens has ``period`` uniform random
    tokens followed by copies, ``z[t] = z[t - period]``; the inputs are
    ``z[:-1]`` and the targets ``z[1:]``. Targets at positions
    ``t < period - 1`` are random draws that nothing can predict; they are
    set to ``-1`` (ignored by :func:`train` and :func:`accuracy_by_position`).
    From ``t = period - 1`` on, the target of position ``t`` is the input
    at ``t + 1 - period``: exactly known at any length.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: inputs and targets, both ``[b, s]``
        long tensors.
    """
    first = torch.randint(vocab_size, (batch_size, period), generator=generator)
    z = first.repeat(1, seq_len // period + 2)[:, : seq_len + 1]
    inputs, targets = z[:, :-1], z[:, 1:].clone()
    targets[:, : period - 1] = -1
    return inputs, targets


def train(
    model: ToyTransformer,
    *,
    steps: int = 600,
    batch_size: int = 32,
    seq_len: int = 32,
    lr: float = 6e-3,
    seed: int = 0,
    rope_scaling: RopeScaling | None = None,
    **task: int,
) -> list[float]:
    """Train ``model`` on :func:`periodic_batch` with AdamW; return the loss of every step.

    Each step draws a fresh batch from a generator seeded with ``seed``, so
    the same seed and the same initial model give the same losses. The
    learning rate falls linearly to zero over ``steps``; the loss is the
    cross-entropy over the predictable positions. ``rope_scaling`` is passed
    to the model (fine-tuning with position interpolation, say). ``task``
    passes ``period`` and ``vocab_size`` on to :func:`periodic_batch`.
    """
    generator = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / steps)
    model.train()
    losses = []
    for _ in range(steps):
        inputs, targets = periodic_batch(batch_size, seq_len, generator=generator, **task)
        logits = model(inputs, rope_scaling=rope_scaling)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def accuracy_by_position(
    model: ToyTransformer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    rope_scaling: RopeScaling | None = None,
) -> torch.Tensor:
    """Fraction of correct greedy next-token predictions at each position, ``[s]``.

    Positions whose targets are all ``-1`` (unpredictable) give ``nan``.
    """
    model.eval()
    predictions = model(inputs, rope_scaling=rope_scaling).argmax(-1)  # [b, s]
    known = targets >= 0
    correct = ((predictions == targets) & known).sum(0)
    return correct / known.sum(0)  # 0 / 0 = nan where nothing is known
