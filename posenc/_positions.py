"""Query and key positions of the attention biases: from lengths, or given.

Every bias of posenc places its queries and keys in one of two ways:

* lengths ``q_len`` and ``k_len``: query ``i`` sits at ``i + k_len - q_len``
  and key ``j`` at ``j`` (the queries are the newest tokens of a cached
  sequence), so queries may not outnumber keys;
* explicit integer positions ``q_positions`` (``[q]`` or batched
  ``[b, q]``) and ``k_positions`` (``[k]`` or ``[b, k]``): packed documents
  (positions restart at each document) and left-padded batches (each row
  starts counting at its first real token).

:func:`bias_positions` turns either form into two int64 tensors that
broadcast against each other: ``k_pos.unsqueeze(-2) - q_pos.unsqueeze(-1)``
is the ``[q, k]`` or ``[b, q, k]`` matrix of ``key_pos - query_pos``.
:func:`index_positions` does the same for one query-key pair at a time, as
FlexAttention's ``score_mod`` sees it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from posenc._checks import check_size, check_tensor

__all__ = [
    "bias_positions",
    "check_index_tensor",
    "check_lengths",
    "check_position_pair",
    "index_positions",
    "lookup",
    "relative_positions",
]

PositionOf = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def check_lengths(q_len: object, k_len: object) -> tuple[int, int]:
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


def check_index_tensor(name: str, value: object) -> torch.Tensor:
    """Return ``value`` if it is an integer tensor ``[t]`` or batched ``[b, t]``."""
    value = check_tensor(name, value)
    dtype = value.dtype
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        raise ValueError(f"{name} must be an integer tensor, got dtype {dtype}")
    if value.ndim not in (1, 2):
        raise ValueError(
            f"{name} must have shape (seq,) or batched (batch, seq), got {tuple(value.shape)}"
        )
    return value


def check_position_pair(
    q_len: object, k_len: object, q_positions: object, k_positions: object
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Validate the choice between lengths and positions; the positions if given.

    Returns:
        ``None`` when lengths are used (not yet validated: see
        :func:`check_lengths`), else ``(q_positions, k_positions)``, integer
        tensors of one or two axes whose batch sizes agree.
    """
    if q_positions is None and k_positions is None:
        return None
    if q_len is not None or k_len is not None:
        raise ValueError(
            "give either lengths (q_len, k_len) or positions (q_positions, k_positions), "
            f"not both: got q_len={q_len!r}, k_len={k_len!r} with positions"
        )
    if q_positions is None or k_positions is None:
        missing = "q_positions" if q_positions is None else "k_positions"
        raise ValueError(f"q_positions and k_positions must be given together, {missing} is None")
    q_positions = check_index_tensor("q_positions", q_positions)
    k_positions = check_index_tensor("k_positions", k_positions)
    if q_positions.ndim == k_positions.ndim == 2 and q_positions.shape[0] != k_positions.shape[0]:
        raise ValueError(
            "q_positions and k_positions must have the same batch size, got "
            f"{tuple(q_positions.shape)} and {tuple(k_positions.shape)}"
        )
    if q_positions.device != k_positions.device:
        raise ValueError(
            "q_positions and k_positions must be on one device, got "
            f"{q_positions.device} and {k_positions.device}"
        )
    return q_positions, k_positions


def bias_positions(
    q_len: object,
    k_len: object,
    q_positions: object,
    k_positions: object,
    *,
    device: torch.device | str | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Query and key positions from lengths or explicit positions, validated.

    ``q_len`` is required unless both position tensors are given; lengths
    and positions cannot be mixed.

    Args:
        device: where the positions go (a module's parameters); ``None``
            keeps given positions where they are.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: int64 ``q_pos`` of shape ``[q]``
        or ``[b, q]`` and ``k_pos`` of shape ``[k]`` or ``[b, k]``, on one
        device; ``k_pos.unsqueeze(-2) - q_pos.unsqueeze(-1)`` broadcasts to
        ``[q, k]`` or ``[b, q, k]``.
    """
    pair = check_position_pair(q_len, k_len, q_positions, k_positions)
    if pair is None:
        if q_len is None:
            raise ValueError("q_len is required unless q_positions and k_positions are given")
        q_len, k_len = check_lengths(q_len, k_len)
        q_pos = torch.arange(q_len, device=device) + (k_len - q_len)  # [q]
        k_pos = torch.arange(k_len, device=device)  # [k]
        return q_pos, k_pos
    q_pos, k_pos = (p.to(device=device, dtype=torch.int64) for p in pair)
    return q_pos, k_pos


def relative_positions(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """``key_pos - query_pos`` for every pair: ``[q, k]`` or ``[b, q, k]``."""
    return k_pos.unsqueeze(-2) - q_pos.unsqueeze(-1)


def index_positions(
    q_len: object,
    k_len: object,
    q_positions: object,
    k_positions: object,
    *,
    device: torch.device | str | None,
) -> tuple[PositionOf, PositionOf]:
    """The positions of FlexAttention's indices, for a ``score_mod`` or ``mask_mod``.

    FlexAttention calls its modifications with scalar (or broadcast) index
    tensors ``b``, ``q_idx`` and ``kv_idx``. Without positions, query
    ``q_idx`` sits at ``q_idx + k_len - q_len`` (``q_idx`` when no lengths
    are given either: self-attention) and key ``kv_idx`` at ``kv_idx``; with
    positions, they are looked up, per batch row ``b`` when batched.

    Returns:
        two functions ``query_position(b, q_idx)`` and ``key_position(b,
        kv_idx)`` of index tensors, each giving an integer tensor of the
        indices' shape.
    """
    pair = check_position_pair(q_len, k_len, q_positions, k_positions)
    if pair is None:
        if q_len is None and k_len is None:
            offset = 0
        else:
            if q_len is None:
                raise ValueError("q_len is required when k_len is given")
            q_len, k_len = check_lengths(q_len, k_len)
            offset = k_len - q_len

        def query_position(b: torch.Tensor, q_idx: torch.Tensor) -> torch.Tensor:
            return q_idx + offset

        def key_position(b: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
            return kv_idx

        return query_position, key_position

    q_table, k_table = (p.to(device=device, dtype=torch.int64) for p in pair)
    return lookup(q_table), lookup(k_table)


def lookup(table: torch.Tensor) -> PositionOf:
    """``f(b, idx)``: ``table[b, idx]`` for a batched ``[b, t]`` table, else ``table[idx]``."""
    if table.ndim == 2:
        return lambda b, idx: table[b, idx]
    return lambda b, idx: table[idx]
