"""Tests of posenc.CoPE against the formulas of Golovneva et al. (2024), written out here.

The comparison with x-transformers' own ``CoPE`` is in
``tests/test_xtransformers_parity.py`` (run where x-transformers is installed).
"""

from __future__ import annotations

import math

import pytest
import torch

from posenc import CoPE


def sigmoid(x: float) -> float:
    if x == -math.inf:
        return 0.0
    return 1.0 / (1.0 + math.exp(-x))


def loop_reference(q: torch.Tensor, scores: torch.Tensor, pos_emb: torch.Tensor) -> torch.Tensor:
    """The paper's Section 3, one element at a time, in double precision.

    p_ij = sum_{t >= j} sigma(s_it) (masked t contribute 0), clamped to P - 1;
    q_i . e[p_ij] with e[p] = (p - floor p) e[ceil p] + (1 - p + floor p) e[floor p].
    """
    lead = q.shape[:-2]
    q = q.double().reshape(-1, *q.shape[-2:])
    scores = scores.double().reshape(-1, *scores.shape[-2:])
    e = pos_emb.double().tolist()
    n_pos, dim = len(e), len(e[0])
    out = torch.zeros_like(scores)
    for b in range(scores.shape[0]):
        for i in range(scores.shape[1]):
            row = [sigmoid(s) for s in scores[b, i].tolist()]
            qi = q[b, i].tolist()
            for j in range(scores.shape[2]):
                p = min(sum(row[j:]), n_pos - 1)
                lo, hi = math.floor(p), math.ceil(p)
                emb = [(p - lo) * e[hi][d] + (1 - p + lo) * e[lo][d] for d in range(dim)]
                out[b, i, j] = sum(qi[d] * emb[d] for d in range(dim))
    return out.reshape(*lead, *out.shape[-2:])


def causal_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Scaled logits, keys after each query (aligned to the end of the keys) set to -inf."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    q_len, k_len = scores.shape[-2:]
    future = torch.ones(q_len, k_len, dtype=torch.bool).triu(k_len - q_len + 1)
    return scores.masked_fill(future, -math.inf)


def random_cope(dim: int, n_heads: int, max_positions: int, seed: int = 0) -> CoPE:
    torch.manual_seed(seed)
    cope = CoPE(dim, n_heads, max_positions)
    torch.nn.init.normal_(cope.pos_emb)  # the table starts at zero; give it values
    return cope


# ---------------------------------------------------------------- the formula


