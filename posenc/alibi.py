"""ALiBi: attention with linear biases (Press et al. 2022).

ALiBi adds no position information to the token features. Instead, head
``h`` adds ``-m_h * distance`` to the attention score between a query and a
key, with one fixed slope ``m_h`` per head taken from a geometric sequence.

* :func:`alibi_slopes` gives the slopes ``m_h``. The paper's text gives
  ``m_h = 2 ** (-8 h / n)`` for ``n`` heads with no condition on ``n``; for
  head counts that are not a power of two posenc follows the official code
  (``get_slopes``), which uses a different rule, described there.
* :func:`alibi_bias` gives the ``(n_heads, q_len, k_len)`` bias to add to the
  attention scores, for a causal decoder or a bidirectional encoder, with
  queries aligned to the end of the keys (a KV cache), or at explicit
  positions (packed documents, left-padded batches).
* :func:`alibi_score_mod` gives the same bias one score at a time, as
  PyTorch's FlexAttention applies a ``score_mod``: no ``[h, q, k]`` tensor.

Shapes use ``b`` batch rows, ``h`` heads (``n_heads``), ``q`` queries
(``q_len``) and ``k`` keys (``k_len``).

Reference: Ofir Press, Noah A. Smith, Mike Lewis, "Train Short, Test Long:
Attention with Linear Biases Enables Input Length Extrapolation", ICLR 2022,
https://arxiv.org/abs/2108.12409, and its code
https://github.com/ofirpress/attention_with_linear_biases.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from posenc._checks import check_bool, check_dtype, check_size
from posenc._positions import bias_positions, index_positions, relative_positions

__all__ = ["alibi_bias", "alibi_score_mod", "alibi_slopes"]


def _slope_list(n_heads: int) -> list[float]:
    """The ALiBi slopes as Python floats (double precision)."""
    # The closest power of two m <= n_heads gets the geometric sequence
    # 2^(-8/m), 2^(-16/m), ..., 2^(-8); a remainder of r heads takes every
    # other slope of the sequence for 2m heads, i.e. 2^(-8i/(2m)) for
    # i = 1, 3, ..., 2r - 1 (the official code's get_slopes; the paper's text
    # gives 2^(-8h/n) for every n instead).
    m = 1 << (n_heads.bit_length() - 1)
    slopes = [2.0 ** (-8.0 * i / m) for i in range(1, m + 1)]
    slopes += [2.0 ** (-8.0 * i / (2 * m)) for i in range(1, 2 * (n_heads - m), 2)]
    return slopes


def alibi_slopes(
    n_heads: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The per-head slopes ``m_h`` of ALiBi (Press et al. 2022).

    For ``n_heads`` a power of two ``n``, the slopes are the geometric sequence
    ``m_h = 2 ** (-8 h / n)`` for ``h = 1 .. n``: 8 heads get
    ``1/2, 1/4, ..., 1/256``. The paper's text (Section 3) states this
    sequence for any ``n``, with no power-of-two condition. The official code
    (``get_slopes`` in ofirpress/attention_with_linear_biases) does not use
    it for other head counts, and posenc follows the code: it takes the
    slopes of the closest lower power of two ``m`` and appends every other
    slope of the sequence for ``2m`` heads, ``slopes(2m)[0::2][: n_heads -
    m]``. So 12 heads get ``slopes(8)`` followed by ``2 ** -0.5, 2 ** -1.5,
    2 ** -2.5, 2 ** -3.5`` (the paper's formula would give ``2 ** (-2h/3)``,
    ``h = 1 .. 12``). Hugging Face's BLOOM and MPT also follow the code.

    Each slope is formed in double precision and rounded once to ``dtype``.

    Args:
        n_heads (int): number of attention heads, a positive integer.
        device (torch.device | str | None): device of the result; ``None``
            for the default device.
        dtype (torch.dtype): floating-point dtype of the result.

    Returns:
        torch.Tensor: slopes of shape ``[h]``, head ``h`` at index ``h - 1``.

    Raises:
        TypeError: if ``n_heads`` is not an integer or ``dtype`` not a dtype.
        ValueError: if ``n_heads < 1`` or ``dtype`` is not floating point.

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """
    n_heads = check_size("n_heads", n_heads)
    dtype = check_dtype(dtype)
    return torch.tensor(_slope_list(n_heads), dtype=dtype, device=device)


