"""Tests of the reference attention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import attention

FAST = settings(max_examples=40, deadline=None)


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def by_hand(q, k, v, bias=None, causal=False) -> torch.Tensor:
    """One query and one key at a time, for a single (q, d) x (k, d) x (k, e) head."""
    q_len, k_len, d = q.shape[0], k.shape[0], q.shape[1]
    out = torch.zeros(q_len, v.shape[1], dtype=torch.float64)
    for i in range(q_len):
        visible = range(k_len) if not causal else range(i + k_len - q_len + 1)
        logits = {}
        for j in visible:
            logits[j] = (q[i] @ k[j]).item() / math.sqrt(d)
            if bias is not None:
                logits[j] += bias[i, j].item()
        top = max(logits.values())
        norm = sum(math.exp(s - top) for s in logits.values())
        for j, s in logits.items():
            out[i] += math.exp(s - top) / norm * v[j]
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("q_len", "k_len"), [(4, 4), (1, 5), (3, 7), (1, 1)])
def test_matches_the_formula_by_hand(q_len: int, k_len: int, causal: bool) -> None:
    q, k, v = randn(q_len, 6, seed=1), randn(k_len, 6, seed=2), randn(k_len, 3, seed=3)
    bias = randn(q_len, k_len, seed=4)
    for b in (None, bias):
        got = attention(q, k, v, bias=b, causal=causal)
        torch.testing.assert_close(got, by_hand(q, k, v, b, causal))


@FAST
@given(
    batch=st.lists(st.integers(1, 3), max_size=2),
    seq=st.integers(1, 9),
    d=st.integers(1, 16),
    e=st.integers(1, 16),
    causal=st.booleans(),
    with_bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_agrees_with_torch_sdpa(
    batch: list[int], seq: int, d: int, e: int, causal: bool, with_bias: bool, seed: int
) -> None:
    q = randn(*batch, seq, d, seed=seed)
    k = randn(*batch, seq, d, seed=seed + 1)
    v = randn(*batch, seq, e, seed=seed + 2)
    bias = randn(seq, seq, seed=seed + 3) if with_bias else None
    got = attention(q, k, v, bias=bias, causal=causal and not with_bias)
    expected = F.scaled_dot_product_attention(
        q, k, v, attn_mask=bias, is_causal=causal and not with_bias
    )
    torch.testing.assert_close(got, expected)


def test_agrees_with_torch_sdpa_causal_plus_bias() -> None:
    # SDPA takes a mask or is_causal, not both: fold the causal mask into its bias.
    q, k, v = randn(2, 3, 8, 16, seed=5), randn(2, 3, 8, 16, seed=6), randn(2, 3, 8, 4, seed=7)
    bias = randn(3, 8, 8, seed=8)
    mask = torch.full((8, 8), -math.inf, dtype=torch.float64).triu(1)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias + mask)
    torch.testing.assert_close(attention(q, k, v, bias=bias, causal=True), expected)
    torch.testing.assert_close(attention(q, k, v, bias=bias + mask), expected)


@FAST
@given(k_len=st.integers(1, 12), data=st.data())
def test_causal_queries_are_the_last_positions_of_the_keys(k_len: int, data) -> None:
    # The last q_len queries of a causal pass over the whole sequence are
    # exactly what a KV-cached pass with only those queries computes.
    q_len = data.draw(st.integers(0, k_len))
    q, k, v = randn(2, k_len, 8, seed=k_len), randn(2, k_len, 8, seed=1), randn(2, k_len, 5, seed=2)
    full = attention(q, k, v, causal=True)
    cached = attention(q[:, k_len - q_len :], k, v, causal=True)
    assert cached.shape == (2, q_len, 5)
    torch.testing.assert_close(cached, full[:, k_len - q_len :])


def test_causal_first_query_sees_only_the_first_key() -> None:
    q, k, v = randn(5, 4, seed=1), randn(5, 4, seed=2), randn(5, 3, seed=3)
    out = attention(q, k, v, causal=True)
    torch.testing.assert_close(out[0], v[0])
    # A single query with a longer cache sees every key.
    torch.testing.assert_close(attention(q[-1:], k, v, causal=True), attention(q[-1:], k, v))


def test_bias_broadcasts_over_heads_and_shifts_per_row_do_nothing() -> None:
    q, k, v = randn(2, 4, 6, 8, seed=1), randn(2, 4, 7, 8, seed=2), randn(2, 4, 7, 3, seed=3)
    per_head = randn(4, 6, 7, seed=4)  # (h, q, k), like alibi_bias
    expected = attention(q, k, v, bias=per_head.expand(2, 4, 6, 7).clone())
    torch.testing.assert_close(attention(q, k, v, bias=per_head), expected)
    row_shift = randn(4, 6, 1, seed=5)  # the same for every key: softmax ignores it
    torch.testing.assert_close(attention(q, k, v, bias=per_head + row_shift), expected)
    # A bias of -inf hides a key completely.
    hide = torch.zeros(7, dtype=torch.float64)
    hide[2] = -math.inf
    v_changed = v.clone()
    v_changed[..., 2, :] = 1e6
    torch.testing.assert_close(attention(q, k, v_changed, bias=hide), attention(q, k, v, bias=hide))


def test_batch_axes_broadcast_for_grouped_keys() -> None:
    q = randn(2, 4, 5, 8, seed=1)
    k, v = randn(2, 1, 5, 8, seed=2), randn(2, 1, 5, 8, seed=3)  # one key head for four queries
    expected = attention(q, k.expand(2, 4, 5, 8), v.expand(2, 4, 5, 8))
    torch.testing.assert_close(attention(q, k, v), expected)


def test_empty_queries_and_empty_keys() -> None:
    k, v = randn(2, 5, 8, seed=1), randn(2, 5, 3, seed=2)
    q = torch.empty(2, 0, 8, dtype=torch.float64)
    assert attention(q, k, v).shape == (2, 0, 3)
    assert attention(q, k, v, causal=True).shape == (2, 0, 3)
    empty_kv = torch.empty(2, 0, 8, dtype=torch.float64), torch.empty(2, 0, 3, dtype=torch.float64)
    out = attention(randn(2, 4, 8), *empty_kv)  # nothing to attend to: zeros
    assert out.shape == (2, 4, 3) and torch.all(out == 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_output_dtype_follows_the_input(dtype: torch.dtype) -> None:
    q, k, v = (randn(3, 4, 8, seed=s).to(dtype) for s in (1, 2, 3))
    out = attention(q, k, v, bias=torch.zeros(4, 4), causal=True)
    assert out.dtype == dtype
    expected = attention(*(t.double() for t in (q, k, v)), causal=True)
    torch.testing.assert_close(out.double(), expected, rtol=0, atol=2e-2)


def test_gradients_flow_to_q_k_v_and_bias() -> None:
    q, k, v = (randn(3, 4, seed=s).requires_grad_() for s in (1, 2, 3))
    bias = randn(3, 3, seed=4).requires_grad_()
    attention(q, k, v, bias=bias, causal=True).sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v, bias))


def f64(*shape: int) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.float64)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (
            (f64(3, 4), f64(3, 5), f64(3, 4)),
            {},
            ValueError,
            r"k must have the last dimension of q \(4\)",
        ),
        (
            (f64(3, 4), f64(3, 4), f64(2, 4)),
            {},
            ValueError,
            r"v must have the sequence length of k \(3\)",
        ),
        ((f64(4), f64(3, 4), f64(3, 4)), {}, ValueError, r"q must have shape \(\.\.\., seq, dim\)"),
        ((f64(3, 4), f64(3, 4), f64(4)), {}, ValueError, r"v must have shape \(\.\.\., seq, dim\)"),
        (
            (f64(3, 0), f64(3, 0), f64(3, 4)),
            {},
            ValueError,
            "q and k must have a positive last dimension",
        ),
        (
            (f64(2, 3, 4), f64(5, 3, 4), f64(5, 3, 4)),
            {},
            ValueError,
            "q, k and v must have broadcastable batch axes",
        ),
        (
            (f64(4, 2), f64(3, 2), f64(3, 2)),
            {"causal": True},
            ValueError,
            "q_len must be <= k_len when causal.*got q_len=4 and k_len=3",
        ),
        (
            (f64(3, 4), f64(5, 4), f64(5, 4)),
            {"bias": f64(3, 4)},
            ValueError,
            r"bias must broadcast to the scores' shape \(3, 5\), got \(3, 4\)",
        ),
        (
            (f64(3, 4), f64(5, 4), f64(5, 4)),
            {"bias": f64(2, 3, 5)},  # would add a batch axis the scores do not have
            ValueError,
            r"bias must broadcast to the scores' shape \(3, 5\)",
        ),
        (
            (f64(3, 4), f64(5, 4), f64(5, 4)),
            {"bias": torch.zeros(3, 5, dtype=torch.bool)},
            ValueError,
            "bias must be a floating-point tensor",
        ),
        (
            (torch.zeros(3, 4, dtype=torch.long), f64(3, 4), f64(3, 4)),
            {},
            ValueError,
            "q must be a floating-point tensor",
        ),
        (
            (f64(3, 4), torch.zeros(3, 4), f64(3, 4)),
            {},
            ValueError,
            "q, k and v must have the same dtype",
        ),
        (([[0.0]], f64(3, 4), f64(3, 4)), {}, TypeError, "q must be a torch.Tensor"),
        ((f64(3, 4), f64(3, 4), f64(3, 4)), {"causal": 1}, TypeError, "causal must be a bool"),
    ],
)
def test_bad_arguments(args, kwargs, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        attention(*args, **kwargs)
