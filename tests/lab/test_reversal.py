"""Tests of posenc_lab.reversal: the reversal toy of the chapters on absolute encodings."""

from __future__ import annotations

import torch
from torch import nn

from posenc import LearnedPositionalEmbedding, sinusoidal
from posenc_lab.reversal import D, NoPositions, Reverser, T, V, accuracy, batch, train


def test_batch_targets_are_the_reversed_inputs():
    tokens, target = batch(torch.Generator().manual_seed(0), size=5)
    assert tokens.shape == target.shape == (5, T)
    assert 0 <= tokens.min() and tokens.max() < V
    assert torch.equal(target[:, 0], tokens[:, T - 1])
    assert torch.equal(target, tokens[:, torch.arange(T - 1, -1, -1)])


def test_without_positions_equal_tokens_get_equal_outputs():
    torch.manual_seed(0)
    model = Reverser(NoPositions()).double()
    tokens = torch.tensor([[3, 1, 3, 7, 1, 3]])
    with torch.no_grad():
        out = model(tokens)[0]  # [s, V]
    same = dict(rtol=0, atol=1e-12)  # the same sums, perhaps in another order
    assert torch.allclose(out[0], out[2], **same) and torch.allclose(out[0], out[5], **same)
    assert torch.allclose(out[1], out[4], **same)
    assert not torch.allclose(out[0], out[1], **same)


def test_positions_replace_the_default_range():
    torch.manual_seed(0)
    table = sinusoidal(torch.arange(T + 2), D, dtype=torch.float64)
    model = Reverser(nn.Embedding.from_pretrained(table)).double()
    tokens, _ = batch(torch.Generator().manual_seed(0), size=3)
    with torch.no_grad():
        default, explicit = model(tokens), model(tokens, torch.arange(T))
        shifted = model(tokens, torch.arange(T) + 2)
    assert torch.equal(default, explicit)
    assert not torch.allclose(default, shifted)


def test_accuracy_of_an_oracle_and_of_a_constant():
    class Oracle(nn.Module):
        def forward(self, tokens):  # logits that put the reversed token first
            return nn.functional.one_hot(tokens.flip(-1), V).double()

    class Constant(nn.Module):
        def forward(self, tokens):
            return torch.zeros(*tokens.shape, V).index_fill_(-1, torch.tensor([0]), 1.0)

    assert accuracy(Oracle()) == 1.0
    assert abs(accuracy(Constant()) - 1 / V) < 0.01  # about one token in ten is a 0


def test_a_learned_table_learns_to_reverse():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Reverser(LearnedPositionalEmbedding(2 * T, D)).double()
    score, log, losses = train(model, report=(0, 300))
    assert len(losses) == 301  # steps 0 to 300, one update each
    assert abs(losses[0] - torch.log(torch.tensor(float(V))).item()) < 0.05  # a uniform guess
    assert losses[-1] < 0.01
    assert score == accuracy(model) and score > 0.99
    assert log[0] == "ln 10 = 2.3026" and log[-1].startswith("accuracy on 1000 new sequences")
