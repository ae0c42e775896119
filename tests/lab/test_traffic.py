"""posenc_lab.traffic and posenc_lab.references: the counts and the formulas are right.

The reference formulas compute what apply_rope computes; count_traffic
counts, operation by operation, the bytes derived by hand in chapter
*RoPE as a memory-bound kernel*.
"""

from __future__ import annotations

import pytest
import torch

from posenc import apply_rope
from posenc_lab.references import (
    hf_apply_rotary,
    hf_cos_sin,
    meta_apply_rotary,
    meta_freqs_cis,
    rotate_half,
)
from posenc_lab.traffic import count_traffic

# ---------------------------------------------------------------------------
# The reference formulas compute what apply_rope computes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [2, 8, 64, 128])
@pytest.mark.parametrize("shape", [(1, 16, 33), (2, 3, 1)])  # (b, n_h, s); s = 1: a decode step
def test_rope_contenders_agree_with_apply_rope(shape, dim):
    g = torch.Generator().manual_seed(dim)
    x = torch.randn((*shape, dim), generator=g)
    positions = torch.arange(shape[-1]) + 1000
    expected = apply_rope(x, positions)
    cos, sin = hf_cos_sin(positions, dim)
    assert cos.shape == (shape[-1], dim)  # Hugging Face's duplicated halves
    tol = {"rtol": 2e-6, "atol": 2e-6}  # rounding: one fused multiply-add apart
    torch.testing.assert_close(hf_apply_rotary(x, cos, sin), expected, **tol)
    interleaved = apply_rope(x, positions, layout="interleaved")
    torch.testing.assert_close(
        meta_apply_rotary(x, meta_freqs_cis(positions, dim)), interleaved, **tol
    )


def test_rotate_half():
    x = torch.arange(6.0)
    assert torch.equal(rotate_half(x), torch.tensor([-3.0, -4.0, -5.0, 0.0, 1.0, 2.0]))


# ---------------------------------------------------------------------------
# Memory traffic, counted by intercepting ATen operations
# ---------------------------------------------------------------------------


def test_traffic_of_the_floor_and_of_views():
    x = torch.zeros(4, 8, 16)
    t = count_traffic(lambda: torch.mul(x, 2.0))
    assert (t.reads, t.writes, t.ops) == (x.nbytes, x.nbytes, ["mul"])
    t = count_traffic(lambda: x[..., :8].unsqueeze(0).transpose(0, 1))  # views move nothing
    assert (t.total, t.ops) == (0, []) and t.views == 3
    t = count_traffic(lambda: x.clone().add_(1.0))  # in-place: read and write of self
    assert (t.reads, t.writes) == (2 * x.nbytes, 2 * x.nbytes)
    t = count_traffic(lambda: torch.empty_like(x).copy_(x))  # copy_ does not read its target
    assert (t.reads, t.writes) == (x.nbytes, x.nbytes)


def test_traffic_per_element_of_the_rope_contenders(monkeypatch):
    import posenc.rope

    monkeypatch.setattr(posenc.rope, "_SMALL", 0)  # the in-place path, as for large inputs
    # x (b, n_h, s, d) = (2, 8, 16, 32); cos/sin (s, d) or (s, d/2) are shared by all heads
    b, h, s, d = 2, 8, 16, 32
    x = torch.randn(b, h, s, d)
    n = x.numel()
    positions = torch.arange(s)
    cos, sin = hf_cos_sin(positions, d)  # (s, d)
    table = s * d * 4  # bytes of one of them

    # HF: x*cos (4 + 4), -x2 (2 + 2), cat (4 + 4), rotate_half(x)*sin (4 + 4), sum (8 + 4)
    t = count_traffic(lambda: hf_apply_rotary(x, cos, sin))
    assert t.ops == ["mul", "neg", "cat", "mul", "add"]
    assert t.total == 40 * n + 2 * table

    # posenc: [a; b] * cos (4 + 4), then a cos - b sin and b cos + a sin on each half (6 + 6)
    half = s * d // 2 * 4  # bytes of a (s, d/2) table
    t = count_traffic(lambda: apply_rope(x, positions))
    rotation = [op for op in t.ops if op in ("mul", "addcmul_")][-3:]
    assert rotation == ["mul", "addcmul_", "addcmul_"]
    cos_h, sin_h = cos[:, : d // 2], sin[:, : d // 2]
    t = count_traffic(lambda: posenc.rope._rotate(x, cos_h, sin_h, "half"))
    assert t.total == 20 * n + 3 * half

    # complex multiplication: one read and one write of x, plus the (s, d/2) complex64 table
    freqs_cis = meta_freqs_cis(positions, d)
    t = count_traffic(lambda: meta_apply_rotary(x, freqs_cis))
    assert (t.ops, t.total) == (["mul"], 8 * n + 2 * half)


def test_a_gather_reads_only_the_rows_it_returns():
    # a decode step reads one row of a long cos/sin table, not the table
    table = torch.zeros(4096, 64)
    rows = torch.tensor([7, 1000])
    t = count_traffic(lambda: table.index_select(0, rows))
    row_bytes = 2 * 64 * 4
    assert (t.ops, t.reads, t.writes) == (["index_select"], row_bytes + rows.nbytes, row_bytes)


def test_unsafe_view_moves_nothing():
    x = torch.randn(4, 4)
    traffic = count_traffic(lambda: torch.ops.aten._unsafe_view(x, (16,)))
    assert traffic.ops == [] and traffic.reads == traffic.writes == 0
