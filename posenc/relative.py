"""Learned relative position encodings: T5's bucketed bias and Shaw et al.'s embeddings.

* :func:`t5_relative_position_bucket` maps a relative position (key position
  minus query position) to one of ``num_buckets`` buckets by T5's rule
  (Hugging Face's float32 arithmetic on a CPU; see the function for where
  other code paths can differ by one bucket): small distances get a bucket each, larger ones share buckets whose
  width grows logarithmically up to ``max_distance``, and everything farther
  falls into the last bucket.
* :class:`T5RelativeBias` learns one scalar per bucket and head and returns
  the ``(n_heads, q_len, k_len)`` bias that T5 adds to its attention scores.
* :class:`RelativePositionEmbedding` learns one vector per clipped relative
  position (Shaw et al. 2018), to be used inside the attention computation.

Shapes use ``b`` batch rows, ``h`` heads (``n_heads``), ``q`` queries
(``q_len``), ``k`` keys (``k_len``) and ``d`` features (``dim``). As in
:func:`posenc.alibi_bias`, query ``i`` sits at absolute position
``i + k_len - q_len`` (the newest tokens of a cached sequence) and key ``j``
at ``j``, so queries may not outnumber keys; or the positions are given
(``q_positions``, ``k_positions``: packed documents, left-padded batches).

References:
    Colin Raffel et al., "Exploring the Limits of Transfer Learning with a
    Unified Text-to-Text Transformer", JMLR 21 (2020),
    https://arxiv.org/abs/1910.10683, Section 2.1, and its Mesh TensorFlow
    code (``_relative_position_bucket``).

    Peter Shaw, Jakob Uszkoreit, Ashish Vaswani, "Self-Attention with
    Relative Position Representations", NAACL 2018,
    https://arxiv.org/abs/1803.02155.
"""

from __future__ import annotations

import math
import struct
from bisect import bisect_left
from collections.abc import Callable
from functools import lru_cache

import torch
from torch import nn

from posenc._checks import check_bool, check_size, check_tensor
from posenc._positions import bias_positions, index_positions, relative_positions

__all__ = [
    "RelativePositionEmbedding",
    "T5RelativeBias",
    "t5_relative_position_bucket",
]

# Standard deviation of the normal initialisation of both learned tables, as
# Hugging Face's BERT initialises its relative ("relative_key") distance
# embedding (initializer_range). Hugging Face's T5 uses d_model ** -0.5.
_INIT_STD = 0.02


class _NormalTable(nn.Embedding):
    """An ``nn.Embedding`` whose own :meth:`reset_parameters` draws ``N(0, 0.02^2)``.

    The table of :class:`T5RelativeBias` and of
    :class:`RelativePositionEmbedding`. Its initialisation belongs to it, the
    module that owns the weight, so it comes out right whoever resets it and
    in whatever order: the module that holds it, a loop that calls
    ``reset_parameters()`` on every module of a model, or FSDP1's meta-device
    materialisation, which calls it only on modules with parameters of their
    own and expects each to initialise only those. A plain ``nn.Embedding``
    there would be reset to its ``N(0, 1)`` default, 50 times too wide.

    It draws the random numbers construction always drew: ``nn.Embedding``'s
    ``N(0, 1)`` first, then the ``N(0, 0.02^2)`` it keeps, so the values
    under a seed are those of earlier versions. Its ``state_dict`` is an
    ``nn.Embedding``'s (``weight``), and it is one (``isinstance``).
    """

    def reset_parameters(self) -> None:
        """Draw the table from ``N(0, 0.02^2)``, after ``nn.Embedding``'s own ``N(0, 1)`` draw."""
        super().reset_parameters()  # consumes the random numbers it always has
        nn.init.normal_(self.weight, mean=0.0, std=_INIT_STD)


