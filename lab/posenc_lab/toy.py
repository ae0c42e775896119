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
- ``"kerple"``: one :class:`posenc.learned_bias.KerpleBias` (logarithmic
  kernel) shared by all layers, like T5's table here.
- ``"fire"``: one :class:`posenc.learned_bias.FireBias` shared by all
  layers, with the initial threshold ``fire_threshold`` (default 512, the
  class's default). A query at a position up to the threshold divides by
  the constant ``psi(threshold)``, so with the default the bias is a
  learned function of the log distance on inputs of up to 512 tokens and
  FIRE's progressive interpolation (the division by the query's own
  position) does not act; set ``fire_threshold`` to the training length
  for the interpolation to act on every longer input. The threshold is
  learned through a multiplier that starts at 1.
- ``"cope"``: a :class:`posenc.cope.CoPE` in every layer, its bias computed
  from that layer's causally masked scores; ``max_len`` integer positions.

``forward`` also takes explicit ``positions`` (for the absolute encodings
and RoPE; randomised positions, Ruoss et al. 2023, are such positions) and
two evaluation-only changes of the attention pattern: ``window=w`` hides
the keys ``w`` or more places back, and ``clip=w`` shows every key but
treats the distances ``w`` and beyond as ``w - 1`` (relative encodings
only), so that attention spread over many keys and distances never seen in
training can be told apart.

The tasks are :func:`periodic_batch`: random tokens that repeat with a
fixed period, so the next token is always the one ``period`` places back,
at any length; :func:`recall_batch`: key-value pairs bound at the start,
then keys whose values must be recalled from there, however far back; and
:func:`prefix_batch`: a prefix copied after a separator, so the answer is a
distance back that grows with the length and is found by position.
:func:`train` and :func:`accuracy_by_position` are the loop and the
measurement.

Shapes: ``b`` batch, ``s`` sequence, ``d`` width, ``h`` heads, ``h_d``
head size, ``V`` vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from posenc._checks import check_choice, check_positive_float, check_size
from posenc.absolute import LearnedPositionalEmbedding, sinusoidal
from posenc.alibi import alibi_bias
from posenc.attention import attention
from posenc.cope import CoPE
from posenc.learned_bias import FireBias, KerpleBias
from posenc.relative import T5RelativeBias
from posenc.rope import apply_rope
from posenc.scaling import RopeScaling

__all__ = [
    "ENCODINGS",
    "RELATIVE",
    "ToyTransformer",
    "accuracy_by_position",
    "periodic_batch",
    "prefix_batch",
    "recall_batch",
    "train",
]

#: The standard deviation of :class:`posenc.relative.T5RelativeBias`'s initial draw
#: (checked by the tests against the class).
T5_INIT_STD = 0.02

#: The encodings :class:`ToyTransformer` accepts.
ENCODINGS = ("nope", "sinusoidal", "learned", "rope", "alibi", "t5", "kerple", "fire", "cope")

