"""Tests of posenc.transformer_xl against Transformer-XL's code and a direct four-term loop."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import sinusoidal
from posenc.transformer_xl import relative_shift, transformer_xl_positions, transformer_xl_scores

# ---------------------------------------------------------------- references


def txl_rel_shift(x: torch.Tensor) -> torch.Tensor:
    """``_rel_shift`` of kimiyoung/transformer-xl (pytorch/mem_transformer.py), layout [q, k, ...]."""
    zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
    return x_padded[1:].view_as(x)


def txl_positional_embedding(pos_seq: torch.Tensor, demb: int) -> torch.Tensor:
    """``PositionalEmbedding.forward`` of Transformer-XL, without the batch axis."""
    inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0, dtype=torch.float64) / demb))
    sinusoid_inp = torch.outer(pos_seq.double(), inv_freq)
    return torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)


def gather_shift(x: torch.Tensor, k_len: int) -> torch.Tensor:
    """The shift as a gather: out[..., i, j] = x[..., i, m] with distance k - 1 - m = i + k - q - j."""
    q_len, r_len = x.shape[-2:]
    i = torch.arange(q_len)[:, None]
    j = torch.arange(k_len)[None, :]
    m = j + q_len - 1 - i  # [q, k]
    valid = m < r_len
    index = m.clamp(max=r_len - 1).expand(*x.shape[:-2], q_len, k_len)
    return torch.gather(x, -1, index), valid


def loop_scores(q, k, r, u, v, distances):
    """A[..., i, j] = q_i.k_j + q_i.r_d + u.k_j + v.r_d with d = i + k_len - q_len - j, term by term.

    q [B, q, d], k [B, k, d], r [B, r, d], u and v [B, 1, d]; distances[m] is the distance of r row m.
    Entries whose distance r does not hold are -inf.
    """
    q_len, k_len = q.shape[-2], k.shape[-2]
    out = torch.full((q.shape[0], q_len, k_len), float("-inf"), dtype=q.dtype)
    row = {int(dist): m for m, dist in enumerate(distances)}
    for b in range(q.shape[0]):
        for i in range(q_len):
            for j in range(k_len):
                dist = i + k_len - q_len - j
                if dist not in row:
                    continue
                r_d = r[b, row[dist]]
                out[b, i, j] = (
                    q[b, i] @ k[b, j]  # (a) content-content
                    + q[b, i] @ r_d  # (b) content-position
                    + u[b, 0] @ k[b, j]  # (c) global content bias
                    + v[b, 0] @ r_d  # (d) global position bias
                )
    return out


# ---------------------------------------------------------------- positions


def test_positions_causal_are_txl_pos_seq():
    for k_len in (1, 5, 9):
        for q_len in range(k_len + 1):
            expected = torch.arange(k_len - 1, -1, -1.0).long()  # pos_seq of MemTransformerLM
            assert torch.equal(transformer_xl_positions(q_len, k_len), expected)


def test_positions_default_k_len_is_q_len():
    assert torch.equal(transformer_xl_positions(4), torch.tensor([3, 2, 1, 0]))


def test_positions_bidirectional_are_xlnet_bi_without_its_first():
    for q_len, k_len in [(1, 1), (3, 3), (3, 7), (5, 6)]:
        xlnet = torch.arange(k_len, -q_len, -1)  # XLNet attn_type="bi": tf.range(klen, -qlen, -1)
        got = transformer_xl_positions(q_len, k_len, bidirectional=True)
        assert torch.equal(got, xlnet[1:])
        assert got.numel() == k_len + q_len - 1


def test_positions_empty():
    assert transformer_xl_positions(0, 0).shape == (0,)
    assert transformer_xl_positions(0, 0, bidirectional=True).shape == (0,)
    assert torch.equal(transformer_xl_positions(0, 3, bidirectional=True), torch.tensor([2, 1]))


def test_positions_clamp_len_clips_both_sides():
    got = transformer_xl_positions(4, 8, bidirectional=True, clamp_len=2)
    assert torch.equal(got, torch.arange(7, -4, -1).clamp(-2, 2))
    # Transformer-XL clamps pos_seq from above (it has no negative distances)
    assert torch.equal(
        transformer_xl_positions(3, 6, clamp_len=4), torch.tensor([4, 4, 3, 2, 1, 0])
    )


def test_positions_sinusoid_is_txl_positional_embedding():
    pos_seq = transformer_xl_positions(5, 12)
    for dim in (8, 32, 410):  # 410: d_model of Transformer-XL's WikiText-103 base model
        ours = sinusoidal(pos_seq, dim, layout="concat", dtype=torch.float64)
        torch.testing.assert_close(ours, txl_positional_embedding(pos_seq, dim))


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((3, 2), {}, ValueError, "q_len must not exceed k_len"),
        ((-1, 2), {}, ValueError, "q_len must be an integer >= 0"),
        ((1, 2.0), {}, TypeError, "k_len must be an integer"),
        ((1, 2), {"bidirectional": 1}, TypeError, "bidirectional must be a bool"),
        ((1, 2), {"clamp_len": 0}, ValueError, "clamp_len must be a positive integer"),
    ],
)
def test_positions_validation(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        transformer_xl_positions(*args, **kwargs)


# ---------------------------------------------------------------- relative_shift


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 1), (4, 4), (7, 7), (1, 6), (3, 8), (5, 6)])
def test_shift_equals_gather_on_causal_part(q_len, k_len):
    x = torch.randn(2, 3, q_len, k_len)
    out = relative_shift(x)
    expected, valid = gather_shift(x, k_len)
    i = torch.arange(q_len)[:, None]
    j = torch.arange(k_len)[None, :]
    causal = j <= i + k_len - q_len
    assert torch.equal(valid, causal)  # with r = k, exactly the causal part is defined
    assert torch.equal(out[..., causal], expected[..., causal])


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 1), (4, 4), (3, 8), (6, 7)])
def test_shift_future_entries_are_pad_then_next_row(q_len, k_len):
    x = torch.randn(q_len, k_len)
    out = relative_shift(x)
    m_len = k_len - q_len
    for i in range(q_len):
        for j in range(i + m_len + 1, k_len):
            if j == i + m_len + 1:
                assert out[i, j] == 0  # the zero pad
            else:
                assert out[i, j] == x[i + 1, j - i - m_len - 2]  # the next query's row


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 1), (4, 4), (3, 8), (6, 7)])
def test_shift_bidirectional_is_exact_everywhere(q_len, k_len):
    r_len = k_len + q_len - 1
    x = torch.randn(2, q_len, r_len)
    expected, valid = gather_shift(x, k_len)
    assert valid.all()
    assert torch.equal(relative_shift(x, k_len), expected)


def test_shift_equals_transformer_xl_rel_shift():
    q_len, k_len, bsz, n_head = 5, 9, 2, 3
    bd = torch.randn(q_len, k_len, bsz, n_head)  # Transformer-XL's [qlen, klen, bsz, n_head]
    ours = relative_shift(bd.permute(2, 3, 0, 1)).permute(2, 3, 0, 1)
    assert torch.equal(ours, txl_rel_shift(bd))  # all entries, garbage included


def test_shift_docstring_example():
    x = torch.tensor([[2, 1, 0], [12, 11, 10], [22, 21, 20]])
    assert torch.equal(relative_shift(x), torch.tensor([[0, 0, 12], [11, 10, 0], [22, 21, 20]]))


@settings(max_examples=60, deadline=None)
@given(
    q_len=st.integers(0, 7),
    m_len=st.integers(0, 7),
    extra=st.integers(0, 8),
    batch=st.lists(st.integers(1, 3), max_size=2),
)
def test_shift_property_exact_where_defined(q_len, m_len, extra, batch):
    k_len = q_len + m_len
    r_len = k_len + extra
    x = torch.randn(*batch, q_len, r_len, dtype=torch.float64)
    out = relative_shift(x, k_len)
    assert out.shape == (*batch, q_len, k_len) and out.dtype == x.dtype
    if q_len and k_len:
        expected, valid = gather_shift(x, k_len)
        assert torch.equal(out[..., valid], expected[..., valid])


def test_shift_keeps_dtype_and_handles_empty():
    assert relative_shift(torch.zeros(0, 0)).shape == (0, 0)
    assert relative_shift(torch.zeros(2, 0, 5)).shape == (2, 0, 5)
    assert relative_shift(torch.zeros(2, 0, 5), 3).shape == (2, 0, 3)
    half = relative_shift(torch.randn(3, 4, dtype=torch.float16))
    assert half.dtype == torch.float16


def test_shift_non_contiguous_input():
    x = torch.randn(6, 9)[:, ::2]  # [6, 5], not contiguous
    assert not x.is_contiguous()
    assert torch.equal(relative_shift(x.T, 6), relative_shift(x.T.contiguous(), 6))
    assert torch.equal(relative_shift(x[:5], 5), relative_shift(x[:5].contiguous(), 5))


@pytest.mark.parametrize(
    ("x", "k_len", "error", "match"),
    [
        ([1.0, 2.0], None, TypeError, "x must be a torch.Tensor"),
        (torch.zeros(3), None, ValueError, r"x must have shape \(\.\.\., q_len, r_len\)"),
        (torch.zeros(4, 3), None, ValueError, "q_len must not exceed k_len"),
        (torch.zeros(2, 5), 6, ValueError, "k_len must not exceed the number of distances"),
        (torch.zeros(3, 5), 2, ValueError, "q_len must not exceed k_len"),
        (torch.zeros(2, 5), -1, ValueError, "k_len must be an integer >= 0"),
        (torch.zeros(2, 5), 2.0, TypeError, "k_len must be an integer"),
    ],
)
def test_shift_validation(x, k_len, error, match):
    with pytest.raises(error, match=match):
        relative_shift(x, k_len)


# ---------------------------------------------------------------- scores


def _inputs(bsz, q_len, k_len, r_len, d, dtype=torch.float64):
    q = torch.randn(bsz, q_len, d, dtype=dtype)
    k = torch.randn(bsz, k_len, d, dtype=dtype)
    r = torch.randn(bsz, r_len, d, dtype=dtype)
    u = torch.randn(bsz, 1, d, dtype=dtype)
    v = torch.randn(bsz, 1, d, dtype=dtype)
    return q, k, r, u, v


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 1), (5, 5), (1, 6), (3, 8), (4, 5)])
def test_scores_equal_four_term_loop_causal(q_len, k_len):
    q, k, r, u, v = _inputs(2, q_len, k_len, k_len, 6)
    got = transformer_xl_scores(q, k, r, u, v)
    expected = loop_scores(q, k, r, u, v, transformer_xl_positions(q_len, k_len))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 1), (5, 5), (1, 6), (3, 8), (4, 5)])
def test_scores_equal_four_term_loop_bidirectional(q_len, k_len):
    r_len = k_len + q_len - 1
    q, k, r, u, v = _inputs(2, q_len, k_len, r_len, 6)
    got = transformer_xl_scores(q, k, r, u, v)
    expected = loop_scores(
        q, k, r, u, v, transformer_xl_positions(q_len, k_len, bidirectional=True)
    )
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, expected)


def test_scores_equal_transformer_xl_attention():
    """RelPartialLearnableMultiHeadAttn's AC + BD (before scale and mask), in its own layout."""
    torch.manual_seed(0)
    qlen, mlen, bsz, n_head, d_head, d_model = 4, 3, 2, 3, 5, 16
    klen = qlen + mlen
    w_head_q = torch.randn(qlen, bsz, n_head, d_head, dtype=torch.float64)
    w_head_k = torch.randn(klen, bsz, n_head, d_head, dtype=torch.float64)
    r_net = torch.randn(n_head * d_head, d_model, dtype=torch.float64)
    r_w_bias = torch.randn(n_head, d_head, dtype=torch.float64)
    r_r_bias = torch.randn(n_head, d_head, dtype=torch.float64)
    pos_seq = torch.arange(klen - 1, -1, -1.0)
    r = txl_positional_embedding(pos_seq, d_model)  # [klen, d_model]
    r_head_k = (r @ r_net.T).view(klen, n_head, d_head)

    ac = torch.einsum("ibnd,jbnd->ijbn", w_head_q + r_w_bias, w_head_k)
    bd = txl_rel_shift(torch.einsum("ibnd,jnd->ijbn", w_head_q + r_r_bias, r_head_k))
    txl = (ac + bd).permute(2, 3, 0, 1)  # [bsz, n_head, qlen, klen]

    ours = transformer_xl_scores(
        w_head_q.permute(1, 2, 0, 3),  # [b, h, q, d]
        w_head_k.permute(1, 2, 0, 3),  # [b, h, k, d]
        r_head_k.permute(1, 0, 2),  # [h, k, d]: shared by the batch
        r_w_bias[:, None, :],  # [h, 1, d]
        r_r_bias[:, None, :],
    )
    mask = torch.triu(torch.ones(qlen, klen, dtype=torch.bool), diagonal=1 + mlen)  # dec_attn_mask
    assert torch.equal(torch.isinf(ours), mask.expand_as(ours))
    torch.testing.assert_close(ours[..., ~mask], txl[..., ~mask])


