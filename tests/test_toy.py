"""Tests of posenc.toy: the toy Transformer of the length-generalisation chapter."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import (
    LinearScaling,
    YarnScaling,
    alibi_bias,
    apply_rope,
    sinusoidal,
    t5_relative_position_bucket,
)
from posenc.toy import ENCODINGS, ToyTransformer, accuracy_by_position, periodic_batch, train

V = 16


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny matrices: one thread is fastest, and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def model(encoding: str, seed: int = 0, **kwargs) -> ToyTransformer:
    torch.manual_seed(seed)
    return ToyTransformer(V, encoding, dim=32, n_heads=4, **kwargs).eval()


def reference_attention(x, q, k, v, bias):
    """softmax(q k^T / sqrt(h_d) + bias + causal mask) v, written out."""
    s = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    future = torch.ones(s, s, dtype=torch.bool).triu(1)
    return scores.masked_fill(future, -math.inf).softmax(-1) @ v


# ------------------------------------------------------------------ shapes


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_shapes(encoding):
    m = model(encoding)
    tokens = torch.randint(V, (3, 20))
    assert m(tokens).shape == (3, 20, V)
    assert m.embed(tokens).shape == (3, 20, 32)


def test_bad_settings():
    with pytest.raises(ValueError, match="encoding"):
        ToyTransformer(V, "xpos")
    with pytest.raises(ValueError, match="divisible"):
        ToyTransformer(V, "nope", dim=30, n_heads=4)
    with pytest.raises(ValueError, match="rope_scaling"):
        model("alibi")(torch.zeros(1, 4, dtype=torch.long), rope_scaling=LinearScaling(2.0))


def test_learned_is_undefined_beyond_its_table():
    m = model("learned", max_len=32)
    m(torch.zeros(1, 32, dtype=torch.long))
    with pytest.raises(IndexError, match="32"):
        m(torch.zeros(1, 33, dtype=torch.long))


# ---------------------------------------------------------------- causality


@pytest.mark.parametrize("encoding", [*ENCODINGS, "rope+pi", "rope+yarn"])
def test_causal_output_at_t_ignores_later_inputs(encoding):
    scaling = {"rope+pi": LinearScaling(2.0), "rope+yarn": YarnScaling(2.0, 16)}.get(encoding)
    m = model(encoding.split("+")[0])
    a = torch.randint(V, (2, 24))
    for t in (0, 7, 22):
        b = a.clone()
        b[:, t + 1 :] = torch.randint(V, (2, 23 - t))
        out_a, out_b = m(a, rope_scaling=scaling), m(b, rope_scaling=scaling)
        torch.testing.assert_close(out_a[:, : t + 1], out_b[:, : t + 1])
        assert not torch.allclose(out_a[:, t + 1 :], out_b[:, t + 1 :])


# ------------------------------------------------- each option wires its function


def test_nope_adds_nothing_and_one_layer_sees_a_set():
    m = model("nope", n_layers=1)
    tokens = torch.randint(V, (2, 12))
    torch.testing.assert_close(m.embed(tokens), m.tokens(tokens))
    assert m.position_bias(12) is None
    # one causal layer without positions: the last output depends on the set of tokens only
    perm = torch.cat([torch.randperm(11), torch.tensor([11])])
    torch.testing.assert_close(m(tokens[:, perm])[:, -1], m(tokens)[:, -1])
    # with sinusoids it depends on the order
    s = model("sinusoidal", n_layers=1)
    assert not torch.allclose(s(tokens[:, perm])[:, -1], s(tokens)[:, -1])


def test_sinusoidal_is_added_to_the_token_embeddings():
    m = model("sinusoidal")
    tokens = torch.randint(V, (2, 50))
    torch.testing.assert_close(m.embed(tokens), m.tokens(tokens) + sinusoidal(torch.arange(50), 32))
    assert m.position_bias(50) is None


def test_learned_rows_are_added_to_the_token_embeddings():
    m = model("learned", max_len=16)
    tokens = torch.randint(V, (2, 10))
    expected = m.tokens(tokens) + m.positions.weight[:10]
    torch.testing.assert_close(m.embed(tokens), expected)


def test_alibi_bias_is_added_to_every_layers_scores():
    m = model("alibi")
    tokens = torch.randint(V, (2, 9))
    bias = m.position_bias(9)
    torch.testing.assert_close(bias, alibi_bias(4, 9), rtol=0, atol=0)
    x = m.embed(tokens)
    positions = torch.arange(9)
    for block in m.blocks:
        h = block.ln1(x)
        q, k, v = block.attn.project(h, positions)
        plain = q @ k.transpose(-2, -1) / math.sqrt(8)
        torch.testing.assert_close(
            block.attn.scores(h, positions, bias) - plain, bias.expand(2, -1, -1, -1)
        )
        y = reference_attention(h, q, k, v, bias).transpose(1, 2).flatten(2)
        torch.testing.assert_close(block.attn(h, positions, bias), block.attn.out(y))
        x = block(x, positions, bias)


def test_t5_bias_is_shared_and_unidirectional():
    m = model("t5")
    bias = m.position_bias(40)
    rel = torch.arange(40)[None, :] - torch.arange(40)[:, None]  # key - query
    buckets = t5_relative_position_bucket(rel, bidirectional=False)
    expected = m.t5_bias.relative_attention_bias.weight[buckets].permute(2, 0, 1)
    torch.testing.assert_close(bias, expected)
    assert sum("t5" in name for name, _ in m.named_parameters()) == 1  # one table for all layers


@pytest.mark.parametrize("scaling", [None, LinearScaling(4.0), YarnScaling(4.0, 16)])
def test_rope_rotates_queries_and_keys_with_the_scaling(scaling):
    m = model("rope")
    assert m.position_bias(12) is None
    h = torch.randn(2, 12, 32)
    attn = m.blocks[1].attn
    raw = attn.qkv(h).view(2, 12, 3, 4, 8).unbind(2)
    q0, k0, v0 = (t.transpose(1, 2) for t in raw)
    q, k, v = attn.project(h, torch.arange(12), scaling)
    torch.testing.assert_close(q, apply_rope(q0, torch.arange(12), scaling=scaling))
    torch.testing.assert_close(k, apply_rope(k0, torch.arange(12), scaling=scaling))
    torch.testing.assert_close(v, v0)
    # the scores depend on positions only through their differences
    shifted = attn.scores(h, torch.arange(12) + 100)
    torch.testing.assert_close(shifted, attn.scores(h, torch.arange(12)), atol=1e-4, rtol=1e-4)
    # and the model uses the scaling it is given
    tokens = torch.randint(V, (1, 12))
    assert (scaling is None) == torch.equal(m(tokens, rope_scaling=scaling), m(tokens))


# ----------------------------------------------------------------- the task


def test_periodic_batch():
    g = torch.Generator().manual_seed(0)
    inputs, targets = periodic_batch(4, 30, period=5, vocab_size=7, generator=g)
    assert inputs.shape == targets.shape == (4, 30)
    assert (targets[:, :4] == -1).all()
    # the target at t is the input at t + 1 - period
    assert torch.equal(targets[:, 4:], inputs[:, :26])
    assert torch.equal(inputs[:, 5:], inputs[:, :-5])
    assert inputs.max() < 7


def test_accuracy_by_position():
    m = model("rope")
    inputs, targets = periodic_batch(8, 20, generator=torch.Generator().manual_seed(0))
    acc = accuracy_by_position(m, inputs, targets)
    assert acc.shape == (20,)
    assert acc[:7].isnan().all() and ((acc[7:] >= 0) & (acc[7:] <= 1)).all()
    predictions = m(inputs).argmax(-1)
    assert torch.equal(acc[7:], (predictions == targets)[:, 7:].float().mean(0))


# ------------------------------------------------------ determinism, learning


def test_same_seed_same_parameters_and_losses():
    a, b = model("t5", seed=3), model("t5", seed=3)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    la = train(a, steps=5, batch_size=4, seq_len=16, seed=1)
    lb = train(b, steps=5, batch_size=4, seq_len=16, seed=1)
    assert la == lb
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert train(model("t5", seed=3), steps=5, batch_size=4, seq_len=16, seed=2) != la


def test_train_passes_the_rope_scaling_on():
    kwargs = {"steps": 2, "batch_size": 4, "seq_len": 16}
    plain = train(model("rope"), **kwargs)
    assert train(model("rope"), **kwargs) == plain
    assert train(model("rope"), rope_scaling=LinearScaling(2.0), **kwargs) != plain


def test_a_short_training_run_reduces_the_loss():
    torch.manual_seed(0)
    m = ToyTransformer(8, "rope", dim=32, n_heads=4)
    losses = train(m, steps=60, batch_size=16, seq_len=16, lr=1e-2, period=4, vocab_size=8)
    assert len(losses) == 60
    start, end = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert start > math.log(8) - 0.3  # about chance: a uniform guess over 8 tokens
    assert end < 0.5 * start