#: The encodings that score a key by its distance from the query, the ones ``clip``
#: accepts. All but FIRE depend on positions through distances only; FIRE's bias
#: also depends on the query's position past its threshold (it divides the distance's
#: log by that of the position), so clipping its distances does not make its inputs
#: those of training.
RELATIVE = ("rope", "alibi", "t5", "kerple", "fire")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through :func:`posenc.attention.attention`.

    Args:
        dim (int): width ``d``, divisible by ``n_heads``.
        n_heads (int): number of heads ``h``.
        rope (bool): rotate queries and keys with :func:`apply_rope`.
        rope_base (float): RoPE's frequency base. Default 10000.
        cope_positions (int | None): add a :class:`CoPE` bias with this many
            integer positions. Default: None (no CoPE).
    """

    def __init__(
        self,
        dim: int,
        n_heads: int,
        *,
        rope: bool = False,
        rope_base: float = 10000.0,
        cope_positions: int | None = None,
    ) -> None:
        super().__init__()
        self.n_heads, self.rope, self.rope_base = n_heads, rope, rope_base
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.cope = (
            None if cope_positions is None else CoPE(dim // n_heads, n_heads, cope_positions)
        )

    def project_raw(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values before any rotation, each ``[b, h, s, h_d]``."""
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, d // self.n_heads).unbind(2)
        return tuple(t.transpose(1, 2) for t in (q, k, v))  # [b, h, s, h_d]

    def project(
        self, x: torch.Tensor, positions: torch.Tensor, rope_scaling: RopeScaling | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values, each ``[b, h, s, h_d]``; rotated if ``rope``."""
        q, k, v = self.project_raw(x)
        if self.rope:
            q = apply_rope(q, positions, base=self.rope_base, scaling=rope_scaling)
            k = apply_rope(k, positions, base=self.rope_base, scaling=rope_scaling)
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
        *,
        window: int | None = None,
        clip: int | None = None,
    ) -> torch.Tensor:
        q, k, v = self.project(x, positions, rope_scaling)
        if self.cope is None and window is None and clip is None:
            y = attention(q, k, v, bias=bias, causal=True)  # [b, h, s, h_d]
            return self.out(y.transpose(1, 2).flatten(2))  # [b, s, d]
        s = x.shape[1]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [b, h, s, s]
        back = torch.arange(s)[:, None] - torch.arange(s)[None, :]  # i - j, [s, s]
        if clip is not None and self.rope:
            # distance clip - 1 for every far key: q rotated to clip - 1, k at 0
            q_raw, k_raw, _ = self.project_raw(x)
            far_q = apply_rope(
                q_raw, torch.full((s,), clip - 1), base=self.rope_base, scaling=rope_scaling
            )
            far = far_q @ k_raw.transpose(-2, -1) / math.sqrt(q.shape[-1])
            scores = torch.where(back >= clip, far, scores)
        if bias is not None:
            scores = scores + bias
        hidden = back < 0 if window is None else (back < 0) | (back >= window)
        scores = scores.masked_fill(hidden, -math.inf)
        if self.cope is not None:
            # A contextual position never exceeds the number of keys (each gate
            # is at most 1), so the table's rows beyond s are never read: leave
            # them out of the product q . e[n] (exactly the same bias, and at a
            # table of 8L + 1 rows trained at L most of the cost).
            rows = {"pos_emb": self.cope.pos_emb[: min(self.cope.max_positions, s + 1)]}
            scores = scores + functional_call(self.cope, rows, (q, scores))
        y = scores.softmax(-1) @ v  # [b, h, s, h_d]
        return self.out(y.transpose(1, 2).flatten(2))  # [b, s, d]


class Block(nn.Module):
    """Pre-norm Transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(
        self,
        dim: int,
        n_heads: int,
        *,
        rope: bool = False,
        rope_base: float = 10000.0,
        cope_positions: int | None = None,
    ) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(
            dim, n_heads, rope=rope, rope_base=rope_base, cope_positions=cope_positions
        )
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, positions, bias=None, rope_scaling=None, *, window=None, clip=None):
        x = x + self.attn(self.ln1(x), positions, bias, rope_scaling, window=window, clip=clip)
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
        max_len (int): rows of the ``"learned"`` table, or integer positions
            of ``"cope"`` (ignored otherwise). Default 32.
        fire_threshold (float): initial threshold of ``"fire"``'s
            :class:`posenc.learned_bias.FireBias`, finite and > 0 (ignored
            otherwise). Default 512.0.
        rope_base (float): the frequency base of ``"rope"``, finite and > 1
            (ignored otherwise). Default 10000.0, as in RoFormer and Llama 2.
        t5_init_std (float | None): the standard deviation of the normal
            draw of ``"t5"``'s table (ignored otherwise). Default ``None``:
            :class:`posenc.relative.T5RelativeBias`'s own ``N(0, 0.02^2)``;
            Hugging Face's T5 draws it with ``d_model ** -0.5`` (times its
            ``initializer_factor``, 1.0), here ``dim ** -0.5``. The option
            rescales posenc's draw (no new draw), so every other parameter
            is the same as without it. It matters beyond the training
            length: a bucket that no trained distance falls in never gets a
            gradient and keeps its initial draw.

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
        fire_threshold: float = 512.0,
        rope_base: float = 10000.0,
        t5_init_std: float | None = None,
    ) -> None:
        super().__init__()
        self.encoding = check_choice("encoding", encoding, ENCODINGS)
        self.dim, self.n_heads = check_size("dim", dim), check_size("n_heads", n_heads)
        if dim % n_heads:
            raise ValueError(f"dim must be divisible by n_heads, got dim={dim}, n_heads={n_heads}")
        self.tokens = nn.Embedding(check_size("vocab_size", vocab_size), dim)
        max_len = check_size("max_len", max_len)
        if encoding == "learned":
            self.positions = LearnedPositionalEmbedding(max_len, dim)
        if encoding == "t5":
            self.t5_bias = T5RelativeBias(n_heads, bidirectional=False)
            if t5_init_std is not None:
                # rescale the N(0, 0.02^2) draw rather than draw again, so that every
                # other parameter is drawn as without the option: only the table differs
                std = check_positive_float("t5_init_std", t5_init_std)
                with torch.no_grad():
                    self.t5_bias.relative_attention_bias.weight.mul_(std / T5_INIT_STD)
        if encoding == "kerple":
            self.kerple_bias = KerpleBias(n_heads, kind="log")
        if encoding == "fire":
            threshold = check_positive_float("fire_threshold", fire_threshold)
            self.fire_bias = FireBias(n_heads, threshold=threshold)
        rope = encoding == "rope"
        rope_base = check_positive_float("rope_base", rope_base, greater_than=1.0)
        cope = max_len if encoding == "cope" else None
        self.blocks = nn.ModuleList(
            Block(dim, n_heads, rope=rope, rope_base=rope_base, cope_positions=cope)
            for _ in range(check_size("n_layers", n_layers))
        )
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size)

    def embed(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Token embeddings plus the absolute encoding, if any: ``[b, s]`` -> ``[b, s, d]``."""
        x = self.tokens(tokens)
        if positions is None:
            positions = torch.arange(tokens.shape[-1], device=tokens.device)
        if self.encoding == "sinusoidal":
            x = x + sinusoidal(positions, self.dim)
        elif self.encoding == "learned":
            x = x + self.positions(positions)  # IndexError beyond max_len
        return x

    def position_bias(self, seq_len: int, clip: int | None = None) -> torch.Tensor | None:
        """The bias added to every layer's scores, ``[h, s, s]``, or ``None``.

        With ``clip``, the bias of query ``i`` for a key ``clip`` or more
        places back is the one for the key ``clip - 1`` places back.
        """
        if self.encoding == "alibi":
            bias = alibi_bias(self.n_heads, seq_len, device=self.head.weight.device)
        elif self.encoding == "t5":
            bias = self.t5_bias(seq_len, seq_len)
        elif self.encoding == "kerple":
            bias = self.kerple_bias(seq_len, seq_len)
        elif self.encoding == "fire":
            bias = self.fire_bias(seq_len, seq_len)
        else:
            return None
        if clip is None or clip >= seq_len:
            return bias
        i = torch.arange(seq_len)
        back = i[:, None] - i[None, :]  # [s, s]
        edge = bias.gather(-1, (i - clip + 1).clamp(min=0).expand(bias.shape[0], -1)[..., None])
        return torch.where(back >= clip, edge, bias)  # edge: [h, s, 1]

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        rope_scaling: RopeScaling | None = None,
        positions: torch.Tensor | None = None,
        window: int | None = None,
        clip: int | None = None,
    ) -> torch.Tensor:
        """Next-token logits ``[b, s, V]`` for token ids ``[b, s]``.

        ``rope_scaling`` (``"rope"`` only) rescales the rotation frequencies
        at call time, e.g. ``LinearScaling(4)`` to evaluate at four times the
        training length with position interpolation. ``positions`` (``[s]``,
        for ``"sinusoidal"``, ``"learned"`` and ``"rope"``) replaces
        ``0 .. s - 1``. ``window`` hides the keys ``window`` or more places
        back; ``clip`` (relative encodings, :data:`RELATIVE`) scores them as
        ``clip - 1`` places back.
        """
        if rope_scaling is not None and self.encoding != "rope":
            raise ValueError(f"rope_scaling needs encoding='rope', got {self.encoding!r}")
        s = tokens.shape[-1]
        if positions is None:
            positions = torch.arange(s, device=tokens.device)
        elif self.encoding not in ("sinusoidal", "learned", "rope"):
            raise ValueError(
                f"positions needs encoding 'sinusoidal', 'learned' or 'rope', got {self.encoding!r}"
            )
        elif positions.shape != (s,):
            raise ValueError(f"positions must have shape ({s},), got {tuple(positions.shape)}")
        if clip is not None and self.encoding not in RELATIVE:
            raise ValueError(f"clip needs a relative encoding {RELATIVE}, got {self.encoding!r}")
        for name, w in (("window", window), ("clip", clip)):
            if w is not None:
                check_size(name, w)
        bias = self.position_bias(s, clip)
        x = self.embed(tokens, positions)
        for block in self.blocks:
            x = block(x, positions, bias, rope_scaling, window=window, clip=clip)
        return self.head(self.ln(x))


def periodic_batch(
    batch_size: int,
    seq_len: int,
    *,
    period: int = 8,
    vocab_size: int = 16,
    generator: torch.Generator | None = None,
    bos: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens repeating with period ``period``: inputs and next-token targets.

    A sequence ``z`` of ``seq_len + 1`` tokens has ``period`` uniform random
    tokens followed by copies, ``z[t] = z[t - period]``; the inputs are
    ``z[:-1]`` and the targets ``z[1:]``. Targets at positions
    ``t < period - 1`` are random draws that nothing can predict; they are
    set to ``-1`` (ignored by :func:`train` and :func:`accuracy_by_position`).
    From ``t = period - 1`` on, the target of position ``t`` is the input
    at ``t + 1 - period``: exactly known at any length.

    With ``bos=True`` the inputs start with a beginning-of-sequence token,
    id ``vocab_size`` (so the model needs ``vocab_size + 1`` ids), whose
    target is ``-1``, followed by the ``seq_len - 1`` first inputs of the
    sequence without it: a fixed first key that a model without positions
    can use to tell how far it is from the start.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: inputs and targets, both ``[b, s]``
        long tensors.
    """
    if bos:
        inputs, targets = periodic_batch(
            batch_size, seq_len - 1, period=period, vocab_size=vocab_size, generator=generator
        )
        start = torch.full((batch_size, 1), vocab_size)
        return torch.cat([start, inputs], 1), torch.cat([torch.full_like(start, -1), targets], 1)
    first = torch.randint(vocab_size, (batch_size, period), generator=generator)
    z = first.repeat(1, seq_len // period + 2)[:, : seq_len + 1]
    inputs, targets = z[:, :-1], z[:, 1:].clone()
    targets[:, : period - 1] = -1
    return inputs, targets


def recall_batch(
    batch_size: int,
    seq_len: int,
    *,
    n_keys: int = 8,
    n_values: int = 8,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Associative recall: ``n_keys`` bindings at the start, then queries.

    The first ``n_keys`` tokens bind every key, in a random order, to a
    value drawn uniformly (with replacement) from ``n_values``; the binding
    of key ``k`` to value ``v`` is one token, id ``k * n_values + v``. The
    other ``seq_len - n_keys`` tokens are queries, keys drawn uniformly,
    key ``k`` with id ``n_keys * n_values + k``. The target at a query is
    the value bound to its key (an id below ``n_values``); at a binding it
    is ``-1``. The answer is always in the first ``n_keys`` tokens, so its
    distance grows with the query's position; nothing but content says
    where it is. The model needs ``n_keys * (n_values + 1)`` ids. The first
    ``N`` tokens of a sequence are a sequence of length ``N``.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: inputs and targets, both ``[b, s]``
        long tensors.
    """
    check_size("seq_len", seq_len, minimum=n_keys + 1)
    order = torch.rand(batch_size, n_keys, generator=generator).argsort(-1)  # keys, shuffled
    values = torch.randint(n_values, (batch_size, n_keys), generator=generator)  # value of key k
    queries = torch.randint(n_keys, (batch_size, seq_len - n_keys), generator=generator)
    bindings = order * n_values + values.gather(1, order)
    inputs = torch.cat([bindings, n_keys * n_values + queries], 1)
    targets = torch.cat([torch.full_like(bindings, -1), values.gather(1, queries)], 1)
    return inputs, targets


def prefix_batch(
    batch_size: int,
    seq_len: int,
    *,
    prefix: int | None = None,
    vocab_size: int = 16,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Copy the whole prefix after a separator: an offset that grows with the length.

    A sequence is ``m`` uniform random tokens, then the separator (id
    ``vocab_size``, so the model needs ``vocab_size + 1`` ids), then the
    ``m`` tokens again, then the separator again, and so on: the period is
    ``m + 1`` and the next token is always the input ``m`` places back.
    The inputs are its first ``seq_len`` tokens and the targets the next
    ones; the targets of the first ``m`` positions (the rest of the prefix
    and the first separator) are random or unknowable and set to ``-1``.

    ``prefix=None`` draws ``m`` for every sequence uniformly from
    ``1 .. seq_len // 2``: a model trained so at length ``L`` has seen every
    offset up to ``L // 2``. ``prefix=m`` fixes it; the evaluation takes
    ``m = seq_len // 2``, the whole first half, so the offset at ``N = 8L``
    is ``4L``, eight times the longest seen in training. Unlike
    :func:`periodic_batch` and :func:`recall_batch`, the first ``N``
    tokens of a longer sequence are not a sequence of length ``N``.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: inputs and targets, both ``[b, s]``
        long tensors.
    """
    check_size("seq_len", seq_len, minimum=2)
    if prefix is None:
        m = torch.randint(1, seq_len // 2 + 1, (batch_size,), generator=generator)
    else:
        if not 1 <= check_size("prefix", prefix) <= seq_len // 2:
            raise ValueError(f"prefix must be in [1, seq_len // 2 = {seq_len // 2}], got {prefix}")
        m = torch.full((batch_size,), prefix)
    period = torch.randint(vocab_size, (batch_size, seq_len // 2 + 1), generator=generator)
    period[torch.arange(batch_size), m] = vocab_size  # the separator closes each period
    z = period.gather(1, torch.arange(seq_len + 1) % (m[:, None] + 1))  # [b, s + 1]
    inputs, targets = z[:, :-1], z[:, 1:].clone()
    targets[torch.arange(seq_len) < m[:, None]] = -1
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
    **options,
) -> torch.Tensor:
    """Fraction of correct greedy next-token predictions at each position, ``[s]``.

    Positions whose targets are all ``-1`` (unpredictable) give ``nan``.
    ``options`` (``positions``, ``window``, ``clip``) go to the model.
    """
    model.eval()
    predictions = model(inputs, rope_scaling=rope_scaling, **options).argmax(-1)  # [b, s]
    known = targets >= 0
    correct = ((predictions == targets) & known).sum(0)
    return correct / known.sum(0)  # 0 / 0 = nan where nothing is known
