"""grid_positions and apply_mrope: references, per-axis properties, dtypes, errors.

The float64 reference below rotates one pair at a time with the angle of the
axis a frequency belongs to, the assignment written out from Qwen2-VL's
``mrope_section`` (consecutive blocks) and Qwen3-VL's interleaved layout.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import (
    DynamicNTKScaling,
    LinearScaling,
    LongRopeScaling,
    YarnScaling,
    apply_mrope,
    apply_rope,
    grid_positions,
    rope_frequencies,
)
from posenc.mrope import mrope_axes

FAST = settings(max_examples=40, deadline=None)


def randn64(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def axes_reference(sections, interleave):
    """The axis of each frequency, as a Python list."""
    if not interleave:
        return [a for a, size in enumerate(sections) for _ in range(size)]
    k, h = len(sections), sum(sections)
    out = []
    for i in range(h):
        a = i % k
        out.append(a if a > 0 and i < k * sections[a] else 0)
    return out


def mrope_reference(x, positions, sections, base=10000.0, interleave=False, layout="half"):
    """Pair ``i`` of ``x`` turned by ``positions[axis(i)] * base ** (-2i / dim)``, in float64."""
    x = x.double()
    dim = x.shape[-1]
    h = dim // 2
    axis = axes_reference(sections, interleave)
    out = x.clone()
    for i in range(h):
        angle = positions[axis[i]].double() * base ** (-2 * i / dim)
        a, b = (i, i + h) if layout == "half" else (2 * i, 2 * i + 1)
        c, s = angle.cos(), angle.sin()
        out[..., a] = x[..., a] * c - x[..., b] * s
        out[..., b] = x[..., b] * c + x[..., a] * s
    return out


# ---------------------------------------------------------------------------
# grid_positions
# ---------------------------------------------------------------------------


def test_grid_positions_by_hand():
    assert grid_positions(2, 3).tolist() == [[0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]]
    assert grid_positions(4).tolist() == [[0, 1, 2, 3]]
    g = grid_positions(2, 2, 2)
    assert g.tolist() == [
        [0, 0, 0, 0, 1, 1, 1, 1],
        [0, 0, 1, 1, 0, 0, 1, 1],
        [0, 1, 0, 1, 0, 1, 0, 1],
    ]
    assert g.dtype == torch.int64


@FAST
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_grid_positions_row_major(sizes):
    g = grid_positions(*sizes)
    assert g.shape == (len(sizes), math.prod(sizes))
    # cell j = sum_a coord_a * stride_a with row-major strides (the last axis fastest)
    strides = [math.prod(sizes[a + 1 :]) for a in range(len(sizes))]
    for j in range(g.shape[1]):
        assert [j // strides[a] % sizes[a] for a in range(len(sizes))] == g[:, j].tolist()


def test_grid_positions_device():
    assert grid_positions(2, 3, device="meta").device.type == "meta"


def test_grid_positions_errors():
    with pytest.raises(ValueError, match=r"^grid_positions needs at least one size"):
        grid_positions()
    with pytest.raises(ValueError, match=r"^sizes\[1\] must be a positive integer, got 0"):
        grid_positions(3, 0)
    with pytest.raises(ValueError, match=r"^sizes\[0\] must be a positive integer, got -2"):
        grid_positions(-2)
    with pytest.raises(TypeError, match=r"^sizes\[0\] must be an integer"):
        grid_positions(2.0, 3)
    with pytest.raises(TypeError, match=r"^sizes\[0\] must be an integer"):
        grid_positions((2, 3))
    with pytest.raises(TypeError, match=r"^sizes\[2\] must be an integer"):
        grid_positions(1, 2, True)


# ---------------------------------------------------------------------------
# The assignment of frequencies to axes
# ---------------------------------------------------------------------------


def test_axes_qwen2_vl_blocks():
    axis = mrope_axes([16, 24, 24]).tolist()
    assert axis == [0] * 16 + [1] * 24 + [2] * 24


def test_axes_qwen3_vl_interleaved():
    # [24, 20, 20] over 64 frequencies: t h w repeated 20 times, then four more t
    axis = mrope_axes([24, 20, 20], interleave=True).tolist()
    assert axis == [0, 1, 2] * 20 + [0] * 4


@pytest.mark.parametrize(
    "sections, interleave",
    [
        *[(s, False) for s in ([16, 24, 24], [24, 20, 20], [2, 3, 3], [8, 8], [5, 3], [7])],
        *[(s, True) for s in ([24, 20, 20], [8, 8], [5, 3], [10, 1, 1, 1], [7], [4, 3, 3])],
    ],
)
def test_axes_count_the_sections(sections, interleave):
    axis = mrope_axes(sections, interleave=interleave)
    assert axis.tolist() == axes_reference(sections, interleave)
    assert torch.bincount(axis, minlength=len(sections)).tolist() == list(sections)


def test_interleave_must_fit():
    # Qwen2-VL's [16, 24, 24] cannot be interleaved: axis 1 would need frequency 70 of 64
    with pytest.raises(
        ValueError,
        match=r"^sections\[1\] = 24 does not fit with interleave=True: axis 1 takes frequencies "
        r"1, 4, 7, \.\.\. of which there are 21 below 64",
    ):
        mrope_axes([16, 24, 24], interleave=True)
    with pytest.raises(ValueError, match=r"^sections\[1\] = 24 does not fit"):
        apply_mrope(torch.zeros(2, 128), torch.zeros(3, 2), [16, 24, 24], interleave=True)
    # [2, 3, 3]: axis 2 takes 2, 5 below 8, not 3
    with pytest.raises(ValueError, match=r"^sections\[2\] = 3 does not fit .* there are 2 below 8"):
        mrope_axes([2, 3, 3], interleave=True)


# ---------------------------------------------------------------------------
# apply_mrope against the reference
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dim, sections, interleave",
    [
        (128, [16, 24, 24], False),
        (128, [24, 20, 20], True),
        (64, [8, 12, 12], False),
        (64, [12, 10, 10], True),
        (16, [4, 4], False),
        (16, [4, 4], True),
        (24, [3, 3, 3, 3], True),
        (8, [4], False),
    ],
)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_matches_reference(dim, sections, interleave, layout):
    k = len(sections)
    x = randn64(2, 3, 11, dim)
    positions = torch.randint(0, 50, (k, 2, 1, 11), generator=torch.Generator().manual_seed(1))
    got = apply_mrope(x, positions, sections, base=500.0, interleave=interleave, layout=layout)
    expected = mrope_reference(x, positions, sections, 500.0, interleave, layout)
    # float32 frequencies (relative error ~6e-8) times positions below 50
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-5)


def test_text_tokens_equal_apply_rope():
    """Three equal coordinates (a text token in Qwen2-VL) rotate as plain RoPE, bit for bit."""
    x = randn64(2, 4, 9, 64).float()
    p = torch.tensor([0, 1, 2, 3, 100, 101, 5000, 5001, 2**20])
    scalings = [None, YarnScaling(4.0, 64), LinearScaling(2.0), DynamicNTKScaling(2.0, 100)]
    scalings.append(LongRopeScaling([1.5] * 32, [4.0] * 32, 100, factor=8.0))
    for scaling in scalings:
        for layout in ["half", "interleaved"]:
            for sections, interleave in [([8, 12, 12], False), ([12, 10, 10], True)]:
                got = apply_mrope(
                    x,
                    p.expand(3, 9),
                    sections,
                    layout=layout,
                    interleave=interleave,
                    scaling=scaling,
                )
                assert torch.equal(got, apply_rope(x, p, layout=layout, scaling=scaling))


def score(q, k, pq, pk, sections, interleave):
    return (
        apply_mrope(q, pq, sections, interleave=interleave)
        * apply_mrope(k, pk, sections, interleave=interleave)
    ).sum(-1)


@pytest.mark.parametrize("interleave", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_relative_in_each_axis(interleave, seed):
    """The score depends only on the coordinate differences, axis by axis."""
    sections = [12, 10, 10]
    g = torch.Generator().manual_seed(seed)
    q, k = randn64(2, 64, seed=seed).unbind(0)
    pq = torch.randint(0, 1000, (3,), generator=g)
    pk = torch.randint(0, 1000, (3,), generator=g)
    base = score(q, k, pq, pk, sections, interleave)
    for axis in range(3):
        shift = torch.zeros(3, dtype=torch.int64)
        shift[axis] = int(torch.randint(1, 5000, (1,), generator=g))
        # both shifted along this axis only: the same score
        moved = score(q, k, pq + shift, pk + shift, sections, interleave)
        torch.testing.assert_close(moved, base, rtol=0, atol=1e-9)
        # the key alone moved along this axis: the score changes, so the axis is seen
        assert abs(score(q, k, pq, pk + shift, sections, interleave) - base) > 1e-6
    # all axes at once, by different amounts
    shift = torch.tensor([7, -300, 12345])
    moved = score(q, k, pq + shift, pk + shift, sections, interleave)
    torch.testing.assert_close(moved, base, rtol=0, atol=1e-9)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("interleave", [False, True])
def test_two_equal_sections_are_axial_2d_rope(layout, interleave):
    """Rows turn one half of the pairs, columns the other: two apply_rope calls on the halves.

    With ``interleave=False`` the row takes frequencies ``theta_0 .. theta_{h/2-1}``
    of ``rope_frequencies(dim)``, i.e. ``rope_frequencies(dim / 2, base=sqrt(base))``,
    and the column the rest, the same set divided by ``sqrt(base)``
    (``LinearScaling(sqrt(base))``). With ``interleave=True`` the row takes the even
    frequencies, ``rope_frequencies(dim / 2, base)``, and the column the odd ones,
    the same set divided by ``base ** (2 / dim)``.
    """
    dim, base, h, w = 32, 10000.0, 3, 4
    x = randn64(2, h * w, dim).float()
    grid = grid_positions(h, w)  # (2, 12)
    got = apply_mrope(x, grid, [8, 8], base=base, layout=layout, interleave=interleave)

    n = dim // 2  # frequencies; pair i is (i, i + n) for "half", (2i, 2i + 1) for "interleaved"
    pairs = [(i, i + n) if layout == "half" else (2 * i, 2 * i + 1) for i in range(n)]
    row_freqs = list(range(0, 8)) if not interleave else list(range(0, n, 2))
    col_freqs = list(range(8, 16)) if not interleave else list(range(1, n, 2))
    if interleave:
        row_kwargs = {"base": base}
        col_kwargs = {"base": base, "scaling": LinearScaling(base ** (2 / dim))}
    else:
        row_kwargs = {"base": base**0.5}
        col_kwargs = {"base": base**0.5, "scaling": LinearScaling(base**0.5)}

    def gather(freqs):  # features of these pairs, as a "half" layout vector of 16 features
        return [pairs[i][0] for i in freqs] + [pairs[i][1] for i in freqs]

    expected = x.clone()
    for freqs, coords, kwargs in [
        (row_freqs, grid[0], row_kwargs),
        (col_freqs, grid[1], col_kwargs),
    ]:
        idx = torch.tensor(gather(freqs))
        expected[..., idx] = apply_rope(x[..., idx], coords, **kwargs)
    torch.testing.assert_close(got, expected)
    # the frequencies of the two halves: the same set, one scaled
    theta = rope_frequencies(dim, base=base).double()
    ratio = theta[col_freqs] / theta[row_freqs]
    expected_ratio = base ** (-2 / dim) if interleave else base**-0.5
    torch.testing.assert_close(ratio, torch.full_like(ratio, expected_ratio), rtol=1e-6, atol=0)


def test_blocks_and_interleaved_differ():
    x = randn64(1, 6, 64).float()
    p = torch.stack([torch.zeros(6), torch.arange(6) * 3, torch.arange(6) * 5]).long()
    a = apply_mrope(x, p, [12, 10, 10])
    b = apply_mrope(x, p, [12, 10, 10], interleave=True)
    assert (a - b).abs().max() > 0.1


def test_scaling_and_length_from_every_axis():
    """Dynamic NTK's length is the largest coordinate + 1, over all axes."""
    x = randn64(1, 5, 32).float()
    p = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 300, 0, 0], [0, 1, 1, 2, 2]])
    scaling = DynamicNTKScaling(4.0, 64)
    got = apply_mrope(x, p, [4, 6, 6], scaling=scaling)
    n = 301
    effective = 4.0 * n / 64 - 3.0
    expected = apply_mrope(x, p, [4, 6, 6], base=10000.0 * effective ** (32 / 30))
    torch.testing.assert_close(got, expected)
    assert torch.equal(apply_mrope(x, p, [4, 6, 6], scaling=scaling, seq_len=n), got)
    # an attention factor multiplies the result
    yarn = YarnScaling(4.0, 64, mscale=1.0, mscale_all_dim=0.5)
    scaled = apply_mrope(x, p, [4, 6, 6], scaling=yarn)
    torch.testing.assert_close(scaled.norm(dim=-1), x.norm(dim=-1) * yarn.attention_factor)


