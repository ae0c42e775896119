"""CoPE: contextual position encoding (Golovneva et al. 2024).

Every other encoding in posenc counts tokens. CoPE lets each attention head
count what it chooses: a gate ``g_ij = sigmoid(q_i . k_j)`` in ``(0, 1)``
says how much key ``j`` counts for query ``i``, and the position of key
``j`` seen from query ``i`` is the sum of the gates from ``j`` up to the
query::

    p_ij = sum over t = j .. i of g_it

A head whose gates open only on full stops measures distances in sentences;
one whose gates are all 1 counts tokens (``p_ij = i - j + 1``). Positions
are fractional, so the position embedding is interpolated between the two
neighbouring integer positions; since only its product with the query is
needed, CoPE interpolates the scalars ``z_i[p] = q_i . e[p]`` instead of the
vectors.

Shapes use ``b`` for any batch shape, ``h`` heads, ``q`` queries, ``k``
keys, ``d`` features per head and ``P`` positions (``max_positions``).

Cost. The bias is per pair and depends on the content: it needs the whole
row of scores of a query before its softmax (the sum runs over the keys from
``j`` to the query), so it is not a pointwise ``score_mod`` of a fused
kernel; the scores are materialised (or a kernel makes an extra pass over
the keys). With a KV cache nothing positional can be cached: the gates of
the old keys depend on the new query, so every decoding step recomputes
``k`` gates and their reverse cumulative sum, and ``P`` position logits
``q . e[n]`` per head. The gates are the sigmoids of the scores already
computed, so the extra work is of order ``k + P * d`` per query and head,
small beside the ``k * d`` of the scores when ``P`` is small; what costs is
that the scores must exist before the bias can be formed.

Packed documents and padding need no positions: CoPE takes them from the
mask. With the scores of other documents (or of padding) at ``-inf``, their
gates are 0, so a query counts only the keys of its own document (see
:func:`posenc.attention_mask` with document ids).

References:
    Olga Golovneva, Tianlu Wang, Jason Weston, Sainbayar Sukhbaatar,
    "Contextual Position Encoding: Learning to Count What's Important",
    2024, https://arxiv.org/abs/2405.18719 (the code in its Appendix B),
    and its code https://github.com/facebookresearch/RAM
    (``projects/cope``).

    Phil Wang, x-transformers, https://github.com/lucidrains/x-transformers,
    class ``CoPE`` in ``x_transformers/x_transformers.py``, which this
    module equals (hard interpolation, no talking heads).
"""

from __future__ import annotations

import torch
from torch import nn

from posenc._checks import check_float_tensor, check_size

__all__ = ["CoPE"]


