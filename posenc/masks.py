"""Attention masks for fused kernels: an SDPA ``attn_mask`` and a FlexAttention ``mask_mod``.

The biases of posenc are added to the scores; which keys a query may see at
all is the mask's business. Fused attention kernels take the two in their
own forms:

* :func:`attention_mask` builds the ``attn_mask`` of
  ``torch.nn.functional.scaled_dot_product_attention`` (and the ``bias`` of
  :func:`posenc.attention`): a boolean mask (``True`` where a query attends)
  or an additive float one (``-inf`` where it does not), optionally with a
  bias folded in;
* :func:`attention_mask_mod` gives the same rule one pair at a time, as
  FlexAttention's ``mask_mod`` (for ``create_block_mask``), to pair with the
  ``score_mod`` of a bias module or :func:`posenc.alibi_score_mod`.

One rule serves both. Query ``i`` and key ``j`` sit at positions ``q_pos``
and ``k_pos``: from lengths, ``q_pos = i + k_len - q_len`` and ``k_pos = j``
(the queries are the newest tokens: chunked prefill and decoding with a KV
cache), or given (packed documents, left-padded batches). The query attends
the key when all of these that apply hold::

    causal:         k_pos <= q_pos
    window=w:       q_pos - k_pos < w          (causal: the w newest keys, itself included)
                    |q_pos - k_pos| < w        (not causal)
    document ids:   q_document_ids[..., i] == k_document_ids[..., j]

``scaled_dot_product_attention(..., is_causal=True)`` aligns its mask to the
top left (query ``i`` sees keys ``j <= i``), which is wrong when fewer
queries than keys are computed, as in chunked prefill; the causal rule here
is aligned to the bottom right, as ``torch.nn.attention.bias.causal_lower_right``.
The causal window keeps the ``w`` newest keys, the query's own included, as
Hugging Face transformers' ``sliding_window_overlay`` does for Mistral's
``sliding_window``.

Shapes use ``b`` batch rows, ``h`` heads, ``q`` queries and ``k`` keys.

References:
    PyTorch, ``torch.nn.functional.scaled_dot_product_attention`` (a boolean
    ``attn_mask`` is ``True`` where a query attends; a float one is added)
    and ``torch.nn.attention.flex_attention``; Juechu Dong, Boyuan Feng,
    Driss Guessous, Yanbo Liang, Horace He, "Flex Attention: A Programming
    Model for Generating Optimized Attention Kernels", 2024,
    https://arxiv.org/abs/2412.05496 (document masks, sliding windows and
    ALiBi as ``mask_mod`` and ``score_mod``).

    Albert Q. Jiang et al., "Mistral 7B", 2023,
    https://arxiv.org/abs/2310.06825 (sliding-window attention).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from posenc._checks import check_bool, check_dtype, check_float_tensor, check_size
from posenc._positions import (
    bias_positions,
    check_index_tensor,
    check_position_pair,
    index_positions,
    lookup,
    relative_positions,
)

__all__ = ["attention_mask", "attention_mask_mod"]


def _allowed(
    relative: torch.Tensor, same_document: torch.Tensor | None, causal: bool, window: int | None
) -> torch.Tensor:
    """Whether each query attends each key, from ``k_pos - q_pos``; elementwise."""
    allowed = same_document
    if causal:
        allowed = _both(allowed, relative <= 0)
    if window is not None:
        near = -relative < window if causal else relative.abs() < window
        allowed = _both(allowed, near)
    if allowed is None:
        allowed = torch.ones_like(relative, dtype=torch.bool)
    return allowed


def _both(a: torch.Tensor | None, b: torch.Tensor) -> torch.Tensor:
    return b if a is None else a & b


def _check_rule(
    q_len: object,
    k_len: object,
    q_positions: object,
    k_positions: object,
    q_document_ids: object,
    k_document_ids: object,
    causal: object,
    window: object,
):
    """Validate the settings shared by both builders.

    Returns:
        ``q_len``, ``k_len`` (taken from the document ids when neither
        lengths nor positions are given), the document ids (or ``None``),
        ``causal`` and ``window``.
    """
    causal = check_bool("causal", causal)
    if window is not None:
        window = check_size("window", window)
    documents = None
    if q_document_ids is not None or k_document_ids is not None:
        if q_document_ids is None or k_document_ids is None:
            missing = "q_document_ids" if q_document_ids is None else "k_document_ids"
            raise ValueError(
                f"q_document_ids and k_document_ids must be given together, {missing} is None"
            )
        documents = (
            check_index_tensor("q_document_ids", q_document_ids),
            check_index_tensor("k_document_ids", k_document_ids),
        )
        if q_len is None and k_len is None and q_positions is None and k_positions is None:
            q_len, k_len = documents[0].shape[-1], documents[1].shape[-1]
    pair = check_position_pair(q_len, k_len, q_positions, k_positions)
    _check_shapes(q_len, k_len, pair, documents)
    return q_len, k_len, documents, causal, window


def _check_shapes(q_len, k_len, pair, documents) -> None:
    """Document ids must match the queries and keys; batched tensors one batch size."""
    tensors = {}
    if pair is not None:
        tensors.update(q_positions=pair[0], k_positions=pair[1])
    if documents is not None:
        tensors.update(q_document_ids=documents[0], k_document_ids=documents[1])
        if pair is not None:
            sizes = (pair[0].shape[-1], pair[1].shape[-1])
            given = "q_positions and k_positions"
        elif q_len is not None:
            q = check_size("q_len", q_len, minimum=0)
            sizes = (q, q if k_len is None else check_size("k_len", k_len, minimum=0))
            given = "q_len and k_len"
        else:
            sizes = None  # bias_positions names the missing q_len
        if sizes is not None and (documents[0].shape[-1], documents[1].shape[-1]) != sizes:
            raise ValueError(
                f"q_document_ids and k_document_ids must have {sizes[0]} and {sizes[1]} entries "
                f"along their last axis (from {given}), got {tuple(documents[0].shape)} and "
                f"{tuple(documents[1].shape)}"
            )
    batch = {name: t.shape[0] for name, t in tensors.items() if t.ndim == 2}
    if len(set(batch.values())) > 1:
        listed = ", ".join(f"{name} {size}" for name, size in batch.items())
        raise ValueError(
            f"batched positions and document ids must share one batch size, got {listed}"
        )


def attention_mask(
    q_len: int | None = None,
    k_len: int | None = None,
    *,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    q_document_ids: torch.Tensor | None = None,
    k_document_ids: torch.Tensor | None = None,
    causal: bool = True,
    window: int | None = None,
    bias: torch.Tensor | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The ``attn_mask`` of ``scaled_dot_product_attention``: causal, windowed, per document, with a bias.

    Query ``i`` attends key ``j`` when
    ``k_pos <= q_pos`` (``causal``), ``q_pos - k_pos < window`` (or
    ``|q_pos - k_pos| < window`` when not causal) and the two share a
    document id. Positions come from the lengths, ``q_pos = i + k_len -
    q_len`` and ``k_pos = j`` (the causal mask aligned to the bottom right,
    as chunked prefill with a KV cache needs it and as
    ``torch.nn.attention.bias.causal_lower_right`` defines it; SDPA's
    ``is_causal`` aligns it to the top left), or from ``q_positions`` and
    ``k_positions``.

    * ``dtype=torch.bool``: ``True`` where the query attends, SDPA's
      convention for a boolean ``attn_mask``.
    * a floating ``dtype`` (default float32, or the bias's dtype): additive,
      ``0`` (or the bias) where the query attends and ``-inf`` elsewhere;
      ``softmax(q k^T / sqrt(d) + mask)`` is then SDPA's result and
      :func:`posenc.attention`'s with ``bias=mask``. SDPA wants a float mask
      in the dtype of the query.

    Packed documents: give every token its position within its document
    and its document's id (both ``[t]`` or ``[b, t]``). Left-padded
    batches: count each row's positions from its first real token and give
    the padding a document id of its own; padding queries then attend only
    padding, so no row is empty. A row whose every key is masked (possible
    with positions, document ids or a window that exclude all keys) is all
    ``-inf``: SDPA and softmax return NaN there.

    Args:
        q_len (int | None): number of queries, ``>= 0``; ``None`` when the
            positions are given, or the document ids alone (their lengths).
        k_len (int | None): number of keys, ``>= q_len``; ``None`` for
            ``q_len``.
        q_positions (torch.Tensor | None): keyword only, instead of the
            lengths: integer positions of the queries, ``[q]`` or ``[b, q]``.
        k_positions (torch.Tensor | None): keyword only, with
            ``q_positions``: integer positions of the keys, ``[k]`` or
            ``[b, k]``.
        q_document_ids (torch.Tensor | None): keyword only: integer document
            id of each query, ``[q]`` or ``[b, q]``; ``None`` for one
            document.
        k_document_ids (torch.Tensor | None): keyword only, with
            ``q_document_ids``: ``[k]`` or ``[b, k]``.
        causal (bool): hide the keys after each query's position.
        window (int | None): attend only keys fewer than ``window``
            positions away (sliding-window attention, e.g. Mistral's
            ``sliding_window``); ``None`` for no window.
        bias (torch.Tensor | None): a float bias to fold into an additive
            mask, shape ``[..., q, k]`` (e.g. ``[h, q, k]`` or ``[b, h, q,
            k]`` from :func:`posenc.alibi_bias` or a bias module with the same
            positions).
        dtype (torch.dtype | None): ``torch.bool`` or a floating dtype;
            ``None`` for the bias's dtype, or float32 without a bias.
        device (torch.device | str | None): device of the result; ``None``
            for that of the positions, document ids or bias (the first
            given), else the default device.

    Returns:
        torch.Tensor: ``[q, k]``, or ``[b, 1, q, k]`` when a position or
        document tensor is batched (to broadcast over the heads); with a bias,
        the broadcast shape of the bias and that mask (``[h, q, k]``,
        ``[b, h, q, k]``, ...).

    Raises:
        TypeError: if a length or ``window`` is not an integer, ``causal`` not
            a bool, a tensor argument not a tensor or ``dtype`` not a dtype.
        ValueError: if a length is negative or ``q_len > k_len``, ``window <
            1``; lengths and positions are mixed or a position or document
            tensor comes without its twin; one is not an integer tensor of
            one or two axes, the document ids do not match the queries and
            keys, or batched tensors differ in batch size; the bias is not
            floating point or does not broadcast to ``[..., q, k]``; a bias
            with ``dtype=torch.bool``.

    Example:
        >>> attention_mask(2, 4, dtype=torch.bool)  # chunked prefill: the last 2 of 4
        tensor([[ True,  True,  True, False],
                [ True,  True,  True,  True]])
        >>> ids = torch.tensor([0, 0, 1, 1])
        >>> pos = torch.tensor([0, 1, 0, 1])  # two packed documents
        >>> attention_mask(q_positions=pos, k_positions=pos, q_document_ids=ids,
        ...                k_document_ids=ids)
        tensor([[0., -inf, -inf, -inf],
                [0., 0., -inf, -inf],
                [-inf, -inf, 0., -inf],
                [-inf, -inf, 0., 0.]])
    """
    q_len, k_len, documents, causal, window = _check_rule(
        q_len, k_len, q_positions, k_positions, q_document_ids, k_document_ids, causal, window
    )
    if bias is not None:
        check_float_tensor("bias", bias)
    if dtype is None:
        dtype = torch.float32 if bias is None else bias.dtype
    elif dtype != torch.bool:
        dtype = check_dtype(dtype)
    if dtype == torch.bool and bias is not None:
        raise ValueError("a bias needs a floating dtype: a boolean mask cannot carry it")
    if device is None:
        given = (q_positions, q_document_ids, bias)
        device = next((t.device for t in given if isinstance(t, torch.Tensor)), None)

    q_pos, k_pos = bias_positions(q_len, k_len, q_positions, k_positions, device=device)
    relative = relative_positions(q_pos, k_pos)  # [q, k] or [b, q, k]
    same_document = None
    if documents is not None:
        q_doc, k_doc = (d.to(relative.device) for d in documents)
        same_document = q_doc.unsqueeze(-1) == k_doc.unsqueeze(-2)  # [q, k] or [b, q, k]
    allowed = _allowed(relative, same_document, causal, window)
    if allowed.ndim == 3:
        allowed = allowed.unsqueeze(-3)  # [b, 1, q, k]: one mask for every head

    if bias is not None:
        shape = tuple(relative.shape[-2:])
        try:
            fits = bias.ndim >= 2 and tuple(bias.shape[-2:]) == shape
            torch.broadcast_shapes(bias.shape, allowed.shape)
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(
                f"bias must have shape (..., {shape[0]}, {shape[1]}) broadcasting with the mask "
                f"{tuple(allowed.shape)}, got {tuple(bias.shape)}"
            )
    if dtype == torch.bool:
        return allowed
    values = torch.zeros((), dtype=dtype, device=allowed.device) if bias is None else bias
    return torch.where(allowed, values.to(device=allowed.device, dtype=dtype), float("-inf"))