def test_positions_broadcast_and_grad():
    x = randn64(2, 3, 7, 16).float().requires_grad_()
    p = torch.arange(7).expand(3, 7)  # (3, s) for x of shape (b, h, s, d)
    out = apply_mrope(x, p, [2, 3, 3])
    assert out.shape == x.shape
    out.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
    per_batch = torch.stack([p, p + 5])[:, :, None, :].transpose(0, 1)  # (3, 2, 1, 7)
    out = apply_mrope(x.detach(), per_batch, [2, 3, 3])
    torch.testing.assert_close(out[1], apply_mrope(x.detach()[1], p + 5, [2, 3, 3]))


@pytest.mark.parametrize(
    "dtype, tolerance",
    [(torch.float16, 2e-3), (torch.bfloat16, 2e-2), (torch.float32, 1e-5), (torch.float64, 1e-5)],
)
def test_dtypes_keep_dtype(dtype, tolerance):
    x = randn64(2, 9, 32)
    p = grid_positions(3, 3).repeat(2, 1)[:3]  # (3, 9)
    got = apply_mrope(x.to(dtype), p, [4, 6, 6])
    assert got.dtype == dtype
    torch.testing.assert_close(
        got.double(), mrope_reference(x, p, [4, 6, 6]), rtol=tolerance, atol=tolerance
    )


