"""Tests of posenc_lab.toy: the toy Transformer of the length-generalisation chapter."""

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
from posenc_lab.toy import (
    ENCODINGS,
    ToyTransformer,
    accuracy_by_position,
    periodic_batch,
    recall_batch,
    train,
)

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


def test_rope_base_sets_the_frequencies():
    m = model("rope", rope_base=3.776)
    h = torch.randn(2, 12, 32)
    attn = m.blocks[0].attn
    q0, k0, _ = attn.project_raw(h)
    q, k, _ = attn.project(h, torch.arange(12))
    torch.testing.assert_close(q, apply_rope(q0, torch.arange(12), base=3.776))
    torch.testing.assert_close(k, apply_rope(k0, torch.arange(12), base=3.776))
    assert not torch.allclose(q, apply_rope(q0, torch.arange(12)))
    for bad in (1.0, 0.5, float("nan")):
        with pytest.raises(ValueError, match="rope_base must be a finite number greater than 1"):
            model("rope", rope_base=bad)


def test_cope_reads_only_the_rows_a_position_can_reach():
    # the model computes CoPE's bias from the table's first s + 1 rows; the full
    # table, through CoPE itself, gives the same bias, as no position exceeds s
    m = model("cope", max_len=200)
    with torch.no_grad():
        for block in m.blocks:
            block.attn.cope.pos_emb.normal_()
    h = torch.randn(2, 9, 32)
    attn = m.blocks[0].attn
    q, k, v = attn.project(h, torch.arange(9))
    masked = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(
        torch.ones(9, 9, dtype=torch.bool).triu(1), -math.inf
    )
    assert attn.cope.positions(masked).max() <= 9  # a sum of at most 9 gates of at most 1
    scores = masked + attn.cope(q, masked)  # the whole table of 200 rows
    expected = attn.out((scores.softmax(-1) @ v).transpose(1, 2).flatten(2))
    torch.testing.assert_close(attn(h, torch.arange(9)), expected)


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


# ------------------------------------------- the new encodings and options


def test_new_encodings_wire_their_modules():
    from posenc import CoPE, FireBias, KerpleBias

    assert isinstance(model("kerple").kerple_bias, KerpleBias)
    assert isinstance(model("fire").fire_bias, FireBias)
    m = model("cope", max_len=20)
    assert all(isinstance(b.attn.cope, CoPE) for b in m.blocks)
    assert m.blocks[0].attn.cope.max_positions == 20
    torch.testing.assert_close(model("kerple").position_bias(7), model("kerple").kerple_bias(7))
    torch.testing.assert_close(model("fire").position_bias(7), model("fire").fire_bias(7))


def test_fire_threshold_sets_where_interpolation_starts():
    # with the threshold at 4, a query at position 9 divides by psi(9), not psi(4):
    # the bias of query 9 at distance 3 differs from what the default (512) gives
    low = model("fire", fire_threshold=4.0)
    assert low.fire_bias.initial_threshold.item() == 4.0
    assert model("fire").fire_bias.initial_threshold.item() == 512.0
    # same weights (same seed), so the threshold is the only difference
    low_bias, high_bias = low.position_bias(10), model("fire").position_bias(10)
    manual = low.fire_bias(10)
    torch.testing.assert_close(low_bias, manual)
    assert not torch.allclose(low_bias[:, 9, 6], high_bias[:, 9, 6])
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(
            ValueError, match="fire_threshold must be a finite number greater than 0"
        ):
            model("fire", fire_threshold=bad)


def test_cope_with_its_zero_table_is_plain_attention_and_then_moves():
    # CoPE's table starts at zero, so the bias starts at zero
    plain, cope = model("nope"), model("cope", max_len=40)
    tokens = torch.randint(V, (2, 15))
    torch.testing.assert_close(cope(tokens), plain(tokens))
    with torch.no_grad():
        cope.blocks[0].attn.cope.pos_emb.normal_()
    assert not torch.allclose(cope(tokens), plain(tokens))


def test_window_hides_the_far_keys():
    m = model("t5")
    tokens = torch.randint(V, (2, 20))
    torch.testing.assert_close(m(tokens, window=20), m(tokens))
    windowed = m(tokens, window=5)
    torch.testing.assert_close(windowed[:, :5], m(tokens)[:, :5])  # nothing hidden yet
    # a query at t sees t-4 .. t; two layers reach t-8: tokens 0 .. 2 reach t <= 10
    changed = tokens.clone()
    changed[:, :3] = (tokens[:, :3] + 1) % V
    torch.testing.assert_close(m(changed, window=5)[:, 11:], windowed[:, 11:])
    assert not torch.allclose(m(changed, window=5)[:, 10], windowed[:, 10])
    assert not torch.allclose(m(changed)[:, 11:], m(tokens)[:, 11:])