def test_scores_without_position_terms_are_plain_dot_products():
    q, k, _, u, v = _inputs(1, 3, 5, 5, 4)
    zero_r = torch.zeros(1, 5 + 3 - 1, 4, dtype=torch.float64)
    got = transformer_xl_scores(q, k, zero_r, torch.zeros_like(u), v)
    torch.testing.assert_close(got, q @ k.transpose(-2, -1))


def test_scores_dtype_broadcast_and_empty():
    q = torch.randn(2, 3, 0, 4, dtype=torch.float32)
    k = torch.randn(2, 3, 5, 4)
    r = torch.randn(3, 5, 4)
    u = v = torch.zeros(4)
    assert transformer_xl_scores(q, k, r, u, v).shape == (2, 3, 0, 5)
    q = torch.randn(2, 3, 2, 4, dtype=torch.float64)
    k, r = k.double(), r.double()
    out = transformer_xl_scores(q, k, r, u.double(), v.double())
    assert out.shape == (2, 3, 2, 5) and out.dtype == torch.float64


def _bad(**changes):
    args = {
        "q": torch.randn(2, 3, 4),
        "k": torch.randn(2, 5, 4),
        "r": torch.randn(5, 4),
        "u": torch.randn(4),
        "v": torch.randn(4),
    }
    args.update(changes)
    return args


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"q": [[1.0]]}, TypeError, "q must be a torch.Tensor"),
        ({"k": torch.ones(2, 5, 4, dtype=torch.int64)}, ValueError, "k must be a floating-point"),
        ({"r": torch.randn(5, 4, dtype=torch.float64)}, ValueError, "must have the same dtype"),
        ({"q": torch.randn(4)}, ValueError, r"q must have shape \(\.\.\., seq, d\)"),
        ({"k": torch.randn(2, 5, 3)}, ValueError, r"k must have the last dimension of q \(4\)"),
        ({"u": torch.randn(3)}, ValueError, r"u must have the last dimension of q \(4\)"),
        ({"v": torch.tensor(1.0)}, ValueError, r"v must have the last dimension of q \(4\)"),
        (
            {"q": torch.randn(2, 3, 0), "k": torch.randn(2, 5, 0), "r": torch.randn(5, 0)},
            ValueError,
            "q must have a positive last dimension",
        ),
        ({"q": torch.randn(2, 6, 4)}, ValueError, "q_len must not exceed k_len"),
        ({"r": torch.randn(6, 4)}, ValueError, r"r must hold k_len=5 \(causal\) or"),
        ({"k": torch.randn(3, 5, 4)}, ValueError, "must have broadcastable batch axes"),
        ({"u": torch.randn(2, 2, 4)}, ValueError, "u must broadcast to the shape of q"),
    ],
)
def test_scores_validation(changes, error, match):
    with pytest.raises(error, match=match):
        transformer_xl_scores(**_bad(**changes))