def test_device_kept_meta_and_empty():
    with torch.device("meta"):
        x = torch.empty(2, 5, 32, dtype=torch.bfloat16)
        out = apply_mrope(x, torch.zeros(3, 5, dtype=torch.long), [4, 6, 6])
    assert out.device.type == "meta" and out.dtype == torch.bfloat16 and out.shape == x.shape
    empty = apply_mrope(torch.zeros(0, 32), torch.zeros(3, 0), [4, 6, 6])
    assert empty.shape == (0, 32)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    x = randn64(2, 4, 50, 128).float()
    p = torch.randint(0, 10**5, (3, 2, 1, 50), generator=torch.Generator().manual_seed(0))
    for interleave, sections in [(False, [16, 24, 24]), (True, [24, 20, 20])]:
        cpu = apply_mrope(x, p, sections, interleave=interleave)
        gpu = apply_mrope(x.cuda(), p.cuda(), sections, interleave=interleave)
        assert gpu.device.type == "cuda"
        torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-5, atol=1e-4)
        # positions on the CPU with x on the GPU: moved to x's device
        torch.testing.assert_close(apply_mrope(x.cuda(), p, sections, interleave=interleave), gpu)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_positions_leading_axis():
    x = torch.zeros(5, 64)
    with pytest.raises(
        ValueError,
        match=r"^positions must have a leading axis of len\(sections\) = 3 \(one coordinate per "
        r"axis\), got shape \(2, 5\)",
    ):
        apply_mrope(x, torch.zeros(2, 5), [8, 12, 12])
    with pytest.raises(ValueError, match=r"^positions must have a leading axis of len\(sections\)"):
        apply_mrope(x, torch.tensor(3), [8, 12, 12])
    with pytest.raises(ValueError, match=r"^positions of shape \(4,\) must broadcast to x"):
        apply_mrope(x, torch.zeros(3, 4), [8, 12, 12])