def test_clip_gives_alibi_the_bias_of_distance_clip_minus_1():
    from posenc import alibi_slopes

    m = model("alibi")
    back = (torch.arange(12)[:, None] - torch.arange(12)[None, :]).clamp(max=4)
    expected = -alibi_slopes(4)[:, None, None] * back  # the paper's -m * min(i - j, 4)
    lower = back >= 0
    torch.testing.assert_close(m.position_bias(12, clip=5)[:, lower], expected[:, lower])
    torch.testing.assert_close(m.position_bias(12, clip=12), m.position_bias(12))


def test_clip_gives_rope_the_scores_of_distance_clip_minus_1():
    m = model("rope", n_layers=1)
    attn, s, c = m.blocks[0].attn, 10, 4
    h = torch.randn(1, s, 32)
    q0, k0, v = attn.project_raw(h)  # [1, 4, s, 8]
    scores = torch.full((4, s, s), -math.inf)
    for i in range(s):
        for j in range(i + 1):
            at = i if i - j < c else j + c - 1  # the query moved to distance c - 1
            q = apply_rope(q0[0, :, i : i + 1], torch.tensor([at]))
            k = apply_rope(k0[0, :, j : j + 1], torch.tensor([j]))
            scores[:, i, j] = (q @ k.transpose(-2, -1))[:, 0, 0] / math.sqrt(8)
    y = (scores.softmax(-1) @ v[0]).transpose(0, 1).flatten(1)
    torch.testing.assert_close(attn(h, torch.arange(s), clip=c)[0], attn.out(y))


def test_options_name_their_errors():
    tokens = torch.zeros(1, 6, dtype=torch.long)
    with pytest.raises(ValueError, match="clip needs a relative encoding"):
        model("sinusoidal")(tokens, clip=3)
    with pytest.raises(ValueError, match="positions needs"):
        model("alibi")(tokens, positions=torch.arange(6))
    with pytest.raises(ValueError, match=r"positions must have shape \(6,\)"):
        model("rope")(tokens, positions=torch.arange(5))
    with pytest.raises(ValueError, match="window must be a positive integer"):
        model("rope")(tokens, window=0)


def test_explicit_positions_reach_the_encoding():
    m = model("sinusoidal")
    tokens = torch.randint(V, (1, 5))
    positions = torch.tensor([0, 3, 4, 9, 20])
    expected = m.tokens(tokens) + sinusoidal(positions, 32)
    torch.testing.assert_close(m.embed(tokens, positions), expected)
    r = model("rope")
    shifted = r(tokens, positions=torch.arange(5) + 7)  # RoPE: only differences matter
    torch.testing.assert_close(shifted, r(tokens), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(r(tokens, positions=positions), r(tokens))


def test_periodic_batch_with_bos():
    g = torch.Generator().manual_seed(0)
    inputs, targets = periodic_batch(3, 12, period=4, vocab_size=7, generator=g, bos=True)
    assert inputs.shape == targets.shape == (3, 12)
    assert (inputs[:, 0] == 7).all() and inputs[:, 1:].max() < 7
    assert (targets[:, :4] == -1).all()  # BOS and the first p - 1 tokens
    assert torch.equal(targets[:, 4:], inputs[:, 1:9])  # z_{t+1} = z_{t+1-p}
    assert torch.equal(inputs[:, 5:], inputs[:, 1:-4])


def test_recall_batch():
    g = torch.Generator().manual_seed(0)
    inputs, targets = recall_batch(50, 30, n_keys=5, n_values=3, generator=g)
    assert inputs.shape == targets.shape == (50, 30)
    bindings = inputs[:, :5]
    assert (bindings < 15).all() and (targets[:, :5] == -1).all()
    # every key is bound exactly once
    assert torch.equal((bindings // 3).sort(-1).values, torch.arange(5).expand(50, -1))
    value = {}
    for b in range(50):
        bound = {int(x) // 3: int(x) % 3 for x in bindings[b]}
        for t in range(5, 30):
            key = int(inputs[b, t]) - 15
            assert 0 <= key < 5 and int(targets[b, t]) == bound[key]
        value[b] = bound
    assert len({v for bound in value.values() for v in bound.values()}) == 3
    # a prefix is a shorter sequence of the same task
    g2 = torch.Generator().manual_seed(0)
    short = recall_batch(50, 12, n_keys=5, n_values=3, generator=g2)
    assert torch.equal(short[0][:, :5], inputs[:, :5])
    with pytest.raises(ValueError, match="seq_len"):
        recall_batch(2, 5, n_keys=5)
