"""The behaviour of each seed implementation, reproduced through posenc.

Each test rebuilds what a seed computes from its *formula* (written out here
independently, element by element in float64) and pins posenc's settings
that reproduce it:

* 000, labml ``PositionalEncoding``: interleaved, ``[seq, batch, d]`` input,
  dropout, a table kept out of the ``state_dict``.
* 003, AllenNLP ``SinusoidalPositionalEncoding``: concatenated sines and
  cosines, the ``n - 1`` frequency denominator, a zero column for odd widths,
  batch-first input.
* 004, ``SinusoidalEmbeddings`` / ``PositionalEmbeddings``: index lookups,
  a zero row 0, the learned scale of Hua et al. (2022), learned tables; its
  exponent ``2*i/d`` (``i`` the column) is a bug against the paper's
  ``2*(i//2)/d``, measured at the end.
"""

from __future__ import annotations

import math

import pytest
import torch

from posenc import (
    LearnedPositionalEmbedding,
    SinusoidalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal,
)

# --------------------------------------------------------------------------
# 000 labml: PE[p, 2i] = sin(p * exp(-2i ln(10000) / d)), PE[p, 2i+1] = cos(same).


def labml_table(seq: int, d: int) -> torch.Tensor:
    table = torch.zeros(seq, d, dtype=torch.float64)
    for p in range(seq):
        for two_i in range(0, d, 2):
            rate = math.exp(-two_i * math.log(10000.0) / d)
            table[p, two_i] = math.sin(p * rate)
            table[p, two_i + 1] = math.cos(p * rate)
    return table


def test_labml_sequence_first_with_dropout() -> None:
    seq, batch, d = 12, 3, 20
    m = SinusoidalPositionalEncoding(d, dropout=0.25, batch_first=False)
    x = torch.randn(seq, batch, d)  # labml's [seq, batch, d_model]
    expected = x + labml_table(seq, d)[:, None, :].float()  # the table broadcast over batch

    m.eval()  # dropout is the identity
    torch.testing.assert_close(m(x), expected, rtol=0, atol=1e-6)

    m.train()  # dropout zeroes about a quarter and scales the rest by 1 / (1 - 0.25)
    torch.manual_seed(0)
    out = m(x)
    kept = out != 0
    assert 0.6 < kept.float().mean().item() < 0.9
    torch.testing.assert_close(out[kept], expected[kept] / 0.75)


def test_labml_table_is_not_saved() -> None:
    # labml registers its table with persistent=False; so does posenc.
    m = SinusoidalPositionalEncoding(20, dropout=0.1, batch_first=False)
    m(torch.zeros(5000, 1, 20))  # labml's default max_len
    assert m.state_dict() == {}
    assert m.cache.shape[0] >= 5000
    torch.testing.assert_close(m.cache[:5000], labml_table(5000, 20).float(), rtol=0, atol=1e-6)


def test_labml_odd_width_is_accepted() -> None:
    # labml fails on odd d_model (its cos slice is one column short); posenc
    # leaves the last column zero instead.
    m = SinusoidalPositionalEncoding(7, batch_first=False)
    out = m(torch.zeros(4, 2, 7))
    assert torch.all(out[..., -1] == 0)
    torch.testing.assert_close(out[:, 0, :6], labml_table(4, 6).float(), rtol=0, atol=1e-6)


# --------------------------------------------------------------------------
# 003 AllenNLP: n = d // 2 timescales, inverse timescale
# exp(-k ln(max / min) / (n - 1)), [sin | cos] concatenated, a zero column
# when d is odd, added to (batch, timesteps, d).


def allennlp_table(timesteps: int, d: int, max_timescale: float = 1.0e4) -> torch.Tensor:
    n = d // 2
    step = math.log(max_timescale / 1.0) / (n - 1)
    table = torch.zeros(timesteps, d, dtype=torch.float64)
    for t in range(timesteps):
        for k in range(n):
            scaled = t * math.exp(-k * step)
            table[t, k] = math.sin(scaled)
            table[t, n + k] = math.cos(scaled)
    return table  # column 2n, if any, stays zero


@pytest.mark.parametrize("d", [4, 9, 16, 33])
def test_allennlp_concat_endpoint_batch_first(d: int) -> None:
    batch, steps = 2, 11
    m = SinusoidalPositionalEncoding(d, layout="concat", endpoint=True)  # batch_first=True
    x = torch.randn(batch, steps, d)
    expected = x + allennlp_table(steps, d)[None].float()
    torch.testing.assert_close(m(x), expected, rtol=0, atol=1e-6)
    if d % 2:
        assert torch.all(m(torch.zeros(1, steps, d))[..., -1] == 0)


def test_allennlp_max_timescale_is_the_base() -> None:
    # AllenNLP's (min_timescale=1, max_timescale=T) is posenc's base=T.
    m = SinusoidalPositionalEncoding(10, layout="concat", endpoint=True, base=500.0)
    x = torch.zeros(1, 6, 10)
    torch.testing.assert_close(m(x)[0], allennlp_table(6, 10, 500.0).float(), rtol=0, atol=1e-6)


# --------------------------------------------------------------------------
# 004: sinusoidal table with row 0 all zeros, optional learned scale; a
# learned table. The paper's angle for column c is p / 10000^(2 (c // 2) / d).