def test_sections_sum():
    with pytest.raises(
        ValueError,
        match=r"^sections must sum to the number of rotated frequencies, x.shape\[-1\] // 2 = "
        r"64, got sum\(\[16, 24, 20\]\) = 60",
    ):
        apply_mrope(torch.zeros(2, 128), torch.zeros(3, 2), [16, 24, 20])


def test_sections_values():
    x, p = torch.zeros(2, 16), torch.zeros(3, 2)
    with pytest.raises(ValueError, match=r"^sections\[1\] must be a positive integer, got 0"):
        apply_mrope(x, p, [8, 0, 0])
    with pytest.raises(ValueError, match=r"^sections\[2\] must be a positive integer, got -1"):
        apply_mrope(x, p, [8, 1, -1])
    with pytest.raises(TypeError, match=r"^sections\[0\] must be an integer"):
        apply_mrope(x, p, [4.0, 2, 2])
    with pytest.raises(TypeError, match=r"^sections must be a sequence of integers"):
        apply_mrope(x, p, 8)
    with pytest.raises(ValueError, match=r"^sections must name at least one axis"):
        apply_mrope(x, p, [])
    assert apply_mrope(x, p, torch.tensor([4, 2, 2])).shape == x.shape  # a tensor is fine


def test_other_arguments():
    x, p = torch.zeros(2, 16), torch.zeros(3, 2)
    with pytest.raises(ValueError, match=r"^x must be a floating-point tensor"):
        apply_mrope(torch.zeros(2, 16, dtype=torch.long), p, [4, 2, 2])
    with pytest.raises(ValueError, match=r"^x.shape\[-1\] must be even, got 15"):
        apply_mrope(torch.zeros(2, 15), p, [4, 2, 2])
    with pytest.raises(TypeError, match=r"^interleave must be a bool"):
        apply_mrope(x, p, [4, 2, 2], interleave=1)
    with pytest.raises(ValueError, match=r"^layout must be one of 'half', 'interleaved'"):
        apply_mrope(x, p, [4, 2, 2], layout="neox")
    with pytest.raises(ValueError, match=r"^base must be a finite number greater than 1"):
        apply_mrope(x, p, [4, 2, 2], base=1.0)
    with pytest.raises(TypeError, match=r"^scaling must be None or one of"):
        apply_mrope(x, p, [4, 2, 2], scaling={"rope_type": "linear"})
    with pytest.raises(ValueError, match=r"^positions must be an integer or floating-point"):
        apply_mrope(x, p.bool(), [4, 2, 2])
    with pytest.raises(ValueError, match=r"^seq_len must be a finite number >= 0"):
        apply_mrope(x, p, [4, 2, 2], scaling=DynamicNTKScaling(2.0, 4), seq_len=-1)
