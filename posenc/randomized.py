"""Randomised positions, in training and at test time (Ruoss et al. 2023).

A model trained on sequences of up to ``n`` tokens with positions
``0 .. n - 1`` meets positions it has never seen as soon as an input is
longer. Ruoss et al. train instead with the positions of a random sorted
subset of a larger range ``[0, max_positions)``: every position up to
``max_positions - 1`` is seen in training, and the value of a position no
longer gives the index of its token (the spacing, on average
``(max_positions + 1) / (seq_len + 1)``, still reflects the length). Their
code draws the positions the same way at evaluation.

:func:`random_positions` draws such a subset. The positions can feed any
encoding of this package that takes explicit positions (``sinusoidal``,
``apply_rope``, ``LearnedPositionalEmbedding`` with ``max_positions``
rows, ...).

Reference: Anian Ruoss, Grégoire Delétang, Tim Genewein, Jordi Grau-Moya,
Róbert Csordás, Mehdi Bennani, Shane Legg, Joel Veness, "Randomized
Positional Encodings Boost Length Generalization of Transformers", ACL 2023,
https://arxiv.org/abs/2305.16843, and its code
https://github.com/google-deepmind/randomized_positional_encodings
(``noisy_fixed_positional_encodings``: ``jax.random.choice`` without
replacement from ``arange(noise_max_length)``, then ``sort``). That is what
the code does for sinusoidal, learned and rotary encodings. Its relative
(Transformer-XL) and ALiBi variants
(``compute_attention_with_noisy_relative_encodings``,
``compute_noisy_alibi_encodings_biases``) instead draw ``seq_len - 1``
sorted distances from ``arange(1, noise_max_length)`` and use them for the
offsets 1, 2, ..., so that their bias stays a function of ``i - j``; this
function does not cover those variants.
"""

from __future__ import annotations

import torch

from posenc._checks import check_size

__all__ = ["random_positions"]

# Up to this range (or _PERMUTATION_FACTOR times the request) a random
# permutation of the whole range is cheap; beyond it positions are drawn one
# by one, so that memory stays proportional to seq_len (a range of 2**40 is
# never allocated).
_PERMUTATION_LIMIT = 1 << 16
_PERMUTATION_FACTOR = 4


def random_positions(
    seq_len: int,
    max_positions: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``seq_len`` distinct positions drawn uniformly from ``[0, max_positions)``, sorted.

    Every subset of ``seq_len`` positions is equally likely (Ruoss et al.
    2023: sampling without replacement, then sorting), so each position is
    included with probability ``seq_len / max_positions``. For
    ``seq_len == max_positions`` the result is ``0 .. seq_len - 1``.

    Small ranges (up to ``2**16``, or up to four times ``seq_len``) take the
    first ``seq_len`` entries of a random permutation of the range. Larger
    ones draw positions independently and keep the distinct ones until there
    are ``seq_len``: no tensor of ``max_positions`` entries is made. Both are
    uniform over subsets (the second because the procedure treats all
    positions alike and always ends with ``seq_len`` of them); they give
    different subsets for the same seed.

    Args:
        seq_len (int): number of positions, ``>= 0``.
        max_positions (int): size of the range, a positive integer
            ``>= seq_len`` (the paper's ``L``, larger than the longest
            sequence the model should handle).
        generator (torch.Generator | None): source of randomness; ``None``
            for torch's global generator. The same generator state gives the
            same positions.
        device (torch.device | str | None): device of the result; ``None``
            for the generator's device (the default device without one).

    Returns:
        torch.Tensor: int64 tensor of shape ``[seq_len]``, strictly increasing.

    Raises:
        TypeError: if a size is not an integer or ``generator`` is not a
            ``torch.Generator``.
        ValueError: if ``seq_len < 0``, ``max_positions < 1`` or
            ``seq_len > max_positions``.

    Example:
        >>> random_positions(5, 100, generator=torch.Generator().manual_seed(0))
        tensor([19, 44, 71, 90, 93])
    """
    seq_len = check_size("seq_len", seq_len, minimum=0)
    max_positions = check_size("max_positions", max_positions)
    if seq_len > max_positions:
        raise ValueError(
            "seq_len must not exceed max_positions (the positions are distinct), "
            f"got seq_len={seq_len}, max_positions={max_positions}"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )
    if device is None and generator is not None:
        device = generator.device

    if max_positions <= max(_PERMUTATION_LIMIT, _PERMUTATION_FACTOR * seq_len):
        return _by_permutation(seq_len, max_positions, generator, device)
    return _by_draws(seq_len, max_positions, generator, device)


def _by_permutation(seq_len, max_positions, generator, device) -> torch.Tensor:
    """The first ``seq_len`` entries of a random permutation of the range, sorted."""
    permutation = torch.randperm(
        max_positions, generator=generator, device=device, dtype=torch.int64
    )
    return permutation[:seq_len].sort().values


def _by_draws(seq_len, max_positions, generator, device) -> torch.Tensor:
    """Independent draws, the distinct ones kept, until there are ``seq_len`` (sorted)."""
    # Draw as many positions as are missing, keep the distinct ones, repeat.
    # The union never exceeds seq_len. Called for max_positions > 4 * seq_len,
    # where at least three draws in four are new: a few rounds suffice (and
    # it terminates for any seq_len <= max_positions).
    chosen = torch.empty(0, dtype=torch.int64, device=device)
    while chosen.numel() < seq_len:
        draws = torch.randint(
            max_positions,
            (seq_len - chosen.numel(),),
            generator=generator,
            device=device,
            dtype=torch.int64,
        )
        chosen = torch.cat([chosen, draws]).unique(sorted=True)
    return chosen