def paper_table(n_positions: int, d: int) -> torch.Tensor:
    table = torch.zeros(n_positions, d, dtype=torch.float64)
    for p in range(1, n_positions):  # row 0 is the padding row
        for c in range(d):
            angle = p / 10000.0 ** (2 * (c // 2) / d)
            table[p, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return table


def column_exponent_table(n_positions: int, d: int) -> torch.Tensor:
    """The seed file as written: exponent 2 c / d with c the column itself."""
    table = torch.zeros(n_positions, d, dtype=torch.float64)
    for p in range(1, n_positions):
        for c in range(d):
            angle = p / 10000.0 ** (2 * c / d)
            table[p, c] = math.sin(angle) if c % 2 == 0 else math.cos(angle)
    return table


def test_seed004_sinusoidal_lookup_of_any_shape_with_zero_row0() -> None:
    n, d = 64, 32
    m = SinusoidalEmbedding(n, d, padding_idx=0)
    idx = torch.randint(0, n, (3, 4, 5))
    idx[0, 0, 0] = 0
    out = m(idx)
    assert out.shape == (3, 4, 5, d)
    table = paper_table(n, d).float()
    torch.testing.assert_close(out, table[idx], rtol=0, atol=1e-6)
    assert torch.all(out[0, 0, 0] == 0)


def test_seed004_learned_scale_initialised_to_inverse_sqrt_width() -> None:
    n, d = 40, 24
    m = SinusoidalEmbedding(n, d, padding_idx=0, learnable_scale=True)
    assert m.scale.item() == pytest.approx(1 / d**0.5)
    idx = torch.arange(n).reshape(4, 10)
    out = m(idx)
    torch.testing.assert_close(out, paper_table(n, d).float()[idx] / d**0.5, rtol=0, atol=1e-6)
    # Only the scale is trained; the table stays frozen.
    assert [name for name, p in m.named_parameters() if p.requires_grad] == ["scale"]
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    before = m.table.clone()
    out.sum().backward()
    opt.step()
    assert m.scale.item() != pytest.approx(1 / d**0.5)
    assert torch.equal(m.table, before)


def test_seed004_learned_embeddings() -> None:
    n, d = 16, 8
    m = LearnedPositionalEmbedding(n, d, padding_idx=0)
    idx = torch.tensor([[0, 3, 3], [15, 1, 0]])
    out = m(idx)
    assert out.shape == (2, 3, d)
    assert torch.equal(out, m.weight[idx])
    assert torch.all(out[0, 0] == 0)
    out.sum().backward()
    assert torch.all(m.weight.grad[0] == 0)  # the padding row learns nothing
    assert torch.all(m.weight.grad[3] == 2)  # two lookups of row 3, each with gradient 1
    with pytest.raises(IndexError, match=r"\[0, 16\)"):
        m(torch.tensor([16]))


def test_seed004_column_exponent_is_far_from_the_paper() -> None:
    n, d = 128, 32
    right = paper_table(n, d)
    wrong = column_exponent_table(n, d)
    # posenc follows the paper, not the file.
    ours = SinusoidalEmbedding(n, d, padding_idx=0)(torch.arange(n)).double()
    torch.testing.assert_close(ours, right, rtol=0, atol=1e-6)
    assert (ours - wrong).abs().max().item() > 1.5

    # Column 0 agrees (exponent 0 both ways); every other column differs.
    diff = (right - wrong).abs().amax(dim=0)
    assert diff[0] == 0 and bool(torch.all(diff[1:] > 1e-4))

    # In the paper a pair (sin, cos) shares one frequency, so each pair lies
    # on the unit circle and every row has squared norm d / 2.
    pair_norm = right[1:, 0::2] ** 2 + right[1:, 1::2] ** 2
    torch.testing.assert_close(pair_norm, torch.ones_like(pair_norm))
    wrong_norm = wrong[1:, 0::2] ** 2 + wrong[1:, 1::2] ** 2
    assert (wrong_norm - 1).abs().max().item() > 0.9

    # Frequencies, read off a small position (sin(p w) ~ p w): the paper's
    # sine frequencies are geometric with ratio 10000^(-2/d); the file's
    # ratio is 10000^(-4/d), i.e. its frequencies are the paper's squared.
    p = 1e-3
    w_right = torch.asin(sinusoidal(torch.tensor([p]), d, dtype=torch.float64)[0, 0::2]) / p
    w_wrong = torch.tensor([10000.0 ** (-2 * c / d) for c in range(0, d, 2)], dtype=torch.float64)
    torch.testing.assert_close(
        w_right[1:] / w_right[:-1], torch.full((15,), 10000.0 ** (-2 / d), dtype=torch.float64)
    )
    torch.testing.assert_close(w_wrong, w_right**2)
    # So its slowest sine has a wavelength of about 2 pi 10000^1.9 instead of 2 pi 10000^0.9375.
    assert 2 * math.pi / w_wrong[-1].item() > 1000 * 2 * math.pi / w_right[-1].item()

    # And the relative-position property is lost: PE(p) . PE(p + k) varies with p.
    def dots(table: torch.Tensor, k: int) -> torch.Tensor:
        return (table[1 : n - k] * table[1 + k :]).sum(-1)

    assert dots(right, 5).std().item() < 1e-9
    assert dots(wrong, 5).std().item() > 0.1