def attention_mask_mod(
    q_len: int | None = None,
    k_len: int | None = None,
    *,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    q_document_ids: torch.Tensor | None = None,
    k_document_ids: torch.Tensor | None = None,
    causal: bool = True,
    window: int | None = None,
    device: torch.device | str | None = None,
) -> Callable[..., torch.Tensor]:
    """The rule of :func:`attention_mask` as a FlexAttention ``mask_mod``.

    Returns ``mask_mod(b, h, q_idx, kv_idx) -> bool`` for
    ``torch.nn.attention.flex_attention.create_block_mask`` (``True`` where
    the query attends), elementwise on broadcast index tensors. Query
    ``q_idx`` sits at ``q_idx + k_len - q_len`` (``q_idx`` when no lengths
    are given) and key ``kv_idx`` at ``kv_idx``, or at ``q_positions[b,
    q_idx]`` and ``k_positions[b, kv_idx]``; the document ids are looked up
    the same way. Pass FlexAttention the lengths of the attention call as
    ``Q_LEN`` and ``KV_LEN``, and the batch size as ``B`` when a tensor is
    batched (``B=None`` otherwise).

    Args:
        q_len (int | None): number of queries, ``>= 0``, to place the
            queries at the end of the keys; ``None`` with ``k_len=None`` for
            ``q_len == k_len`` (or the lengths of the document ids).
        k_len (int | None): number of keys, ``>= q_len``.
        q_positions (torch.Tensor | None): keyword only, instead of the
            lengths: integer positions of the queries, ``[q]`` or ``[b, q]``.
        k_positions (torch.Tensor | None): keyword only, with
            ``q_positions``: ``[k]`` or ``[b, k]``.
        q_document_ids (torch.Tensor | None): keyword only: integer document
            id of each query, ``[q]`` or ``[b, q]``.
        k_document_ids (torch.Tensor | None): keyword only, with
            ``q_document_ids``: ``[k]`` or ``[b, k]``.
        causal (bool): hide the keys after each query's position.
        window (int | None): attend only keys fewer than ``window``
            positions away; ``None`` for no window.
        device (torch.device | str | None): device of the attention inputs
            (the tables are moved there); ``None`` for that of the positions
            or document ids.

    Returns:
        Callable: ``mask_mod(b, h, q_idx, kv_idx)``, a boolean tensor of the
        indices' broadcast shape.

    Raises:
        TypeError: as :func:`attention_mask`.
        ValueError: as :func:`attention_mask` (without the bias's errors).

    Example:
        >>> mask_mod = attention_mask_mod(2, 4)  # the last 2 queries of 4 keys
        >>> mask_mod(0, 0, torch.arange(2)[:, None], torch.arange(4))
        tensor([[ True,  True,  True, False],
                [ True,  True,  True,  True]])
    """
    q_len, k_len, documents, causal, window = _check_rule(
        q_len, k_len, q_positions, k_positions, q_document_ids, k_document_ids, causal, window
    )
    if device is None:
        given = (q_positions, q_document_ids)
        device = next((t.device for t in given if isinstance(t, torch.Tensor)), None)
    query_position, key_position = index_positions(
        q_len, k_len, q_positions, k_positions, device=device
    )
    if documents is not None:
        query_document, key_document = (lookup(d.to(device)) for d in documents)

    def mask_mod(b, h, q_idx, kv_idx):
        relative = key_position(b, kv_idx) - query_position(b, q_idx)
        same_document = None
        if documents is not None:
            same_document = query_document(b, q_idx) == key_document(b, kv_idx)
        return _allowed(relative, same_document, causal, window)

    return mask_mod
