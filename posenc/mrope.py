"""Rotary position embedding over several axes: image patches, video, M-RoPE.

A token of an image or a video has one coordinate per axis (height and
width; time, height and width). RoPE extends to several axes by splitting
its frequencies between them: frequency ``i`` of
``rope_frequencies(dim)`` turns with the coordinate of one axis, chosen
once for all tokens. The score of a query and a key then depends on the
differences of their coordinates on each axis, and on nothing else.

- Axial 2D RoPE for vision transformers (Heo, Park, Han and Yun, "Rotary
  Position Embedding for Vision Transformer", ECCV 2024, arXiv:2403.13298;
  Qwen2-VL's vision encoder): half of the pairs turn with the row, half with
  the column. This module has that structure, not their frequencies:
  ``apply_mrope`` gives the two axes different frequencies (see its
  docstring).
- M-RoPE, multimodal RoPE (Qwen2-VL: Wang et al., "Qwen2-VL: Enhancing
  Vision-Language Model's Perception of the World at Any Resolution", 2024,
  arXiv:2409.12191): three consecutive blocks of frequencies for time,
  height and width (``mrope_section``, ``[16, 24, 24]`` for a head size of
  128). A text token gets three equal coordinates, and then it is rotated
  exactly as by plain RoPE.
- Interleaved M-RoPE (Qwen3-VL: Qwen Team, "Qwen3-VL Technical Report",
  2025, arXiv:2511.21631): the axes take turns over the frequencies, so
  each axis has high and low frequencies alike instead of one block of the
  spectrum.

Hugging Face transformers implements them in ``Qwen2VLRotaryEmbedding``
(``recomposition_frequencies``) and ``Qwen3VLTextRotaryEmbedding``; the
parity tests run both.

Shapes: ``k`` axes (``len(sections)``), ``h`` frequencies (``dim // 2``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch

from posenc._checks import (
    check_base,
    check_bool,
    check_choice,
    check_even,
    check_float_tensor,
    check_positions,
    check_size,
)
from posenc.rope import (
    _LAYOUTS,
    _angle_dtype,
    _cached_parameters,
    _check_broadcast,
    _length_key,
    _rotate,
)
from posenc.scaling import RopeScaling, check_scaling, check_seq_len

__all__ = ["apply_mrope", "grid_positions", "mrope_axes"]


def grid_positions(*sizes: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The coordinates of every cell of a grid, in row-major order.

    ``grid_positions(h, w)`` lists the ``(row, column)`` of the ``h * w``
    patches of an image, the last axis running fastest, as a vision
    transformer flattens them; ``grid_positions(t, h, w)`` lists the
    ``(time, row, column)`` of a video's patches (a time step is whatever
    the model counts: in Qwen2-VL one temporal patch of
    ``temporal_patch_size = 2`` frames).

    Args:
        *sizes (int): the size of each axis, positive integers; at least one.
        device (torch.device | str | None): where to create the tensor.
            Default: the current default device.

    Returns:
        torch.Tensor: int64 of shape ``(len(sizes), prod(sizes))``; column
        ``j`` holds the coordinates of cell ``j``, so that
        ``grid_positions(2, 3)`` is ``[[0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]]``.

    Raises:
        ValueError: if no size is given or a size is < 1.
        TypeError: if a size is not an integer.
    """
    if not sizes:
        raise ValueError("grid_positions needs at least one size (one per axis), got none")
    sizes = tuple(check_size(f"sizes[{a}]", size) for a, size in enumerate(sizes))
    axes = [torch.arange(size, dtype=torch.int64, device=device) for size in sizes]
    grids = torch.meshgrid(*axes, indexing="ij")  # k tensors of shape sizes
    return torch.stack([g.reshape(-1) for g in grids])  # (k, prod(sizes))


def _section_values(sections: object) -> tuple[int, ...]:
    """``sections`` as a non-empty tuple of positive ints."""
    if isinstance(sections, torch.Tensor):
        sections = sections.tolist()
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Iterable):
        raise TypeError(
            f"sections must be a sequence of integers (frequencies per axis), got "
            f"{type(sections).__name__}"
        )
    values = tuple(check_size(f"sections[{a}]", s) for a, s in enumerate(sections))
    if not values:
        raise ValueError("sections must name at least one axis, got an empty sequence")
    return values