@pytest.mark.parametrize(
    ("shape", "max_positions"),
    [
        ((1, 1, 1, 1, 4), 3),
        ((2, 3, 5, 5, 8), 8),
        ((2, 2, 3, 7, 6), 16),  # fewer queries than keys, aligned to the end
        ((1, 2, 9, 9, 4), 3),  # positions clamped to 2 for most pairs
    ],
)
def test_formula_element_by_element_with_causal_mask(shape, max_positions):
    b, h, q_len, k_len, d = shape
    cope = random_cope(d, h, max_positions)
    q = torch.randn(b, h, q_len, d)
    k = torch.randn(b, h, k_len, d)
    scores = causal_scores(q, k)
    out = cope(q, scores)
    assert out.shape == (b, h, q_len, k_len)
    expected = loop_reference(q, scores, cope.pos_emb.detach()).float()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_formula_without_mask_and_with_padding():
    cope = random_cope(5, 2, 6, seed=1)
    q = torch.randn(3, 2, 4, 5)
    scores = torch.randn(3, 2, 4, 7) * 3
    torch.testing.assert_close(
        cope(q, scores),
        loop_reference(q, scores, cope.pos_emb.detach()).float(),
        rtol=1e-5,
        atol=1e-5,
    )
    padded = scores.clone()
    padded[0, :, :, :2] = -math.inf  # left padding of the first sequence
    padded[2, :, :, 4] = -math.inf
    torch.testing.assert_close(
        cope(q, padded),
        loop_reference(q, padded, cope.pos_emb.detach()).float(),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_any_batch_shape(lead):
    cope = random_cope(4, 3, 5, seed=2)
    q = torch.randn(*lead, 3, 4, 4)
    scores = causal_scores(q, torch.randn(*lead, 3, 6, 4))
    out = cope(q, scores)
    assert out.shape == (*lead, 3, 4, 6)
    expected = loop_reference(q, scores, cope.pos_emb.detach()).float()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- what the positions mean


def test_open_gates_count_tokens():
    """All gates 1: p_ij = i - j + 1 under the causal mask, an integer; the bias is q_i . e[p]."""
    cope = random_cope(4, 1, 20, seed=3)
    q = torch.randn(1, 1, 6, 4)
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    scores = torch.full((1, 1, 6, 6), 40.0).masked_fill(future, -math.inf)  # sigmoid(40) = 1.0f
    positions = cope.positions(scores)[0, 0]
    for i in range(6):
        for j in range(i + 1):
            assert positions[i, j].item() == i - j + 1
        for j in range(i + 1, 6):
            assert positions[i, j].item() == 0
    out = cope(q, scores)[0, 0]
    e = cope.pos_emb.detach()
    for i in range(6):
        for j in range(6):
            expected = q[0, 0, i] @ e[i - j + 1] if j <= i else q[0, 0, i] @ e[0]
            torch.testing.assert_close(out[i, j], expected, rtol=1e-6, atol=1e-6)


def test_gates_that_open_on_one_kind_of_token_count_that_kind():
    """A head whose gate opens on full stops only measures distances in sentences."""
    tokens = "a b . c d e . f . g h".split()
    stop = torch.tensor([t == "." for t in tokens])
    n = len(tokens)
    scores = torch.where(stop, 40.0, -40.0).expand(n, n).clone()  # every query, same gates
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    positions = CoPE(2, 1, max_positions=n + 1).positions(scores)
    last = positions[-1]  # seen from the last token "h": full stops from each key on
    expected = [3, 3, 3, 2, 2, 2, 2, 1, 1, 0, 0]
    torch.testing.assert_close(last, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)


def test_fractional_positions_interpolate_between_neighbours():
    """Gate 1/2 on every key: p_ij = (i - j + 1) / 2, half-way between two embeddings when odd."""
    cope = random_cope(3, 1, 10, seed=4)
    n = 5
    scores = torch.zeros(1, 1, n, n).masked_fill(
        torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf
    )
    q = torch.randn(1, 1, n, 3)
    out = cope(q, scores)[0, 0]
    e = cope.pos_emb.detach()
    i, j = 4, 2  # p = 3 / 2
    expected = q[0, 0, i] @ (0.5 * e[1] + 0.5 * e[2])
    torch.testing.assert_close(out[i, j], expected, rtol=1e-6, atol=1e-6)
    i, j = 4, 1  # p = 2
    torch.testing.assert_close(out[i, j], q[0, 0, i] @ e[2], rtol=1e-6, atol=1e-6)


def test_positions_are_clamped_to_the_last_embedding():
    cope = random_cope(4, 2, 4, seed=5)
    q = torch.randn(1, 2, 50, 4)
    scores = causal_scores(q, torch.randn(1, 2, 50, 4))
    positions = cope.positions(scores)
    assert positions.max() == 3.0 and positions.min() >= 0
    far = positions == 3.0
    assert far.sum() > 1000  # most pairs of a 50-token sequence are beyond 3 gates away
    z_last = q @ cope.pos_emb.detach()[3]  # [1, 2, 50]
    out = cope(q, scores)
    torch.testing.assert_close(
        out[far], z_last[..., None].expand_as(out)[far], rtol=1e-6, atol=1e-6
    )


def test_zero_table_gives_zero_bias_and_gradients_flow():
    torch.manual_seed(6)
    cope = CoPE(4, 2, 6)
    q = torch.randn(2, 2, 5, 4, requires_grad=True)
    k = torch.randn(2, 2, 5, 4)
    scores = causal_scores(q, k)
    assert torch.equal(cope(q, scores), torch.zeros(2, 2, 5, 5))  # the initial table is zero
    torch.nn.init.normal_(cope.pos_emb)
    cope(q, scores).square().sum().backward()
    assert torch.isfinite(q.grad).all() and q.grad.abs().sum() > 0  # via z and via the gates
    assert torch.isfinite(cope.pos_emb.grad).all() and cope.pos_emb.grad.abs().sum() > 0
    # the gradient reaches the gates through the interpolation weight p - floor(p)
    scores = scores.detach().requires_grad_()
    cope(q.detach(), scores).sum().backward()
    assert scores.grad[torch.isfinite(scores)].abs().sum() > 0
    assert (scores.grad[~torch.isfinite(scores)] == 0).all()


# ---------------------------------------------------------------- device, dtype, errors


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_dtype_follows_the_scores(dtype):
    cope = random_cope(4, 2, 6, seed=7)
    q = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    scores = causal_scores(q, torch.randn(1, 2, 5, 4, dtype=torch.float64))
    out = cope(q.to(dtype), scores.to(dtype))
    assert out.dtype == dtype
    if dtype == torch.float64:
        expected = loop_reference(q, scores, cope.pos_emb.detach())
        torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
    meta = CoPE(4, 2, 6).to("meta")
    assert meta(q.to("meta"), scores.to("meta")).is_meta


def test_repr():
    assert "dim=4, n_heads=2, max_positions=6" in repr(CoPE(4, 2, 6))


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((0, 2, 6), ValueError, "dim must be a positive integer, got 0"),
        ((4, 0, 6), ValueError, "n_heads must be a positive integer, got 0"),
        ((4, 2, 0), ValueError, "max_positions must be a positive integer, got 0"),
        ((4, 2, -3), ValueError, "max_positions must be a positive integer, got -3"),
        ((4.0, 2, 6), TypeError, "dim must be an integer"),
        ((4, 2, 6.5), TypeError, "max_positions must be an integer"),
    ],
)
def test_bad_construction(args, error, match):
    with pytest.raises(error, match=match):
        CoPE(*args)