def _check_t5_buckets(bidirectional: object, num_buckets: object, max_distance: object):
    """Validate T5's bucket settings.

    Returns:
        tuple[bool, int, int, int]: ``bidirectional``, ``num_buckets``,
        ``max_distance`` and the number of buckets per side (``num_buckets``
        or ``num_buckets // 2`` when bidirectional).
    """
    bidirectional = check_bool("bidirectional", bidirectional)
    num_buckets = check_size("num_buckets", num_buckets)
    max_distance = check_size("max_distance", max_distance)
    side = num_buckets // 2 if bidirectional else num_buckets
    max_exact = side // 2
    rule = "num_buckets // 4 when bidirectional" if bidirectional else "num_buckets // 2"
    if max_exact < 1:
        raise ValueError(
            f"num_buckets must leave at least one exact bucket ({rule}), "
            f"got num_buckets={num_buckets} with bidirectional={bidirectional}"
        )
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must be greater than the number of exact buckets "
            f"({rule} = {max_exact} for num_buckets={num_buckets}), "
            f"got max_distance={max_distance}"
        )
    return bidirectional, num_buckets, max_distance, side


def _float32(x: float) -> float:
    """Round a Python float to the nearest float32 (inf beyond its range)."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


@lru_cache(maxsize=64)
def _t5_thresholds(side: int, max_distance: int) -> tuple[int, ...]:
    """Where T5's logarithmic buckets start, for distances ``n >= side // 2``.

    T5 gives a distance ``n >= max_exact = side // 2`` the bucket::

        min(max_exact + int(log(n / max_exact) / log(max_distance / max_exact)
                            * (side - max_exact)),
            side - 1)

    evaluated in float32 (Mesh TensorFlow's ``tf.to_float``, Hugging Face's
    ``.float()``). Every float32 step is monotone in ``n``, so the bucket of
    an integer ``n`` is ``max_exact`` plus the number of thresholds ``<= n``,
    where threshold ``t`` (``t = 1 .. side - max_exact - 1``) is the smallest
    integer reaching bucket ``max_exact + t``. Finding them once here, with
    Hugging Face's float32 arithmetic (true divisions) and a correctly
    rounded float32 ``log``, gives the same buckets as that expression also
    where the float32 quotient lands on a bucket edge, and makes the result
    independent of the device's ``log``. Other code paths can differ there by
    one bucket: torch's float32 ``log`` is not correctly rounded on every
    CPU, Mesh TensorFlow multiplies by float32 reciprocals instead of
    dividing (e.g. ``num_buckets=16, max_distance=49``, distance 14), and
    PyTorch on CUDA divides by a Python number the same way. At T5's
    defaults (32 buckets, 128) all of them agree when the float32 ``log`` of
    2, 4 and 8 is correctly rounded, as on the CPU the chapter *T5 relative
    buckets* runs on. At the bidirectional distances 16, 32 and 64 the
    quotient is exactly 2, 4 and 6 in exact arithmetic and in the float32
    forms; flaxformer under NumPy 2 divides in float64 and gets 2.0000000055,
    4.000000011 and 6.0000000165, the same buckets. A ``log`` one unit in the
    last place low puts each of them one bucket lower in every form (see that
    chapter).
    """
    max_exact = side // 2
    n_log = side - max_exact  # buckets from max_exact on, the last one open-ended
    log_range = _float32(math.log(max_distance / max_exact))
    scale = _float32(float(n_log))

    def bucket(n: int) -> int:  # unclipped, and capped at n_log to keep int() finite
        x = _float32(_float32(float(n)) / max_exact)
        x = _float32(math.log(x))
        x = _float32(x / log_range)
        x = _float32(x * scale)
        return max_exact + int(min(x, scale))

    # bucket(2 * max_distance) > max_exact + n_log: every threshold lies in range
    # (capped where int64 distances end, for an absurdly large max_distance).
    candidates = range(max_exact, min(2 * max_distance, 2**62) + 1)
    return tuple(
        max_exact + bisect_left(candidates, max_exact + t, key=bucket) for t in range(1, n_log)
    )


def _t5_thresholds_constant(side: int, max_distance: int) -> tuple[int, ...]:
    """:func:`_t5_thresholds`, which ``torch.compile`` calls once and keeps as a constant.

    Its search (``bisect``, ``struct``) runs in Python on two integers, so
    it cannot be traced and need not be: the result depends on the settings
    alone.
    """
    return _t5_thresholds(side, max_distance)


# torch.compiler.assume_constant_result(fn) only sets this attribute, but in torch 2.13 it
# imports torch._dynamo first (2-3 s at `import posenc`); setting it here keeps the
# compiler out of the import. tests/test_compile.py traces T5's buckets with
# fullgraph=True, which fails if the mark stops working.
_t5_thresholds_constant._dynamo_marked_constant = True  # type: ignore[attr-defined]


def t5_relative_position_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket for each relative position (Raffel et al. 2020).

    With ``relative_position = key_pos - query_pos``, T5's
    ``_relative_position_bucket`` as Hugging Face's ``T5Attention`` computes
    it on a CPU in float32 with a correctly rounded ``log``. At T5's defaults
    this equals Mesh TensorFlow's and Hugging Face's output everywhere when
    their float32 ``log`` of 2, 4 and 8 is correctly rounded too (the
    bidirectional distances 16, 32 and 64 sit exactly on bucket edges); in
    other settings it can differ from them by one bucket where the float32
    quotient lands on a bucket edge (see ``_t5_thresholds``):

    * ``bidirectional=True`` (encoder): half of the buckets, ``side =
      num_buckets // 2``, serve keys at or before the query and the other half
      (offset by ``side``) keys after it; the distance is
      ``n = |relative_position|``.
    * ``bidirectional=False`` (decoder): all ``side = num_buckets`` buckets
      serve keys at or before the query, ``n = max(-relative_position, 0)``;
      future keys all land in bucket 0 (the causal mask removes them).
    * Of the ``side`` buckets, the first ``max_exact = side // 2`` hold the
      distances ``0 .. max_exact - 1`` one each. The others grow
      logarithmically: ``n >= max_exact`` goes to ``max_exact + int(log(n /
      max_exact) / log(max_distance / max_exact) * (side - max_exact))``,
      formed in float32 as T5 does, and clipped to the last bucket ``side -
      1``, which thus holds every distance from ``max_distance`` on (and,
      as ``int`` truncates, some shorter ones too). The bucket edges are
      found once with this float32 arithmetic, so the result does not
      depend on the device's ``log``.

    With the defaults (bidirectional), the distances ``0 .. 7`` on each side
    have a bucket each, ``8 .. 90`` share seven logarithmic ones, and ``91``
    onward the last one.

    Args:
        relative_position (torch.Tensor): integer tensor of any shape ``[*]``,
            key position minus query position.
        bidirectional (bool): separate buckets for keys after the query
            (encoder) if ``True``; a single causal side if ``False``.
        num_buckets (int): number of buckets, at least 4 when bidirectional,
            at least 2 otherwise (one exact bucket).
        max_distance (int): distance from which on all distances share the
            last bucket; greater than the number of exact buckets.

    Returns:
        torch.Tensor: int64 buckets in ``[0, num_buckets)``, shape ``[*]``, on
        the device of ``relative_position``.

    Raises:
        TypeError: if ``relative_position`` is not a tensor, a size not an
            integer or ``bidirectional`` not a bool.
        ValueError: if ``relative_position`` is not an integer tensor, or the
            settings leave no exact bucket or put ``max_distance`` inside the
            exact buckets.

    Example:
        >>> t5_relative_position_bucket(torch.tensor([-200, -8, -1, 0, 1, 8, 200]))
        tensor([15,  8,  1,  0, 17, 24, 31])
    """
    relative_position = check_tensor("relative_position", relative_position)
    dtype = relative_position.dtype
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        raise ValueError(f"relative_position must be an integer tensor, got dtype {dtype}")
    bidirectional, num_buckets, max_distance, side = _check_t5_buckets(
        bidirectional, num_buckets, max_distance
    )
    max_exact = side // 2

    relative_position = relative_position.to(torch.int64)
    if bidirectional:
        offset = (relative_position > 0).to(torch.int64) * side  # later keys: second half
        distance = relative_position.abs()
    else:
        offset = None
        distance = (-relative_position).clamp_min(0)  # later keys: distance 0

    thresholds = torch.tensor(
        _t5_thresholds_constant(side, max_distance), dtype=torch.int64, device=distance.device
    )
    log_bucket = max_exact + torch.bucketize(distance, thresholds, right=True)
    bucket = torch.where(distance < max_exact, distance, log_bucket)
    return bucket if offset is None else bucket + offset


