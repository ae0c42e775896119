"""Transformer-XL's relative attention scores (Dai et al. 2019).

Transformer-XL adds no position to the token features. Its attention score
between the query at position ``i`` and the key at position ``j`` has four
terms, two of which see the relative distance ``i - j`` through a sinusoidal
encoding ``R_{i-j}``::

    A[i, j] = q_i . k_j            (a) content-content
            + q_i . r_{i-j}        (b) content-position
            + u . k_j              (c) global content bias
            + v . r_{i-j}          (d) global position bias
            = (q_i + u) . k_j + (q_i + v) . r_{i-j}

with ``q_i = W_q E_i``, ``k_j = W_{k,E} E_j``, ``r_{i-j} = W_{k,R} R_{i-j}`` and
two learned vectors ``u`` and ``v``.

* :func:`transformer_xl_positions` gives the relative distances, in the
  descending order of Transformer-XL's ``pos_seq``, whose sinusoidal encoding
  (``posenc.sinusoidal(..., layout="concat")``) is ``R``.
* :func:`relative_shift` is Transformer-XL's ``_rel_shift``: it turns the
  ``(q, r)`` matrix of scores against each *distance* into the ``(q, k)``
  matrix against each *key* with one pad and two reshapes, no gather.
* :func:`transformer_xl_scores` returns the full ``(..., q, k)`` score matrix
  ``A`` from the projected queries, keys, relative encodings and the two
  biases.

Shapes use ``q`` queries (``q_len``), ``k`` keys (``k_len``), ``r`` relative
distances (``r_len``) and ``d`` features. As everywhere in ``posenc``, the
queries are the last ``q_len`` of the ``k_len`` tokens: query ``i`` sits at
position ``i + m`` with ``m = k_len - q_len`` (Transformer-XL's memory length
``mlen``) and key ``j`` at ``j``, so the distance between them is
``i + m - j``, and queries may not outnumber keys.

References:
    Zihang Dai et al., "Transformer-XL: Attentive Language Models Beyond a
    Fixed-Length Context", ACL 2019, https://arxiv.org/abs/1901.02860, and its
    code https://github.com/kimiyoung/transformer-xl
    (``pytorch/mem_transformer.py``: ``PositionalEmbedding``, ``_rel_shift``,
    ``RelPartialLearnableMultiHeadAttn``).

    Zhilin Yang et al., "XLNet: Generalized Autoregressive Pretraining for
    Language Understanding", NeurIPS 2019, https://arxiv.org/abs/1906.08237
    (``relative_positional_encoding`` and ``rel_shift``, the bidirectional
    case).
"""

from __future__ import annotations

import torch

from posenc._checks import (
    broadcast_shapes,
    check_bool,
    check_float_tensor,
    check_size,
    check_tensor,
)
from posenc._positions import check_lengths