@pytest.mark.parametrize(
    ("q_shape", "scores_shape", "match"),
    [
        (
            (1, 3, 4, 4),
            (1, 2, 4, 5),
            r"q must have shape \(\.\.\., n_heads=2, q_len, dim=4\), got \(1, 3, 4, 4\)",
        ),
        (
            (1, 2, 4, 8),
            (1, 2, 4, 5),
            r"q must have shape \(\.\.\., n_heads=2, q_len, dim=4\), got \(1, 2, 4, 8\)",
        ),
        ((4, 4), (4, 5), r"q must have shape \(\.\.\., n_heads=2, q_len, dim=4\), got \(4, 4\)"),
        (
            (1, 2, 4, 4),
            (1, 2, 3, 5),
            r"scores must have shape \(\*q.shape\[:-1\], k_len\) = \(1, 2, 4, k_len\), got \(1, 2, 3, 5\)",
        ),
        ((1, 2, 4, 4), (2, 2, 4, 5), r"scores must have shape .* got \(2, 2, 4, 5\)"),
        ((1, 2, 4, 4), (2, 4, 5), r"scores must have shape .* got \(2, 4, 5\)"),
    ],
)
def test_bad_shapes(q_shape, scores_shape, match):
    with pytest.raises(ValueError, match=match):
        CoPE(4, 2, 6)(torch.randn(q_shape), torch.randn(scores_shape))


def test_bad_tensors():
    cope = CoPE(4, 2, 6)
    q, scores = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 3)
    with pytest.raises(
        ValueError, match=r"q must be a floating-point tensor, got dtype torch\.int64"
    ):
        cope(q.long(), scores)
    with pytest.raises(
        ValueError, match=r"scores must be a floating-point tensor, got dtype torch\.bool"
    ):
        cope(q, scores > 0)
    with pytest.raises(TypeError, match=r"scores must be a torch\.Tensor, got list"):
        cope(q, scores.tolist())
    with pytest.raises(
        ValueError, match=r"scores must have shape \(\.\.\., q_len, k_len\), got \(3,\)"
    ):
        cope.positions(torch.randn(3))