class CoPE(nn.Module):
    """Contextual position encoding (Golovneva et al. 2024), as an additive bias.

    ``forward(q, scores)`` returns the bias that the caller adds to
    ``scores`` before the softmax::

        g[..., i, j] = sigmoid(scores[..., i, j])
        p[..., i, j] = min(sum over t >= j of g[..., i, t], max_positions - 1)
        z[..., i, n] = q[..., i, :] . pos_emb[n]        (n = 0 .. max_positions - 1)
        out[..., i, j] = (p - floor p) * z[..., i, ceil p] + (1 - p + floor p) * z[..., i, floor p]

    ``scores`` are the attention logits the caller passes to the softmax,
    with masked entries ``-inf`` (or a very negative number): their gate
    is 0, so the sum over ``t >= j`` counts the keys from ``j`` to the
    query and nothing after it. Under a causal mask ``p[..., i, j]`` is the
    paper's ``sum_{t=j}^{i} g_it``. The paper's code and x-transformers pass
    the scaled logits ``q . k / sqrt(d)`` and add the unscaled ``q . e``, as
    here. (The training code in facebookresearch/RAM also divides the
    position logits by ``sqrt(d)`` by default, which a learned ``pos_emb``
    absorbs.) The gradient flows through the interpolation weight
    ``p - floor p`` into the gates and through ``z`` into ``q`` and
    ``pos_emb``; ``floor`` and ``ceil`` themselves have none.

    This is x-transformers' ``CoPE(dim, heads, max_pos)`` with its defaults
    (hard interpolation, no soft one-hot, no talking heads). One table of
    ``max_positions`` embeddings is shared by all heads, as in the paper's
    code and x-transformers; ``n_heads`` fixes the head axis of the inputs.
    The table starts at zero (so the bias starts at zero), as in both.

    Args:
        dim (int): features per head ``d``, a positive integer.
        n_heads (int): number of heads ``h``, a positive integer.
        max_positions (int): number of integer positions ``P``, a positive
            integer; fractional positions are clamped to ``P - 1`` (the
            paper's ``npos_max``; its experiments use the block size + 1).

    Attributes:
        pos_emb (nn.Parameter): shape ``[P, d]``, the embedding ``e[n]`` of
            each integer position (x-transformers' layout; the paper's code
            stores its transpose).

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is less than 1.

    Example:
        >>> cope = CoPE(16, 4, max_positions=8)
        >>> q, k = torch.randn(2, 2, 4, 5, 16).unbind(0)
        >>> scores = q @ k.transpose(-1, -2) / 16**0.5
        >>> cope(q, scores).shape
        torch.Size([2, 4, 5, 5])
    """

    def __init__(self, dim: int, n_heads: int, max_positions: int) -> None:
        super().__init__()
        self.dim = check_size("dim", dim)
        self.n_heads = check_size("n_heads", n_heads)
        self.max_positions = check_size("max_positions", max_positions)
        self.pos_emb = nn.Parameter(torch.zeros(self.max_positions, self.dim))

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Zero the position embeddings, as construction does (the bias starts at zero)."""
        self.pos_emb.zero_()

    def _check(self, q: object, scores: object) -> tuple[torch.Tensor, torch.Tensor]:
        q = check_float_tensor("q", q)
        scores = check_float_tensor("scores", scores)
        if q.dim() < 3 or q.shape[-3] != self.n_heads or q.shape[-1] != self.dim:
            raise ValueError(
                f"q must have shape (..., n_heads={self.n_heads}, q_len, dim={self.dim}), "
                f"got {tuple(q.shape)}"
            )
        if scores.dim() != q.dim() or scores.shape[:-1] != q.shape[:-1]:
            raise ValueError(
                f"scores must have shape (*q.shape[:-1], k_len) = "
                f"({', '.join(str(s) for s in q.shape[:-1])}, k_len), got {tuple(scores.shape)}"
            )
        return q, scores

    def positions(self, scores: torch.Tensor) -> torch.Tensor:
        """The contextual positions ``p``: gates summed from each key to the end, clamped.

        Args:
            scores (torch.Tensor): floating-point logits ``[..., q, k]``,
                masked entries ``-inf``.

        Returns:
            torch.Tensor: ``[..., q, k]``, in ``[0, max_positions - 1]``, in
            the dtype of ``scores``.

        Raises:
            TypeError: if ``scores`` is not a tensor.
            ValueError: if ``scores`` is not floating point or has fewer
                than 2 dimensions.
        """
        scores = check_float_tensor("scores", scores)
        if scores.dim() < 2:
            raise ValueError(
                f"scores must have shape (..., q_len, k_len), got {tuple(scores.shape)}"
            )
        gates = torch.sigmoid(scores)  # [..., q, k]
        # sum over t >= j: a cumulative sum of the row read backwards
        positions = gates.flip(-1).cumsum(dim=-1).flip(-1)  # [..., q, k]
        return positions.clamp(max=self.max_positions - 1)

    def forward(self, q: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """The CoPE bias to add to ``scores``.

        Args:
            q (torch.Tensor): queries ``[..., h, q, d]`` (x-transformers:
                ``[b, h, n, d]``), floating point.
            scores (torch.Tensor): the logits ``[..., h, q, k]`` that the
                softmax will see, masked entries ``-inf``; the same leading
                shape as ``q``.

        Returns:
            torch.Tensor: the bias ``[..., h, q, k]`` in the dtype of
            ``scores``, on their device.

        Raises:
            TypeError: if ``q`` or ``scores`` is not a tensor.
            ValueError: if one is not floating point, ``q`` is not
                ``[..., n_heads, q, dim]`` or ``scores`` does not share its
                leading shape.
        """
        q, scores = self._check(q, scores)
        positions = self.positions(scores)  # [..., h, q, k]
        # z[..., i, n] = q_i . e[n]: the position logits at every integer position
        logits_int = q @ self.pos_emb.to(q.dtype).transpose(0, 1)  # [..., h, q, P]
        floor = positions.floor()
        ceil = positions.ceil()
        logits_floor = logits_int.gather(-1, floor.long())  # [..., h, q, k]
        logits_ceil = logits_int.gather(-1, ceil.long())  # [..., h, q, k]
        weight = positions - floor  # the ceiling's share, in [0, 1)
        bias = logits_ceil * weight + logits_floor * (1 - weight)
        return bias.to(scores.dtype)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, n_heads={self.n_heads}, max_positions={self.max_positions}"
