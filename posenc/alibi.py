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
  queries aligned to the end of the keys (a KV cache).

Shapes use ``h`` heads (``n_heads``), ``q`` queries (``q_len``) and ``k``
keys (``k_len``).

Reference: Ofir Press, Noah A. Smith, Mike Lewis, "Train Short, Test Long:
Attention with Linear Biases Enables Input Length Extrapolation", ICLR 2022,
https://arxiv.org/abs/2108.12409, and its code
https://github.com/ofirpress/attention_with_linear_biases.
"""

from __future__ import annotations

import torch

from posenc._checks import check_bool, check_dtype, check_size

__all__ = ["alibi_bias", "alibi_slopes"]


def _check_lengths(q_len: object, k_len: object) -> tuple[int, int]:
    """Validate query and key lengths for queries aligned to the end of the keys.

    ``k_len=None`` means ``k_len = q_len`` (self-attention without a cache).
    """
    q_len = check_size("q_len", q_len, minimum=0)
    k_len = q_len if k_len is None else check_size("k_len", k_len, minimum=0)
    if q_len > k_len:
        raise ValueError(
            "q_len must not exceed k_len (queries are aligned to the end of the keys), "
            f"got q_len={q_len}, k_len={k_len}"
        )
    return q_len, k_len


def _relative_positions(q_len: int, k_len: int, device: torch.device | str | None) -> torch.Tensor:
    """``key_pos - query_pos`` for every query and key, queries aligned to the end of the keys.

    Query ``i`` sits at absolute position ``i + k_len - q_len`` and key ``j`` at
    ``j``, so the last query and the last key share a position (the queries are
    the newest tokens of a cached sequence). Requires ``q_len <= k_len``.

    Returns:
        torch.Tensor: int64 tensor of shape ``[q, k]`` with
        ``out[i, j] = j - (i + k_len - q_len)``.
    """
    query_pos = torch.arange(q_len, device=device) + (k_len - q_len)  # [q]
    key_pos = torch.arange(k_len, device=device)  # [k]
    return key_pos[None, :] - query_pos[:, None]  # [q, k]


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
    q_len: int,
    k_len: int | None = None,
    *,
    causal: bool = True,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The ALiBi bias added to attention scores (Press et al. 2022).

    Query ``i`` sits at absolute position ``q_pos = i + k_len - q_len`` and key
    ``j`` at ``k_pos = j``: the queries are the last ``q_len`` tokens of a
    sequence of ``k_len`` (a KV cache); for ``q_len == k_len`` simply
    ``q_pos = i``. Then::

        causal=True:   out[h, i, j] = -m_h * (q_pos - k_pos)
        causal=False:  out[h, i, j] = -m_h * |q_pos - k_pos|

    with ``m_h = alibi_slopes(n_heads)[h]``. The causal bias is the paper's
    decoder bias; it is positive for future keys (``k_pos > q_pos``), which
    the causal mask must remove: masking is not the bias's business. On the
    keys the mask keeps, row ``i`` is the paper's ``m * [-i, ..., -1, 0]``
    and the symmetric bias agrees with it; the symmetric bias is the usual
    choice for bidirectional encoders. (The official code adds
    ``m * k_pos`` instead, which differs by a constant per row and so gives
    the same softmax.)

    The product is formed in float32 (float64 when ``dtype`` is float64) and
    cast to ``dtype``.

    Args:
        n_heads (int): number of attention heads, a positive integer.
        q_len (int): number of queries, ``>= 0``.
        k_len (int | None): number of keys, ``>= q_len``; ``None`` for
            ``q_len``.
        causal (bool): the signed (decoder) bias if ``True``, the symmetric
            ``|distance|`` bias if ``False``.
        device (torch.device | str | None): device of the result, usually that
            of the attention scores; ``None`` for the default device.
        dtype (torch.dtype): floating-point dtype of the result.

    Returns:
        torch.Tensor: bias of shape ``[h, q, k]``, to be broadcast against
        scores of shape ``[b, h, q, k]``.

    Raises:
        TypeError: if a size is not an integer, ``causal`` not a bool or
            ``dtype`` not a dtype.
        ValueError: if ``n_heads < 1``, a length is negative, ``q_len > k_len``
            or ``dtype`` is not floating point.

    Example:
        >>> alibi_bias(1, 3)
        tensor([[[ 0.0000,  0.0039,  0.0078],
                 [-0.0039,  0.0000,  0.0039],
                 [-0.0078, -0.0039,  0.0000]]])
    """
    n_heads = check_size("n_heads", n_heads)
    q_len, k_len = _check_lengths(q_len, k_len)
    causal = check_bool("causal", causal)
    dtype = check_dtype(dtype)
    work = torch.float64 if dtype == torch.float64 else torch.float32

    # k_pos - q_pos = -(q_pos - k_pos): negative for past keys. Negating the
    # integers (not the product) keeps the diagonal at +0.0 rather than -0.0.
    signed = _relative_positions(q_len, k_len, device)  # [q, k]
    if not causal:
        signed = -signed.abs()
    slopes = alibi_slopes(n_heads, device=device, dtype=work)  # [h]
    bias = slopes[:, None, None] * signed.to(work)  # [h, q, k]
    return bias.to(dtype)
