"""Tests of posenc.alibi against the rule of Press et al. (2022), written out here."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import alibi_bias, alibi_slopes


def reference_slopes(n: int) -> list[float]:
    """The slopes as the paper's code builds them: start * ratio ** i, recursively."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_two(n)
    m = 2 ** math.floor(math.log2(n))
    return power_of_two(m) + reference_slopes(2 * m)[0::2][: n - m]


def pow2(exponents: list[float]) -> torch.Tensor:
    return torch.tensor([2.0**e for e in exponents], dtype=torch.float32)


# ---------------------------------------------------------------- slopes


def test_slopes_8_heads_are_halvings():
    slopes = alibi_slopes(8)
    assert slopes.dtype == torch.float32
    assert slopes.shape == (8,)
    assert torch.equal(slopes, pow2([-1, -2, -3, -4, -5, -6, -7, -8]))


def test_slopes_16_heads_are_square_roots_of_halvings():
    assert torch.equal(alibi_slopes(16), pow2([-k / 2 for k in range(1, 17)]))


@pytest.mark.parametrize(
    ("n_heads", "exponents"),
    [
        (1, [-8]),
        (2, [-4, -8]),
        (3, [-4, -8, -2]),
        (4, [-2, -4, -6, -8]),
        # slopes(8) + slopes(16)[0::2][:4]
        (12, [-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5]),
        # slopes(16) + slopes(32)[0::2][:4]
        (20, [-k / 2 for k in range(1, 17)] + [-0.25, -0.75, -1.25, -1.75]),
        # slopes(16) + slopes(32)[0::2][:8]
        (24, [-k / 2 for k in range(1, 17)] + [-(2 * k + 1) / 4 for k in range(8)]),
    ],
)
def test_slopes_paper_rule_written_out(n_heads, exponents):
    assert torch.equal(alibi_slopes(n_heads), pow2(exponents))


@pytest.mark.parametrize("n_heads", range(1, 130))
def test_slopes_match_papers_code(n_heads):
    expected = torch.tensor(reference_slopes(n_heads), dtype=torch.float32)
    assert torch.equal(alibi_slopes(n_heads), expected)


def test_slopes_dtype_and_device():
    slopes = alibi_slopes(12, dtype=torch.float64)
    assert slopes.dtype == torch.float64
    torch.testing.assert_close(slopes, torch.tensor(reference_slopes(12), dtype=torch.float64))
    assert alibi_slopes(12, device="meta").is_meta


# ---------------------------------------------------------------- bias


def reference_bias(n_heads: int, q_len: int, k_len: int, causal: bool) -> torch.Tensor:
    """-m_h * (q_pos - k_pos) or -m_h * |q_pos - k_pos|, element by element, in float64."""
    slopes = [float(m) for m in alibi_slopes(n_heads)]
    out = torch.empty(n_heads, q_len, k_len, dtype=torch.float64)
    for h in range(n_heads):
        for i in range(q_len):
            q_pos = i + k_len - q_len
            for j in range(k_len):
                d = q_pos - j
                out[h, i, j] = -slopes[h] * (d if causal else abs(d))
    return out


@settings(max_examples=60, deadline=None)
@given(
    n_heads=st.integers(1, 12),
    q_len=st.integers(0, 9),
    extra=st.integers(0, 9),
    causal=st.booleans(),
)
def test_bias_element_formula(n_heads, q_len, extra, causal):
    k_len = q_len + extra
    bias = alibi_bias(n_heads, q_len, k_len, causal=causal)
    assert bias.shape == (n_heads, q_len, k_len)
    assert bias.dtype == torch.float32
    # The float32 slope times a small integer distance is one rounding away
    # from the float64 product: equality, not closeness.
    assert torch.equal(bias, reference_bias(n_heads, q_len, k_len, causal).float())


def test_bias_small_example_by_hand():
    # One head: m = 2^-8. Two queries at positions 2 and 3 of four keys.
    m = 2.0**-8
    causal = alibi_bias(1, 2, 4)
    expected = torch.tensor([[[-2 * m, -m, 0, m], [-3 * m, -2 * m, -m, 0]]])
    assert torch.equal(causal, expected)
    symmetric = alibi_bias(1, 2, 4, causal=False)
    assert torch.equal(symmetric, -expected.abs())


@pytest.mark.parametrize("causal", [True, False])
def test_bias_kv_cache_rows_are_the_last_rows_of_the_full_bias(causal):
    n_heads, k_len = 6, 11
    full = alibi_bias(n_heads, k_len, causal=causal)
    assert torch.equal(alibi_bias(n_heads, 1, k_len, causal=causal), full[:, -1:, :])
    for q_len in range(k_len + 1):
        cached = alibi_bias(n_heads, q_len, k_len, causal=causal)
        assert torch.equal(cached, full[:, k_len - q_len :, :])


@pytest.mark.parametrize(("q_len", "k_len"), [(7, 7), (3, 7), (1, 5)])
def test_causal_and_symmetric_differ_only_on_future_keys(q_len, k_len):
    causal = alibi_bias(8, q_len, k_len)
    symmetric = alibi_bias(8, q_len, k_len, causal=False)
    offset = k_len - q_len
    past = torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=offset)  # k_pos <= q_pos
    assert torch.equal(causal[:, past], symmetric[:, past])
    assert torch.equal(causal[:, ~past], -symmetric[:, ~past])
    assert (causal[:, ~past] > 0).all()
    assert (causal[:, past] <= 0).all()