def _t5_bucket_pointwise(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool,
    side: int,
    thresholds: tuple[int, ...],
) -> torch.Tensor:
    """:func:`t5_relative_position_bucket` from comparisons with Python integers only.

    FlexAttention compiles a ``score_mod`` into its kernel as a pointwise
    function, where neither ``torch.bucketize`` nor a new tensor of
    thresholds is allowed; counting the thresholds ``<= distance`` one
    comparison at a time gives the same bucket (``bucketize(...,
    right=True)``). ``side`` is the number of buckets per side and
    ``thresholds`` are ``_t5_thresholds(side, max_distance)``, found by the
    caller outside the traced function.
    """
    max_exact = side // 2
    if bidirectional:
        offset = (relative_position > 0).to(torch.int64) * side
        distance = relative_position.abs()
    else:
        offset = 0
        distance = (-relative_position).clamp_min(0)
    log_bucket = max_exact + sum((distance >= t).to(torch.int64) for t in thresholds)
    return torch.where(distance < max_exact, distance.to(torch.int64), log_bucket) + offset


class T5RelativeBias(nn.Module):
    """T5's learned relative position bias (Raffel et al. 2020).

    One learned scalar per head and bucket of :func:`t5_relative_position_bucket`;
    ``forward`` returns the bias that T5 adds to the attention logits of every
    layer (T5 computes it in the first layer and shares it).

    The table is ``relative_attention_bias``, an ``nn.Embedding(num_buckets,
    n_heads)`` named as in Hugging Face's ``T5Attention``, so its weight loads
    from a T5 checkpoint unchanged. It is initialised from ``N(0, 0.02^2)``
    by its own ``reset_parameters`` (a subclass of ``nn.Embedding``);
    Hugging Face's T5 uses the standard deviation
    ``initializer_factor * d_model ** -0.5`` (``initializer_factor`` is 1.0
    in T5's configs; ``nn.init.normal_`` on the weight to change it).

    Args:
        n_heads (int): number of attention heads, a positive integer.
        bidirectional (bool): ``True`` for an encoder (keys after the query
            get their own buckets), ``False`` for a decoder.
        num_buckets (int): number of buckets, see
            :func:`t5_relative_position_bucket`.
        max_distance (int): distance from which on all distances share the
            last bucket.

    Raises:
        TypeError: if a size is not an integer or ``bidirectional`` not a
            bool.
        ValueError: on the bad settings listed in
            :func:`t5_relative_position_bucket`, or ``n_heads < 1``.

    Example:
        >>> bias = T5RelativeBias(8)
        >>> bias(4, 6).shape
        torch.Size([8, 4, 6])
    """

    def __init__(
        self,
        n_heads: int,
        *,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
    ) -> None:
        super().__init__()
        self.n_heads = check_size("n_heads", n_heads)
        self.bidirectional, self.num_buckets, self.max_distance, _ = _check_t5_buckets(
            bidirectional, num_buckets, max_distance
        )
        self.relative_attention_bias = _NormalTable(self.num_buckets, self.n_heads)

    def reset_parameters(self) -> None:
        """Draw the table from ``N(0, 0.02^2)`` again, as construction draws it.

        The table initialises itself (its own ``reset_parameters``, which
        this method calls), so that FSDP1 and a loop over every module
        initialise it right too. Under the same ``torch.manual_seed``, a
        module built on the meta device, moved with ``to_empty`` and reset
        by this method alone (or by FSDP1, which skips this module: it has
        no parameters of its own) holds the values of one built directly on
        that device; a loop that also resets the table draws it twice, from
        the same distribution.
        """
        self.relative_attention_bias.reset_parameters()

    def forward(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The bias for ``q_len`` queries aligned to the end of ``k_len`` keys, or at given positions.

        Query ``i`` sits at position ``q_pos = i + k_len - q_len`` and key
        ``j`` at ``k_pos = j``, or at ``q_positions[..., i]`` and
        ``k_positions[..., j]``; ``out[..., h, i, j] = weight[bucket(k_pos -
        q_pos), h]``. Positions express packed documents (restarting at 0 in
        each) and left-padded batches (each row counting from its first real
        token); with ``arange`` positions the result equals the length form.

        Args:
            q_len (int | None): number of queries, ``>= 0``; required unless
                the positions are given.
            k_len (int | None): number of keys, ``>= q_len``; ``None`` for
                ``q_len``.
            q_positions (torch.Tensor | None): keyword only, instead of the
                lengths: integer positions of the queries, ``[q]`` or batched
                ``[b, q]``.
            k_positions (torch.Tensor | None): keyword only, with
                ``q_positions``: integer positions of the keys, ``[k]`` or
                ``[b, k]``.

        Returns:
            torch.Tensor: bias of shape ``[h, q, k]`` (``[b, h, q, k]`` for
            batched positions) on the device and in the dtype of the table, to
            be broadcast against scores ``[b, h, q, k]``.

        Raises:
            TypeError: if a length is not an integer or a position argument
                not a tensor.
            ValueError: if a length is negative or ``q_len > k_len``; lengths
                and positions mixed or only one position tensor given; a
                position tensor not an integer tensor of one or two axes, or
                the two of different batch sizes.
        """
        weight = self.relative_attention_bias.weight  # [num_buckets, h]
        q_pos, k_pos = bias_positions(q_len, k_len, q_positions, k_positions, device=weight.device)
        bucket = t5_relative_position_bucket(
            relative_positions(q_pos, k_pos),
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # [q, k] or [b, q, k]
        return self.relative_attention_bias(bucket).movedim(-1, -3)  # [..., h, q, k]

    def score_mod(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> Callable[..., torch.Tensor]:
        """This bias as a FlexAttention ``score_mod``, one score at a time.

        Returns ``score_mod(score, b, h, q_idx, kv_idx) -> score + bias``, the
        function ``torch.nn.attention.flex_attention.flex_attention`` applies
        to each score: ``bias = weight[bucket(k_pos - q_pos), h]`` as in
        :meth:`forward`, with the bucket found by comparisons (pointwise, so
        FlexAttention can compile it into its kernel). Query ``q_idx`` sits
        at ``q_idx + k_len - q_len`` (``q_idx`` when no lengths are given) and
        key ``kv_idx`` at ``kv_idx``, or at ``q_positions[b, q_idx]`` and
        ``k_positions[b, kv_idx]`` (``[q_idx]``, ``[kv_idx]`` unbatched).

        The function holds the table itself, so gradients reach it; call
        ``score_mod()`` again after moving the module.

        Args:
            q_len (int | None): number of queries, ``>= 0``; ``None`` with
                ``k_len=None`` for self-attention (``q_len == k_len``).
            k_len (int | None): number of keys, ``>= q_len``.
            q_positions (torch.Tensor | None): keyword only, instead of the
                lengths: integer positions ``[q]`` or ``[b, q]``.
            k_positions (torch.Tensor | None): keyword only, with
                ``q_positions``: ``[k]`` or ``[b, k]``.

        Returns:
            Callable: ``score_mod(score, b, h, q_idx, kv_idx)`` on tensors that
            broadcast together; ``score + bias`` in the dtype of ``score``.

        Raises:
            TypeError: as :meth:`forward`.
            ValueError: as :meth:`forward`.

        Example:
            >>> bias = T5RelativeBias(4)
            >>> q = k = v = torch.randn(1, 4, 6, 8)
            >>> from torch.nn.attention.flex_attention import flex_attention
            >>> out = flex_attention(q, k, v, score_mod=bias.score_mod())
        """
        weight = self.relative_attention_bias.weight  # [num_buckets, h]
        query_position, key_position = index_positions(
            q_len, k_len, q_positions, k_positions, device=weight.device
        )
        side = self.num_buckets // 2 if self.bidirectional else self.num_buckets
        settings = {
            "bidirectional": self.bidirectional,
            "side": side,
            "thresholds": _t5_thresholds_constant(side, self.max_distance),
        }

        def score_mod(score, b, h, q_idx, kv_idx):
            relative = key_position(b, kv_idx) - query_position(b, q_idx)
            bucket = _t5_bucket_pointwise(relative, **settings)
            return score + weight[bucket, h].to(score.dtype)

        return score_mod

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )


class RelativePositionEmbedding(nn.Module):
    """Learned relative position representations (Shaw et al. 2018).

    A table of ``2 * max_distance + 1`` learned vectors, one per relative
    position ``key_pos - query_pos`` in ``[-max_distance, max_distance]``;
    farther positions are clipped to the ends: the authors "hypothesized
    that precise relative position information is not useful beyond a
    certain distance". Row ``r`` of ``embedding`` belongs to the relative
    position ``r - max_distance``. Shaw et al. use two such tables, ``a^K``
    added to the keys and ``a^V`` added to the values (``dim`` the head
    size): use two instances. Their section 3.3 shares the tables across
    heads; in their experiments (section 4.1) the base model kept tables
    per layer and head, the big model per layer.

    The table, ``embedding`` (an ``nn.Embedding`` subclass), is initialised
    from ``N(0, 0.02^2)`` by its own ``reset_parameters``, as Hugging Face's
    BERT initialises its relative distance embedding.

    Args:
        max_distance (int): clipping distance ``k`` of the paper, a positive
            integer.
        dim (int): size of each vector, a positive integer.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is less than 1.

    Example:
        >>> emb = RelativePositionEmbedding(4, 16)
        >>> emb(3, 5).shape
        torch.Size([3, 5, 16])
    """

    def __init__(self, max_distance: int, dim: int) -> None:
        super().__init__()
        self.max_distance = check_size("max_distance", max_distance)
        self.dim = check_size("dim", dim)
        self.embedding = _NormalTable(2 * self.max_distance + 1, self.dim)

    def reset_parameters(self) -> None:
        """Draw the table from ``N(0, 0.02^2)`` again, as construction draws it.

        As :meth:`T5RelativeBias.reset_parameters`: the table initialises
        itself, and this method calls it.
        """
        self.embedding.reset_parameters()

    def forward(
        self,
        q_len: int | None = None,
        k_len: int | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The embedding of every query-key pair's clipped relative position.

        Query ``i`` sits at position ``q_pos = i + k_len - q_len`` (the
        queries are the last ``q_len`` of ``k_len`` tokens, as with a KV
        cache; plainly ``i`` when ``q_len == k_len``) and key ``j`` at
        ``k_pos = j``, or at the given ``q_positions[..., i]`` and
        ``k_positions[..., j]`` (packed documents, left-padded batches)::

            out[..., i, j, :] = embedding[clip(k_pos - q_pos, -max_distance, max_distance)
                                          + max_distance]

        The embeddings enter the scores through the queries (Shaw et al.'s
        ``q_i . a_ij``), so unlike the bias modules there is no
        ``score_mod``: FlexAttention's score modification does not see the
        queries.

        Args:
            q_len (int | None): number of queries, ``>= 0``; required unless
                the positions are given.
            k_len (int | None): number of keys, ``>= q_len``; ``None`` for
                ``q_len``.
            q_positions (torch.Tensor | None): keyword only, instead of the
                lengths: integer positions of the queries, ``[q]`` or batched
                ``[b, q]``.
            k_positions (torch.Tensor | None): keyword only, with
                ``q_positions``: integer positions of the keys, ``[k]`` or
                ``[b, k]``.

        Returns:
            torch.Tensor: embeddings of shape ``[q, k, d]`` (``[b, q, k, d]``
            for batched positions) on the device and in the dtype of the
            table.

        Raises:
            TypeError: if a length is not an integer or a position argument
                not a tensor.
            ValueError: if a length is negative or ``q_len > k_len``; lengths
                and positions mixed or only one position tensor given; a
                position tensor not an integer tensor of one or two axes, or
                the two of different batch sizes.
        """
        weight = self.embedding.weight  # [2 * max_distance + 1, d]
        q_pos, k_pos = bias_positions(q_len, k_len, q_positions, k_positions, device=weight.device)
        relative_position = relative_positions(q_pos, k_pos)  # [q, k] or [b, q, k]
        index = relative_position.clamp(-self.max_distance, self.max_distance) + self.max_distance
        return self.embedding(index)  # [..., q, k, d]

    def extra_repr(self) -> str:
        return f"max_distance={self.max_distance}, dim={self.dim}"
