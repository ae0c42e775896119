"""A plain reference attention, to show what each positional encoding changes.

Shapes use ``...`` for batch axes (batch, heads), ``q`` and ``k`` for the
query and key lengths, ``d`` for the query/key size and ``e`` for the value
size.
"""

from __future__ import annotations

import math

import torch

from posenc._checks import broadcast_shapes, check_bool, check_float_tensor

__all__ = ["attention"]


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """Scaled dot-product attention, ``softmax(q k^T / sqrt(d) + bias) v``.

    With ``causal=True``, query ``i`` sits at position ``i + k_len - q_len``
    and sees the keys at that position and before: the alignment of a KV
    cache, where the queries are the last ``q_len`` tokens of the sequence.
    For ``q_len == k_len`` this is the usual lower-triangular mask, and the
    result agrees with ``torch.nn.functional.scaled_dot_product_attention``
    (with ``attn_mask=bias`` or ``is_causal=causal``).

    Args:
        q (torch.Tensor): queries, shape ``(..., q, d)``, floating point.
        k (torch.Tensor): keys, shape ``(..., k, d)``, same dtype as ``q``.
        v (torch.Tensor): values, shape ``(..., k, e)``, same dtype as ``q``.
            The batch axes of ``q``, ``k`` and ``v`` broadcast together.
        bias (torch.Tensor | None): floating additive bias (e.g. ALiBi, T5,
            or ``-inf`` for a mask) that broadcasts to the scores' shape
            ``(..., q, k)``. Default: None.
        causal (bool): hide the keys after each query's position. Queries may
            not outnumber keys. Default: False.

    Returns:
        torch.Tensor: shape ``(..., q, e)``, dtype of ``q``. Empty when
        ``q_len == 0``; zero rows when ``k_len == 0`` and not causal.

    Raises:
        TypeError: if a tensor argument is not a tensor or ``causal`` is not
            a bool.
        ValueError: if a tensor is not floating point or has fewer than two
            axes, the dtypes differ, ``q`` and ``k`` differ in size ``d``
            (or it is 0), ``k`` and ``v`` differ in length, the batch axes
            do not broadcast, ``bias`` does not broadcast to the scores, or
            ``causal`` with more queries than keys.

    Example:
        >>> q = k = v = torch.randn(2, 5, 8)
        >>> attention(q, k, v, causal=True).shape
        torch.Size([2, 5, 8])
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(name, t)
        if t.ndim < 2:
            raise ValueError(f"{name} must have shape (..., seq, dim), got {_shape(t)}")
    causal = check_bool("causal", causal)
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(
            f"q, k and v must have the same dtype, got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    q_len, d = q.shape[-2:]
    k_len = k.shape[-2]
    if k.shape[-1] != d:
        raise ValueError(
            f"k must have the last dimension of q ({d}), got q {_shape(q)} and k {_shape(k)}"
        )
    if d == 0:
        raise ValueError(f"q and k must have a positive last dimension, got {_shape(q)}")
    if v.shape[-2] != k_len:
        raise ValueError(
            f"v must have the sequence length of k ({k_len}), got k {_shape(k)} and v {_shape(v)}"
        )
    try:
        batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"q, k and v must have broadcastable batch axes, got {_shape(q)}, {_shape(k)} "
            f"and {_shape(v)}"
        ) from None
    scores_shape = (*batch, q_len, k_len)
    if bias is not None:
        check_float_tensor("bias", bias)
        try:
            fits = broadcast_shapes(bias.shape, scores_shape) == scores_shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(
                f"bias must broadcast to the scores' shape {scores_shape}, got {_shape(bias)}"
            )
    if causal and q_len > k_len:
        raise ValueError(
            f"q_len must be <= k_len when causal (queries are the last keys), "
            f"got q_len={q_len} and k_len={k_len}"
        )

    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)  # (..., q, k)
    if bias is not None:
        scores = scores + bias
    if causal:
        # Query i sits at position i + k_len - q_len and sees keys j <= that.
        q_pos = torch.arange(q_len, device=q.device).unsqueeze(-1) + (k_len - q_len)  # (q, 1)
        k_pos = torch.arange(k_len, device=q.device)  # (k,)
        scores = scores.masked_fill(k_pos > q_pos, float("-inf"))  # (..., q, k)
    weights = torch.softmax(scores, dim=-1).to(v.dtype)  # (..., q, k)
    return weights @ v  # (..., q, e)