def _check_sections(sections: object, n_freqs: int, interleave: bool) -> tuple[int, ...]:
    """``sections`` as a tuple of positive ints summing to ``n_freqs``, placeable as asked."""
    values = _section_values(sections)
    if sum(values) != n_freqs:
        raise ValueError(
            f"sections must sum to the number of rotated frequencies, x.shape[-1] // 2 = "
            f"{n_freqs}, got sum({list(values)}) = {sum(values)}"
        )
    if interleave:
        k = len(values)
        for a in range(1, k):
            available = len(range(a, n_freqs, k))  # frequencies a, a + k, a + 2k, ... below h
            if values[a] > available:
                raise ValueError(
                    f"sections[{a}] = {values[a]} does not fit with interleave=True: axis {a} "
                    f"takes frequencies {a}, {a + k}, {a + 2 * k}, ... of which there are "
                    f"{available} below {n_freqs} (the first axis takes what the others leave, "
                    f"as in Qwen3-VL's [24, 20, 20])"
                )
    return values


@functools.lru_cache(maxsize=64)
def _axes(sections: tuple[int, ...], interleave: bool) -> torch.Tensor:
    """The axis of each frequency, int64 of shape ``(sum(sections),)`` on the CPU."""
    k, h = len(sections), sum(sections)
    if not interleave:  # consecutive blocks: Qwen2-VL
        return torch.repeat_interleave(torch.arange(k), torch.tensor(sections))
    # Qwen3-VL: axis a >= 1 takes frequencies a, a + k, ..., a + k (sections[a] - 1);
    # the first axis takes every other one
    axis = torch.zeros(h, dtype=torch.int64)
    for a in range(1, k):
        axis[a : k * sections[a] : k] = a
    return axis


def mrope_axes(sections: object, *, interleave: bool = False) -> torch.Tensor:
    """The axis that each frequency of :func:`apply_mrope` takes its angle from.

    Args:
        sections (Sequence[int]): frequencies per axis, positive integers.
        interleave (bool): ``False``: consecutive blocks, ``sections[0]``
            frequencies for axis 0, then ``sections[1]`` for axis 1, ...
            (Qwen2-VL). ``True``: with ``k = len(sections)`` axes, axis
            ``a >= 1`` takes frequencies ``a, a + k, ..., a + k
            (sections[a] - 1)`` and axis 0 all the others (Qwen3-VL, whose
            ``[24, 20, 20]`` gives ``t h w t h w ... t h w t t t t``).
            Default ``False``.

    Returns:
        torch.Tensor: int64 of shape ``(sum(sections),)``, entry ``i`` the
        axis of frequency ``i``.

    Raises:
        ValueError: if a section is < 1, none is given, or with
            ``interleave=True`` a section ``a >= 1`` is larger than the
            number of frequencies ``a, a + k, ...`` below ``sum(sections)``.
        TypeError: if ``sections`` is not a sequence of integers or
            ``interleave`` is not a bool.
    """
    interleave = check_bool("interleave", interleave)
    values = _section_values(sections)
    values = _check_sections(values, sum(values), interleave)
    return _axes(values, interleave).clone()