def test_causal_bias_on_the_past_is_minus_slope_times_distance():
    n_heads, n = 12, 10
    bias = alibi_bias(n_heads, n)
    slopes = alibi_slopes(n_heads)
    for i in range(n):
        for j in range(i + 1):
            assert torch.equal(bias[:, i, j], -slopes * (i - j))


def test_causal_softmax_equals_official_code_form():
    # The official code adds m * k_pos (a constant per row away from ours);
    # under the causal mask the attention weights are the same.
    n_heads, q_len, k_len = 4, 5, 9
    scores = torch.randn(n_heads, q_len, k_len, generator=torch.Generator().manual_seed(0))
    q_pos = torch.arange(q_len)[:, None] + k_len - q_len
    k_pos = torch.arange(k_len)[None, :]
    mask = torch.where(k_pos > q_pos, float("-inf"), 0.0)
    official = alibi_slopes(n_heads)[:, None, None] * k_pos
    ours = (scores + alibi_bias(n_heads, q_len, k_len) + mask).softmax(-1)
    theirs = (scores + official + mask).softmax(-1)
    torch.testing.assert_close(ours, theirs)


def test_bias_defaults_and_empty():
    assert torch.equal(alibi_bias(4, 6), alibi_bias(4, 6, 6, causal=True))
    assert alibi_bias(4, 0).shape == (4, 0, 0)
    assert alibi_bias(4, 0, 5).shape == (4, 0, 5)


def test_bias_diagonal_is_positive_zero():
    bias = alibi_bias(3, 4, 6, causal=False)
    diagonal = bias[:, torch.arange(4), torch.arange(4) + 2]
    assert torch.equal(diagonal, torch.zeros(3, 4))
    assert not torch.signbit(diagonal).any()


def test_bias_dtype_and_device():
    expected = reference_bias(5, 3, 8, causal=True)
    assert torch.equal(alibi_bias(5, 3, 8, dtype=torch.float64), reference_bias_f64(5, 3, 8))
    half = alibi_bias(5, 3, 8, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16
    assert torch.equal(half, expected.float().to(torch.bfloat16))
    meta = alibi_bias(5, 3, 8, device="meta")
    assert meta.is_meta and meta.shape == (5, 3, 8)


def reference_bias_f64(n_heads: int, q_len: int, k_len: int) -> torch.Tensor:
    slopes = torch.tensor(reference_slopes(n_heads), dtype=torch.float64)
    q_pos = torch.arange(q_len, dtype=torch.float64)[:, None] + k_len - q_len
    k_pos = torch.arange(k_len, dtype=torch.float64)[None, :]
    return -slopes[:, None, None] * (q_pos - k_pos)


def test_large_positions_stay_exact():
    # A distance of 2**20 times a power-of-two slope is exact in float32.
    bias = alibi_bias(8, 1, 2**20 + 1)
    assert torch.equal(bias[:, 0, 0], -alibi_slopes(8) * 2**20)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("n_heads", [0, -3])
def test_bad_n_heads_value(n_heads):
    with pytest.raises(ValueError, match=rf"n_heads must be a positive integer, got {n_heads}"):
        alibi_slopes(n_heads)
    with pytest.raises(ValueError, match=rf"n_heads must be a positive integer, got {n_heads}"):
        alibi_bias(n_heads, 4)


@pytest.mark.parametrize("n_heads", [2.0, "8", True, None])
def test_bad_n_heads_type(n_heads):
    with pytest.raises(TypeError, match="n_heads must be an integer"):
        alibi_slopes(n_heads)
    with pytest.raises(TypeError, match="n_heads must be an integer"):
        alibi_bias(n_heads, 4)


def test_more_queries_than_keys():
    with pytest.raises(ValueError, match=r"q_len must not exceed k_len .*q_len=5, k_len=3"):
        alibi_bias(8, 5, 3)


@pytest.mark.parametrize(
    ("q_len", "k_len", "message"),
    [
        (-1, None, r"q_len must be an integer >= 0, got -1"),
        (-1, 4, r"q_len must be an integer >= 0, got -1"),
        (2, -4, r"k_len must be an integer >= 0, got -4"),
    ],
)
def test_negative_lengths(q_len, k_len, message):
    with pytest.raises(ValueError, match=message):
        alibi_bias(8, q_len, k_len)


def test_bad_length_type():
    with pytest.raises(TypeError, match="q_len must be an integer"):
        alibi_bias(8, 2.5)
    with pytest.raises(TypeError, match="k_len must be an integer"):
        alibi_bias(8, 2, 4.0)


def test_bad_causal_and_dtype():
    with pytest.raises(TypeError, match="causal must be a bool"):
        alibi_bias(8, 2, causal="yes")
    with pytest.raises(ValueError, match=r"dtype must be a floating-point torch\.dtype"):
        alibi_bias(8, 2, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"dtype must be a floating-point torch\.dtype"):
        alibi_slopes(8, dtype=torch.int32)
    with pytest.raises(TypeError, match=r"dtype must be a floating-point torch\.dtype"):
        alibi_slopes(8, dtype="float32")
