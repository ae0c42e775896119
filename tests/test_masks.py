"""posenc.attention_mask and attention_mask_mod: SDPA's attn_mask and FlexAttention's mask_mod.

The masks are checked against the rule written out pair by pair, against
PyTorch's own lower-right causal mask, against posenc.attention and a full
causal computation (chunked prefill), and against a loop over the documents
of a packed batch and the rows of a left-padded one; the mask_mod against
the SDPA mask and inside FlexAttention (eager, on the CPU).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from posenc import (
    CoPE,
    FireBias,
    KerpleBias,
    T5RelativeBias,
    alibi_bias,
    alibi_score_mod,
    attention,
    attention_mask,
    attention_mask_mod,
)

H, D = 2, 8


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def rule(q_pos, k_pos, q_doc=None, k_doc=None, *, causal=True, window=None) -> torch.Tensor:
    """The mask pair by pair in Python: True where query i attends key j."""
    out = torch.zeros(len(q_pos), len(k_pos), dtype=torch.bool)
    for i, p in enumerate(q_pos):
        for j, s in enumerate(k_pos):
            ok = (s <= p) if causal else True
            if window is not None:
                ok = ok and ((p - s < window) if causal else abs(p - s) < window)
            if q_doc is not None:
                ok = ok and q_doc[i] == k_doc[j]
            out[i, j] = ok
    return out


# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window", [None, 1, 3])
@pytest.mark.parametrize(("q_len", "k_len"), [(5, 5), (2, 6), (0, 3), (1, 1)])
def test_lengths_place_the_queries_at_the_end_of_the_keys(causal, window, q_len, k_len):
    mask = attention_mask(q_len, k_len, causal=causal, window=window, dtype=torch.bool)
    expected = rule(range(k_len - q_len, k_len), range(k_len), causal=causal, window=window)
    assert mask.dtype == torch.bool and torch.equal(mask, expected)
    additive = attention_mask(q_len, k_len, causal=causal, window=window)
    assert additive.dtype == torch.float32
    assert torch.equal(additive, torch.zeros(q_len, k_len).masked_fill(~expected, -torch.inf))


def test_small_examples_by_hand():
    # chunked prefill: the last 2 queries of 4 keys see keys up to their own position
    assert attention_mask(2, 4, dtype=torch.bool).tolist() == [
        [True, True, True, False],
        [True, True, True, True],
    ]
    ids = torch.tensor([0, 0, 1, 1])
    mask = attention_mask(q_document_ids=ids, k_document_ids=ids, dtype=torch.bool)
    assert mask.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]
    window = attention_mask(4, window=2, dtype=torch.bool)
    assert window.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]


@pytest.mark.parametrize(("q_len", "k_len"), [(3, 3), (2, 7), (1, 5)])
def test_causal_mask_equals_torch_lower_right_causal_mask(q_len, k_len):
    q, k, v = randn(1, H, q_len, D), randn(1, H, k_len, D, seed=1), randn(1, H, k_len, D, seed=2)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q_len, k_len))
    for dtype in (torch.bool, torch.float32):
        mask = attention_mask(q_len, k_len, dtype=dtype)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(("q_len", "k_len"), [(6, 6), (2, 6)])
def test_sdpa_with_the_mask_equals_posenc_attention(q_len, k_len):
    q, k, v = randn(2, H, q_len, D), randn(2, H, k_len, D, seed=1), randn(2, H, k_len, D, seed=2)
    bias = alibi_bias(H, q_len, k_len)
    mask = attention_mask(q_len, k_len, bias=bias)
    reference = attention(q, k, v, bias=bias, causal=True)
    torch.testing.assert_close(attention(q, k, v, bias=mask), reference, rtol=0, atol=1e-6)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask), reference, rtol=1e-5, atol=1e-6
    )


def test_chunked_prefill_equals_the_last_rows_of_the_full_causal_computation():
    k_len, chunk = 9, 3
    q, k, v = randn(1, H, k_len, D), randn(1, H, k_len, D, seed=1), randn(1, H, k_len, D, seed=2)
    t5 = T5RelativeBias(H, bidirectional=False)
    with torch.no_grad():
        full = attention(q, k, v, bias=t5(k_len), causal=True)
        mask = attention_mask(chunk, k_len, bias=t5(chunk, k_len))  # the last 3 queries
    out = F.scaled_dot_product_attention(q[..., -chunk:, :], k, v, attn_mask=mask)
    torch.testing.assert_close(out, full[..., -chunk:, :], rtol=1e-5, atol=1e-6)
    # SDPA's is_causal aligns the mask to the top left: wrong for a chunk
    wrong = F.scaled_dot_product_attention(q[..., -chunk:, :], k, v, is_causal=True)
    assert not torch.allclose(wrong, full[..., -chunk:, :], atol=1e-3)


def test_sliding_window_attention_equals_a_loop_over_the_windows():
    k_len, window = 7, 3
    q, k, v = randn(1, H, k_len, D), randn(1, H, k_len, D, seed=1), randn(1, H, k_len, D, seed=2)
    bias = alibi_bias(H, k_len)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attention_mask(k_len, window=window, bias=bias)
    )
    for i in range(k_len):
        keys = slice(max(0, i - window + 1), i + 1)  # the window newest keys, itself included
        row = attention(
            q[..., i : i + 1, :], k[..., keys, :], v[..., keys, :], bias=bias[:, i : i + 1, keys]
        )
        torch.testing.assert_close(out[..., i : i + 1, :], row, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- packed and padded


def test_packed_documents_equal_a_loop_over_the_documents():
    lengths = [3, 1, 4]
    ids = torch.repeat_interleave(torch.arange(3), torch.tensor(lengths))  # [0 0 0 1 2 2 2 2]
    positions = torch.cat([torch.arange(n) for n in lengths])  # [0 1 2 0 0 1 2 3]
    q, k, v = randn(1, H, 8, D), randn(1, H, 8, D, seed=1), randn(1, H, 8, D, seed=2)
    kerple = KerpleBias(H)
    with torch.no_grad():
        bias = kerple(q_positions=positions, k_positions=positions)
    mask = attention_mask(
        q_positions=positions,
        k_positions=positions,
        q_document_ids=ids,
        k_document_ids=ids,
        bias=bias,
    )
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    start = 0
    for n in lengths:
        part = slice(start, start + n)
        with torch.no_grad():
            alone = attention(
                q[..., part, :], k[..., part, :], v[..., part, :], bias=kerple(n), causal=True
            )
        torch.testing.assert_close(out[..., part, :], alone, rtol=1e-5, atol=1e-6)
        start += n


def test_left_padded_batch_equals_a_loop_over_the_rows():
    lengths, width = [5, 2, 4], 5
    pads = [width - n for n in lengths]
    positions = torch.tensor([[0] * p + list(range(n)) for p, n in zip(pads, lengths, strict=True)])
    ids = torch.tensor([[0] * p + [1] * n for p, n in zip(pads, lengths, strict=True)])  # pads: 0
    q, k, v = randn(3, H, width, D), randn(3, H, width, D, seed=1), randn(3, H, width, D, seed=2)
    bias = alibi_bias(H, q_positions=positions, k_positions=positions)  # [3, h, 5, 5]
    mask = attention_mask(
        q_positions=positions,
        k_positions=positions,
        q_document_ids=ids,
        k_document_ids=ids,
        bias=bias,
    )
    assert mask.shape == (3, H, width, width)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert not out.isnan().any()  # the padding attends padding: no empty row
    for b, (p, n) in enumerate(zip(pads, lengths, strict=True)):
        alone = attention(q[b, :, p:], k[b, :, p:], v[b, :, p:], bias=alibi_bias(H, n), causal=True)
        torch.testing.assert_close(out[b, :, p:], alone, rtol=1e-5, atol=1e-6)
    # decoding one more token per row against the padded cache
    step_pos = positions[:, -1:] + 1
    cache_pos = torch.cat([positions, step_pos], dim=1)
    cache_ids = torch.cat([ids, torch.ones(3, 1, dtype=torch.long)], dim=1)
    step_mask = attention_mask(
        q_positions=step_pos,
        k_positions=cache_pos,
        q_document_ids=cache_ids[:, -1:],
        k_document_ids=cache_ids,
        dtype=torch.bool,
    )
    real = torch.tensor(
        [[False] * p + [True] * (n + 1) for p, n in zip(pads, lengths, strict=True)]
    )
    assert torch.equal(step_mask[:, 0, 0], real)


def test_batched_mask_without_bias_broadcasts_over_heads_and_bias_over_rows():
    positions = torch.tensor([[0, 1, 2], [0, 0, 1]])
    mask = attention_mask(q_positions=positions, k_positions=positions, dtype=torch.bool)
    assert mask.shape == (2, 1, 3, 3)
    for b in range(2):
        assert torch.equal(mask[b, 0], rule(positions[b].tolist(), positions[b].tolist()))
    shared = attention_mask(q_positions=positions, k_positions=positions, bias=alibi_bias(H, 3))
    assert shared.shape == (2, H, 3, 3)
    bf16 = attention_mask(3, dtype=torch.bfloat16)
    assert bf16.dtype == torch.bfloat16 and bf16[0, 1] == -torch.inf


def test_cope_takes_its_positions_from_a_document_mask():
    # CoPE counts gates up to the query: with the scores of other documents at
    # -inf their gates are 0, so a packed row equals the documents run alone.
    lengths = [3, 4]
    ids = torch.repeat_interleave(torch.arange(2), torch.tensor(lengths))
    cope = CoPE(D, H, max_positions=5)
    with torch.no_grad():
        cope.pos_emb.copy_(randn(5, D, seed=3))
    q, k = randn(1, H, 7, D), randn(1, H, 7, D, seed=1)
    mask = attention_mask(q_document_ids=ids, k_document_ids=ids)
    scores = q @ k.transpose(-1, -2) / D**0.5 + mask
    with torch.no_grad():
        packed = cope(q, scores) + scores
    start = 0
    for n in lengths:
        part = slice(start, start + n)
        alone_scores = scores[..., part, part]
        with torch.no_grad():
            alone = cope(q[..., part, :], alone_scores) + alone_scores
        torch.testing.assert_close(packed[..., part, part], alone, rtol=1e-6, atol=1e-6)
        start += n


# ---------------------------------------------------------------- FlexAttention


def index_grid(batch: int, q_len: int, k_len: int):
    b = torch.arange(batch)[:, None, None, None]
    h = torch.arange(H)[None, :, None, None]
    return b, h, torch.arange(q_len)[None, None, :, None], torch.arange(k_len)[None, None, None, :]


MASK_CASES = {
    "causal": ((5,), {}),
    "chunk": ((2, 6), {}),
    "window": ((3, 6), {"window": 2}),
    "bidirectional-window": ((4,), {"causal": False, "window": 2}),
    "documents": (
        (),
        {
            "q_document_ids": torch.tensor([0, 0, 1, 1, 1]),
            "k_document_ids": torch.tensor([0, 0, 1, 1, 1]),
        },
    ),
    "packed-batch": (
        (),
        {
            "q_positions": torch.tensor([[0, 1, 0, 1, 2], [0, 0, 0, 1, 2]]),
            "k_positions": torch.tensor([[0, 1, 0, 1, 2], [0, 0, 0, 1, 2]]),
            "q_document_ids": torch.tensor([[0, 0, 1, 1, 1], [0, 0, 1, 1, 1]]),
            "k_document_ids": torch.tensor([[0, 0, 1, 1, 1], [0, 0, 1, 1, 1]]),
        },
    ),
}


@pytest.mark.parametrize("case", list(MASK_CASES))
def test_mask_mod_equals_the_sdpa_mask_elementwise(case):
    args, kwargs = MASK_CASES[case]
    mask = attention_mask(*args, **kwargs, dtype=torch.bool)  # [q, k] or [b, 1, q, k]
    q_len, k_len = mask.shape[-2:]
    out = attention_mask_mod(*args, **kwargs)(*index_grid(2, q_len, k_len))
    assert out.dtype == torch.bool
    shape = (2, H, q_len, k_len)
    assert torch.equal(out.expand(shape), mask.expand(shape))


flex = pytest.importorskip("torch.nn.attention.flex_attention")


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("case", list(MASK_CASES))
def test_flex_attention_with_mask_mod_and_score_mod_equals_sdpa(case):
    args, kwargs = MASK_CASES[case]
    causal = kwargs.get("causal", True)
    mask = attention_mask(*args, **kwargs, dtype=torch.bool)
    q_len, k_len = mask.shape[-2:]
    positions = {key: kwargs[key] for key in ("q_positions", "k_positions") if key in kwargs}
    lengths = (q_len, k_len) if not positions else ()
    q, k, v = randn(2, H, q_len, D), randn(2, H, k_len, D, seed=1), randn(2, H, k_len, D, seed=2)
    block_mask = flex.create_block_mask(
        attention_mask_mod(*args, **kwargs),
        B=2 if mask.ndim == 4 else None,
        H=None,
        Q_LEN=q_len,
        KV_LEN=k_len,
        device="cpu",
    )
    score_mod = alibi_score_mod(H, *lengths, causal=causal, **positions)
    out = flex.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    bias = alibi_bias(H, *lengths, causal=causal, **positions)
    expected = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attention_mask(*args, **kwargs, bias=bias)
    )
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"q_len": 3, "k_len": 2}, ValueError, "q_len must not exceed k_len"),
        ({"q_len": 3, "window": 0}, ValueError, "window must be a positive integer, got 0"),
        ({"q_len": 3, "window": 2.0}, TypeError, "window must be an integer"),
        ({"q_len": 3, "causal": 1}, TypeError, "causal must be a bool"),
        ({}, ValueError, "q_len is required unless q_positions and k_positions are given"),
        (
            {"q_len": 3, "q_document_ids": torch.zeros(3, dtype=torch.long)},
            ValueError,
            "q_document_ids and k_document_ids must be given together, k_document_ids is None",
        ),
        (
            {"q_len": 3, "q_document_ids": torch.zeros(3), "k_document_ids": torch.zeros(3)},
            ValueError,
            "q_document_ids must be an integer tensor, got dtype torch.float32",
        ),
        (
            {
                "q_len": 2,
                "k_len": 3,
                "q_document_ids": torch.zeros(3, dtype=torch.long),
                "k_document_ids": torch.zeros(3, dtype=torch.long),
            },
            ValueError,
            r"must have 2 and 3 entries along their last axis \(from q_len and k_len\), got \(3,\)",
        ),
        (
            {
                "q_positions": torch.zeros(2, 3, dtype=torch.long),
                "k_positions": torch.zeros(3, dtype=torch.long),
                "q_document_ids": torch.zeros(4, 3, dtype=torch.long),
                "k_document_ids": torch.zeros(4, 3, dtype=torch.long),
            },
            ValueError,
            "must share one batch size, got q_positions 2, q_document_ids 4, k_document_ids 4",
        ),
        (
            {"q_len": 2, "q_positions": torch.arange(2), "k_positions": torch.arange(2)},
            ValueError,
            "give either lengths",
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        attention_mask(**kwargs)
    if kwargs:  # without any argument, the mask_mod is that of self-attention
        with pytest.raises(error, match=match):
            attention_mask_mod(**kwargs)


def test_bad_bias_and_dtype():
    with pytest.raises(ValueError, match="a bias needs a floating dtype"):
        attention_mask(3, bias=torch.zeros(3, 3), dtype=torch.bool)
    with pytest.raises(
        ValueError, match=r"bias must have shape \(\.\.\., 3, 4\) .* got \(2, 4, 3\)"
    ):
        attention_mask(3, 4, bias=torch.zeros(2, 4, 3))
    with pytest.raises(ValueError, match=r"mask \(2, 1, 3, 3\), got \(3, 1, 3, 3\)"):
        attention_mask(
            q_positions=torch.zeros(2, 3, dtype=torch.long),
            k_positions=torch.zeros(2, 3, dtype=torch.long),
            bias=torch.zeros(3, 1, 3, 3),
        )
    with pytest.raises(ValueError, match="bias must be a floating-point tensor"):
        attention_mask(3, bias=torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"dtype must be a floating-point torch\.dtype"):
        attention_mask(3, dtype=torch.int32)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile internals
def test_compiled_flex_attention_takes_every_score_mod_and_the_mask_mod():
    # Inductor compiles a score_mod and a mask_mod into its kernel only when
    # they are pointwise (no bucketize, no reduction, no new tensor); one
    # compilation of all the score_mods in a chain shows it for each. The two
    # packed rows differ in their blocks of 128: keys 0-127 for queries
    # 128-255 are all visible in row 0 (one document) and partly masked in
    # row 1 (documents of 100 and 156 tokens). The compiled kernel applies no
    # mask_mod to a block the block mask calls full, so the block mask needs
    # the batch size: with B=None, row 0's blocks serve both (an error of 3.6).
    torch.manual_seed(0)
    n = 256
    positions = torch.stack([torch.arange(n), torch.cat([torch.arange(100), torch.arange(156)])])
    ids = torch.stack([torch.zeros(n, dtype=torch.long), (torch.arange(n) >= 100).long()])
    where = {"q_positions": positions, "k_positions": positions}
    documents = {"q_document_ids": ids, "k_document_ids": ids}
    biases = [T5RelativeBias(H), KerpleBias(H), KerpleBias(H, kind="power"), FireBias(H, hidden=4)]
    score_mods = [alibi_score_mod(H, **where)] + [bias.score_mod(**where) for bias in biases]

    def chained(score, b, h, q_idx, kv_idx):
        for score_mod in score_mods:
            score = score_mod(score, b, h, q_idx, kv_idx)
        return score

    block_mask = flex.create_block_mask(
        attention_mask_mod(**where, **documents), B=2, H=None, Q_LEN=n, KV_LEN=n, device="cpu"
    )
    q, k, v = randn(2, H, n, 16), randn(2, H, n, 16, seed=1), randn(2, H, n, 16, seed=2)
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(flex.flex_attention)(q, k, v, score_mod=chained, block_mask=block_mask)
        bias = alibi_bias(H, **where) + sum(b(**where) for b in biases)
    expected = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attention_mask(**where, **documents, bias=bias)
    )
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