def apply_mrope(
    x: torch.Tensor,
    positions: torch.Tensor,
    sections: object,
    *,
    base: float = 10000.0,
    layout: str = "half",
    interleave: bool = False,
    scaling: RopeScaling | None = None,
    seq_len: int | None = None,
) -> torch.Tensor:
    """RoPE over several axes: frequency ``i`` turns with the coordinate of one axis.

    With ``theta = rope_frequencies(dim, base=base, scaling=scaling)`` and
    ``axis(i)`` from :func:`mrope_axes`, the pair of frequency ``i`` (see
    ``layout``) of the token with coordinates ``p`` is rotated by the angle
    ``p[axis(i)] * theta_i``, then the result is multiplied by the
    scaling's attention factor, as :func:`posenc.apply_rope` does. So:

    - a token with the same coordinate ``p`` on every axis (a text token in
      Qwen2-VL) is rotated exactly as by ``apply_rope(x, p)``;
    - the score ``<R(p) q, R(p') k>`` depends only on the differences
      ``p[a] - p'[a]`` on each axis (the relative property, per axis);
    - two equal sections with ``grid_positions(h, w)`` give axial 2D RoPE:
      one half of the pairs turns with the row, the other with the column.
      Here the two halves have different frequencies (the first the high
      ones ``theta_0 .. theta_{h/2-1}`` with ``interleave=False``, the even
      ones with ``interleave=True``); Heo et al.'s RoPE-Axial and Qwen2-VL's
      vision encoder give both axes the same set.

    Equal to Hugging Face's Qwen2-VL (``interleave=False``) and Qwen3-VL
    (``interleave=True``) with ``layout="half"``, three sections and
    positions of shape ``(3, b, 1, s)`` (their ``position_ids[:, :, None, :]``).

    Args:
        x (torch.Tensor): shape ``(..., dim)``, e.g. ``(b, n_h, s, h_d)``;
            floating point, ``dim`` even.
        positions (torch.Tensor): integer or floating coordinates of shape
            ``(k, *p)`` with ``k = len(sections)``, ``p`` broadcasting to
            ``x.shape[:-1]``: e.g. ``(3, s)``, or ``(3, b, 1, s)`` for ``x``
            of shape ``(b, n_h, s, h_d)``.
        sections (Sequence[int]): frequencies per axis, positive integers
            summing to ``dim // 2`` (Qwen2-VL: ``[16, 24, 24]`` for
            ``dim = 128``; Qwen3-VL: ``[24, 20, 20]``).
        base (float): frequency base, finite and > 1. Default 10000.
        layout (str): ``"half"`` pairs feature ``i`` with ``i + dim/2``
            (Hugging Face, Qwen); ``"interleaved"`` pairs ``2i`` with
            ``2i + 1``. Default ``"half"``.
        interleave (bool): how frequencies are assigned to axes: consecutive
            blocks (``False``, Qwen2-VL) or in turn (``True``, Qwen3-VL); see
            :func:`mrope_axes`. Default ``False``.
        scaling (RopeScaling | None): a frequency scaling, or ``None``.
        seq_len (int | None): the sequence length for a length-dependent
            scaling, >= 0; default the largest coordinate + 1 over all axes
            (as Hugging Face takes it; one read from the device).

    Returns:
        torch.Tensor: shape and dtype of ``x``.

    Raises:
        TypeError: if ``x`` or ``positions`` is not a tensor, ``sections`` is
            not a sequence of integers, ``interleave`` is not a bool, or
            ``scaling`` is not one of the scalings.
        ValueError: if ``x`` is not floating point or its last dimension is
            odd; ``positions`` has no leading axis of length
            ``len(sections)`` or the rest does not broadcast to
            ``x.shape[:-1]``; a section is < 1, the sections do not sum to
            ``dim // 2``, or (``interleave=True``) one does not fit; or
            ``layout``, ``base`` or ``seq_len`` is invalid.
    """
    x = check_float_tensor("x", x)
    if x.dim() == 0:
        raise ValueError(
            "x must have at least one dimension (the features to rotate), got a scalar"
        )
    dim = check_even("x.shape[-1]", x.shape[-1])
    positions = check_positions("positions", positions)
    interleave = check_bool("interleave", interleave)
    sections = _check_sections(sections, dim // 2, interleave)
    k = len(sections)
    if positions.dim() == 0 or positions.shape[0] != k:
        raise ValueError(
            f"positions must have a leading axis of len(sections) = {k} (one coordinate per "
            f"axis), got shape {tuple(positions.shape)}"
        )
    layout = check_choice("layout", layout, _LAYOUTS)
    base, scaling = check_base(base), check_scaling(scaling)
    _check_broadcast(positions[0], x, "x")
    length = _length_key(scaling, positions, check_seq_len(seq_len))
    inv_freq, attention_factor = _cached_parameters(dim, base, scaling, x.device, length)

    if positions.device != x.device:
        positions = positions.to(x.device)
    dtype = _angle_dtype(positions, x)
    axis = _axes(sections, interleave).to(x.device)  # (h,)
    # the coordinate each frequency turns with: (k, *p) -> (*p, k) -> (*p, h)
    per_frequency = positions.to(dtype).movedim(0, -1).index_select(-1, axis)
    angles = per_frequency * inv_freq.to(dtype)  # (*p, h)
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return _rotate(x, cos, sin, layout)