def alibi_bias(
    n_heads: int,
    q_len: int | None = None,
    k_len: int | None = None,
    *,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    causal: bool = True,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The ALiBi bias added to attention scores (Press et al. 2022).

    Query ``i`` sits at absolute position ``q_pos = i + k_len - q_len`` and key
    ``j`` at ``k_pos = j``: the queries are the last ``q_len`` tokens of a
    sequence of ``k_len`` (a KV cache); for ``q_len == k_len`` simply
    ``q_pos = i``. Or the positions are given: ``q_pos = q_positions[..., i]``
    and ``k_pos = k_positions[..., j]``. Then::

        causal=True:   out[..., h, i, j] = -m_h * (q_pos - k_pos)
        causal=False:  out[..., h, i, j] = -m_h * |q_pos - k_pos|

    with ``m_h = alibi_slopes(n_heads)[h]``. The causal bias is the paper's
    decoder bias; it is positive for future keys (``k_pos > q_pos``), which
    the causal mask must remove: masking is not the bias's business (see
    :func:`posenc.attention_mask`). On the keys the mask keeps, row ``i`` is
    the paper's ``m * [-i, ..., -1, 0]`` and the symmetric bias agrees with
    it; the symmetric bias is the usual choice for bidirectional encoders.
    (The official code adds ``m * k_pos`` instead, which differs by a
    constant per row and so gives the same softmax.)

    Explicit positions express what lengths cannot: packed documents
    (positions restart at 0 in each document; a document mask keeps the
    documents apart) and left-padded batches (each row counts from its first
    real token). With ``q_positions = arange(k_len - q_len, k_len)`` and
    ``k_positions = arange(k_len)`` the result equals the length form.

    The product is formed in float32 (float64 when ``dtype`` is float64) and
    cast to ``dtype`` once.

    Args:
        n_heads (int): number of attention heads, a positive integer.
        q_len (int | None): number of queries, ``>= 0``; required unless the
            positions are given.
        k_len (int | None): number of keys, ``>= q_len``; ``None`` for
            ``q_len``.
        q_positions (torch.Tensor | None): keyword only, instead of the
            lengths: integer positions of the queries, ``[q]`` or batched
            ``[b, q]``.
        k_positions (torch.Tensor | None): keyword only, with
            ``q_positions``: integer positions of the keys, ``[k]`` or
            ``[b, k]``. A batched and an unbatched tensor broadcast.
        causal (bool): the signed (decoder) bias if ``True``, the symmetric
            ``|distance|`` bias if ``False``.
        device (torch.device | str | None): device of the result, usually that
            of the attention scores; ``None`` for the default device, or the
            positions' device when they are given.
        dtype (torch.dtype): floating-point dtype of the result.

    Returns:
        torch.Tensor: bias of shape ``[h, q, k]``, to be broadcast against
        scores of shape ``[b, h, q, k]``; ``[b, h, q, k]`` when a position
        tensor is batched.

    Raises:
        TypeError: if a size is not an integer, a position argument not a
            tensor, ``causal`` not a bool or ``dtype`` not a dtype.
        ValueError: if ``n_heads < 1``, a length is negative, ``q_len > k_len``,
            ``dtype`` is not floating point, lengths and positions are mixed
            or only one position tensor is given, a position tensor is not an
            integer tensor of one or two axes, or the batch sizes of the two
            differ.

    Example:
        >>> alibi_bias(1, 3)
        tensor([[[ 0.0000,  0.0039,  0.0078],
                 [-0.0039,  0.0000,  0.0039],
                 [-0.0078, -0.0039,  0.0000]]])
        >>> packed = torch.tensor([0, 1, 0, 1, 2])  # two documents, positions restart
        >>> alibi_bias(1, q_positions=packed, k_positions=packed)[0, 3]
        tensor([-0.0039,  0.0000, -0.0039,  0.0000,  0.0039])
    """
    n_heads = check_size("n_heads", n_heads)
    causal = check_bool("causal", causal)
    dtype = check_dtype(dtype)
    q_pos, k_pos = bias_positions(q_len, k_len, q_positions, k_positions, device=device)
    work = torch.float64 if dtype == torch.float64 else torch.float32

    # k_pos - q_pos = -(q_pos - k_pos): negative for past keys. Negating the
    # integers (not the product) keeps the diagonal at +0.0 rather than -0.0.
    signed = relative_positions(q_pos, k_pos).unsqueeze(-3)  # [1, q, k] or [b, 1, q, k]
    if not causal:
        signed = -signed.abs()
    slopes = alibi_slopes(n_heads, device=signed.device, dtype=work)  # [h]
    bias = slopes[:, None, None] * signed.to(work)  # [h, q, k] or [b, h, q, k]
    return bias.to(dtype)


def alibi_score_mod(
    n_heads: int,
    q_len: int | None = None,
    k_len: int | None = None,
    *,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    causal: bool = True,
    device: torch.device | str | None = None,
) -> Callable[..., torch.Tensor]:
    """ALiBi as a FlexAttention ``score_mod``: the bias of :func:`alibi_bias`, one score at a time.

    Returns ``score_mod(score, b, h, q_idx, kv_idx) -> score + bias``, the
    function that ``torch.nn.attention.flex_attention.flex_attention`` calls
    on each attention score (on scalar index tensors, or on broadcast index
    tensors: it is elementwise). The bias is that of :func:`alibi_bias` with
    the same arguments, ``-m_h * (q_pos - k_pos)`` (``causal=True``) or
    ``-m_h * |q_pos - k_pos|``, formed in float32 and cast to the score's
    dtype; no ``[h, q, k]`` tensor exists (the FlexAttention paper's ALiBi
    example, Dong et al. 2024, https://arxiv.org/abs/2412.05496).

    Query ``q_idx`` sits at ``q_idx + k_len - q_len`` (``q_idx`` when no
    lengths are given: self-attention) and key ``kv_idx`` at ``kv_idx``;
    with positions, at ``q_positions[b, q_idx]`` and ``k_positions[b,
    kv_idx]`` (``[q_idx]``, ``[kv_idx]`` when unbatched), so packed and
    left-padded batches need no dense bias either. Masking is left to a
    ``block_mask`` (see :func:`posenc.attention_mask_mod`).

    Args:
        n_heads (int): number of attention heads, a positive integer; ``h``
            must stay below it.
        q_len (int | None): number of queries, ``>= 0``, to place the
            queries at the end of the keys; ``None`` with ``k_len=None`` for
            ``q_len == k_len``.
        k_len (int | None): number of keys, ``>= q_len``; ``None`` for
            ``q_len``.
        q_positions (torch.Tensor | None): keyword only, instead of the
            lengths: integer positions of the queries, ``[q]`` or ``[b, q]``.
        k_positions (torch.Tensor | None): keyword only, with
            ``q_positions``: integer positions of the keys, ``[k]`` or
            ``[b, k]``.
        causal (bool): the signed (decoder) bias if ``True``, the symmetric
            one if ``False``.
        device (torch.device | str | None): device of the attention inputs
            (the slopes and positions are moved there); ``None`` for the
            default device, or the positions' device when they are given.

    Returns:
        Callable: ``score_mod(score, b, h, q_idx, kv_idx)``, all tensors
        broadcasting together; returns ``score + bias`` in the dtype of
        ``score``.

    Raises:
        TypeError: as :func:`alibi_bias`.
        ValueError: as :func:`alibi_bias`.

    Example:
        >>> from torch.nn.attention.flex_attention import flex_attention
        >>> q = k = v = torch.randn(1, 4, 6, 8)
        >>> out = flex_attention(q, k, v, score_mod=alibi_score_mod(4))
        >>> score_mod = alibi_score_mod(1)
        >>> score_mod(torch.zeros(()), 0, torch.tensor(0), torch.tensor(2), torch.tensor(0))
        tensor(-0.0078)
    """
    n_heads = check_size("n_heads", n_heads)
    causal = check_bool("causal", causal)
    if q_positions is not None and device is None:
        device = q_positions.device if isinstance(q_positions, torch.Tensor) else None
    query_position, key_position = index_positions(
        q_len, k_len, q_positions, k_positions, device=device
    )
    slopes = alibi_slopes(n_heads, device=device)  # [h], float32

    def score_mod(score, b, h, q_idx, kv_idx):
        signed = key_position(b, kv_idx) - query_position(b, q_idx)  # k_pos - q_pos
        if not causal:
            signed = -signed.abs()
        return score + (slopes[h] * signed.to(torch.float32)).to(score.dtype)

    return score_mod