__all__ = ["relative_shift", "transformer_xl_positions", "transformer_xl_scores"]


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def transformer_xl_positions(
    q_len: int,
    k_len: int | None = None,
    *,
    bidirectional: bool = False,
    clamp_len: int | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The relative distances ``i - j`` whose encodings Transformer-XL computes, descending.

    Causal (Transformer-XL's ``pos_seq = arange(klen - 1, -1, -1)``): the
    ``k_len`` distances ``k_len - 1, ..., 1, 0``, enough for every key at or
    before its query. Bidirectional: the ``k_len + q_len - 1`` distances
    ``k_len - 1, ..., 0, ..., -(q_len - 1)``, which also cover the keys after
    each query (XLNet's ``attn_type="bi"`` uses the same range with one more
    distance, ``k_len``, in front). Row ``m`` of the result is the distance
    ``k_len - 1 - m``, the order :func:`relative_shift` expects.

    ``clamp_len`` clips the distances to ``[-clamp_len, clamp_len]``, as
    Transformer-XL's and XLNet's ``clamp_len`` option does: all farther
    distances share the encoding of ``clamp_len``.

    Args:
        q_len (int): number of queries, ``>= 0``.
        k_len (int | None): number of keys (memory plus current segment),
            ``>= q_len``; ``None`` for ``q_len``.
        bidirectional (bool): also include the negative distances of keys
            after their query. Default: False.
        clamp_len (int | None): clip the distances to this magnitude, a
            positive integer; ``None`` for no clipping. Default: None.
        device (torch.device | str | None): device of the result.

    Returns:
        torch.Tensor: int64 distances, shape ``[r]`` with ``r = k_len`` (causal)
        or ``max(k_len + q_len - 1, 0)`` (bidirectional).

    Raises:
        TypeError: if a length is not an integer or ``bidirectional`` not a bool.
        ValueError: if a length is negative, ``q_len > k_len`` or
            ``clamp_len < 1``.

    Example:
        >>> transformer_xl_positions(2, 4)
        tensor([3, 2, 1, 0])
        >>> transformer_xl_positions(2, 4, bidirectional=True)
        tensor([ 3,  2,  1,  0, -1])
    """
    q_len, k_len = check_lengths(q_len, k_len)
    bidirectional = check_bool("bidirectional", bidirectional)
    if clamp_len is not None:
        clamp_len = check_size("clamp_len", clamp_len)
    lowest = -(q_len - 1) if bidirectional else 0
    r_len = max(k_len - lowest, 0)
    positions = (k_len - 1) - torch.arange(r_len, dtype=torch.int64, device=device)  # [r]
    if clamp_len is not None:
        positions = positions.clamp(-clamp_len, clamp_len)
    return positions


def relative_shift(x: torch.Tensor, k_len: int | None = None) -> torch.Tensor:
    """Transformer-XL's relative shift: scores per distance to scores per key.

    ``x[..., i, m]`` is the score of query ``i`` against the relative distance
    ``k_len - 1 - m`` (the descending order of
    :func:`transformer_xl_positions`). Query ``i`` sits at position
    ``i + k_len - q_len`` and key ``j`` at ``j``, so the pair ``(i, j)`` needs
    column ``m = j + q_len - 1 - i``: row ``i`` moves left by
    ``q_len - 1 - i``. The trick does this without an index tensor (as
    ``_rel_shift`` in Transformer-XL and the "skewing" of Music Transformer):

    1. pad one zero column on the left:    ``[..., q, r]  -> [..., q, r + 1]``
    2. reshape (same memory order):         ``-> [..., r + 1, q]``
    3. drop the first row (``q`` numbers):  ``-> [..., r, q]``
    4. reshape back and keep ``k_len`` keys: ``-> [..., q, r] -> [..., q, k]``

    Element ``(i, j)`` of the result is then element ``q + i r + j`` of the
    padded rows laid end to end, i.e. padded column ``q + j - i`` of row ``i``
    while that is at most ``r``, which is ``x[..., i, j + q - 1 - i]``::

        out[..., i, j] = x[..., i, j + q_len - 1 - i]    if j + q_len - 1 - i < r

    * ``r = k_len`` (Transformer-XL, causal): exact for every key at or before
      its query, ``j <= i + k_len - q_len``. The other entries are **not**
      scores of the pair: ``out[..., i, i + k_len - q_len + 1]`` is the pad
      (zero) and the entries right of it are ``x[..., i + 1, ...]``, numbers of
      the *next* query. The causal mask must hide them.
    * ``r >= k_len + q_len - 1`` (distances down to ``-(q_len - 1)``, the
      bidirectional case): exact everywhere.

    Args:
        x (torch.Tensor): scores against relative distances, shape
            ``[..., q, r]``, any dtype, at least two axes.
        k_len (int | None): number of keys ``k``, with ``q <= k <= r``;
            ``None`` for ``r`` (Transformer-XL).

    Returns:
        torch.Tensor: shape ``[..., q, k]``, dtype and device of ``x``.

    Raises:
        TypeError: if ``x`` is not a tensor or ``k_len`` not an integer.
        ValueError: if ``x`` has fewer than two axes, ``k_len`` is negative or
            exceeds ``r``, or ``q > k_len``.

    Example:
        >>> x = torch.tensor([[2, 1, 0], [12, 11, 10], [22, 21, 20]])  # 10 i + distance
        >>> relative_shift(x)  # 10 i + (i - j) where j <= i; the rest is not meaningful
        tensor([[ 0,  0, 12],
                [11, 10,  0],
                [22, 21, 20]])
    """
    x = check_tensor("x", x)
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., q_len, r_len), got {_shape(x)}")
    *batch, q_len, r_len = x.shape
    k_len = r_len if k_len is None else check_size("k_len", k_len, minimum=0)
    if k_len > r_len:
        raise ValueError(
            f"k_len must not exceed the number of distances r_len={r_len} (the last axis of x), "
            f"got k_len={k_len}"
        )
    if q_len > k_len:
        raise ValueError(
            "q_len must not exceed k_len (queries are aligned to the end of the keys), "
            f"got q_len={q_len} (x {_shape(x)}), k_len={k_len}"
        )
    zero = x.new_zeros((*batch, q_len, 1))
    padded = torch.cat([zero, x], dim=-1)  # [..., q, r + 1]
    padded = padded.reshape(*batch, r_len + 1, q_len)  # [..., r + 1, q]: same memory order
    shifted = padded[..., 1:, :].reshape(*batch, q_len, r_len)  # drop q numbers: [..., q, r]
    return shifted[..., :k_len]  # [..., q, k]


def transformer_xl_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    r: torch.Tensor,
    u: torch.Tensor,
    v: torch.Tensor,
) -> torch.Tensor:
    """Transformer-XL's attention scores ``A = (q + u) k^T + shift((q + v) r^T)``.

    For query ``i`` (at position ``i + k_len - q_len``) and key ``j``, with the
    distance ``delta = i + k_len - q_len - j``::

        A[..., i, j] = q_i . k_j + q_i . r_delta + u . k_j + v . r_delta

    the terms (a), (b), (c) and (d) of Dai et al. (2019), eq. (3). This is the
    score before Transformer-XL scales it by ``1 / sqrt(d)`` and masks it.
    ``r`` holds one row per distance, in the order of
    :func:`transformer_xl_positions`: row ``m`` is ``r_{k_len - 1 - m}``.

    * ``r_len = k_len`` (Transformer-XL): distances ``k_len - 1 .. 0``. The keys
      after a query have no encoding, so their entries are ``-inf``: the
      causal mask, applied here rather than left to the garbage that
      :func:`relative_shift` puts there.
    * ``r_len = k_len + q_len - 1``: distances down to ``-(q_len - 1)``; every
      entry is a score (bidirectional attention, as in XLNet).

    Args:
        q (torch.Tensor): content queries ``W_q E``, shape ``[..., q, d]``,
            floating point.
        k (torch.Tensor): content keys ``W_{k,E} E``, shape ``[..., k, d]``.
        r (torch.Tensor): projected relative encodings ``W_{k,R} R``, shape
            ``[..., r, d]`` (usually ``[h, r, d]`` or ``[r, d]``: shared by the
            batch).
        u (torch.Tensor): global content bias, shape ``[d]``, or ``[h, 1, d]``
            for one per head; must broadcast to ``q``'s shape.
        v (torch.Tensor): global position bias, shaped like ``u``.

    Returns:
        torch.Tensor: scores of shape ``[..., q, k]`` (the broadcast batch axes),
        dtype of ``q``.

    Raises:
        TypeError: if an argument is not a tensor.
        ValueError: if a tensor is not floating point, the dtypes differ,
            ``q``, ``k`` or ``r`` has fewer than two axes, a last axis differs
            from ``q``'s ``d`` (or ``d == 0``), ``q_len > k_len``, ``r_len`` is
            neither ``k_len`` nor ``k_len + q_len - 1``, the batch axes do not
            broadcast, or ``u``/``v`` do not broadcast to ``q``.

    Example:
        >>> q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
        >>> r, u, v = torch.randn(2, 5, 4), torch.randn(4), torch.randn(4)
        >>> transformer_xl_scores(q, k, r, u, v).shape
        torch.Size([2, 3, 5])
    """
    for name, t in (("q", q), ("k", k), ("r", r), ("u", u), ("v", v)):
        check_float_tensor(name, t)
    dtypes = {t.dtype for t in (q, k, r, u, v)}
    if len(dtypes) > 1:
        raise ValueError(
            f"q, k, r, u and v must have the same dtype, got {q.dtype}, {k.dtype}, "
            f"{r.dtype}, {u.dtype} and {v.dtype}"
        )
    for name, t in (("q", q), ("k", k), ("r", r)):
        if t.ndim < 2:
            raise ValueError(f"{name} must have shape (..., seq, d), got {_shape(t)}")
    q_len, d = q.shape[-2:]
    k_len, r_len = k.shape[-2], r.shape[-2]
    if d == 0:
        raise ValueError(f"q must have a positive last dimension d, got {_shape(q)}")
    for name, t in (("k", k), ("r", r), ("u", u), ("v", v)):
        if t.ndim == 0 or t.shape[-1] != d:
            raise ValueError(
                f"{name} must have the last dimension of q ({d}), got q {_shape(q)} and "
                f"{name} {_shape(t)}"
            )
    if q_len > k_len:
        raise ValueError(
            "q_len must not exceed k_len (queries are aligned to the end of the keys), "
            f"got q {_shape(q)} and k {_shape(k)}"
        )
    bidirectional = k_len + q_len - 1
    if r_len != k_len and r_len != bidirectional:
        raise ValueError(
            f"r must hold k_len={k_len} (causal) or k_len + q_len - 1={bidirectional} "
            f"(bidirectional) relative distances, got r {_shape(r)}"
        )
    try:
        broadcast_shapes(q.shape[:-2], k.shape[:-2], r.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"q, k and r must have broadcastable batch axes, got {_shape(q)}, {_shape(k)} "
            f"and {_shape(r)}"
        ) from None
    for name, t in (("u", u), ("v", v)):
        try:
            fits = broadcast_shapes(q.shape, t.shape) == q.shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(
                f"{name} must broadcast to the shape of q {_shape(q)} "
                f"(e.g. [d] or [h, 1, d]), got {_shape(t)}"
            )

    content = (q + u) @ k.transpose(-2, -1)  # (a) + (c): [..., q, k]
    position = relative_shift((q + v) @ r.transpose(-2, -1), k_len)  # (b) + (d): [..., q, k]
    scores = content + position
    if r_len == k_len:
        # Keys after their query have no distance in r: hide what the shift left there.
        q_pos = torch.arange(q_len, device=q.device).unsqueeze(-1) + (k_len - q_len)  # [q, 1]
        k_pos = torch.arange(k_len, device=q.device)  # [k]
        scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
    return scores
