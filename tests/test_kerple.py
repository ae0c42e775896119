"""Tests of posenc.KerpleBias against the formulas of Chi et al. (2022) and their official code."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import KerpleBias, alibi_bias, alibi_slopes

FLOOR = torch.tensor(0.01, dtype=torch.float32).item()  # the official clamp, in float32
SHAPES = [(0, 0), (0, 3), (1, 1), (1, 7), (3, 3), (4, 9), (9, 9)]


def set_r(bias: KerpleBias, r1: list[float], r2: list[float]) -> None:
    """Set the raw parameters so that r1 and r2 take the given values (inverse maps, in float64)."""
    r1_t = torch.tensor(r1, dtype=torch.float64)
    r2_t = torch.tensor(r2, dtype=torch.float64)
    with torch.no_grad():
        bias.r1_raw.copy_(torch.log(torch.expm1(r1_t - 0.01)))
        if bias.kind == "log":
            bias.r2_raw.copy_(torch.log(torch.expm1(r2_t - 0.01)))
        else:
            s = (2.0 - r2_t) / 1.99  # sigmoid(-raw)
            bias.r2_raw.copy_(-torch.log(s / (1.0 - s)))


def loop_reference(kind: str, r1: list[float], r2: list[float], q_len: int, k_len: int):
    """The paper's kernels (Section 3), one element at a time, in double precision."""
    out = torch.zeros(len(r1), q_len, k_len, dtype=torch.float64)
    for h in range(len(r1)):
        for i in range(q_len):
            for j in range(k_len):
                d = abs(i + k_len - q_len - j)  # query i sits at i + k_len - q_len
                if kind == "log":
                    out[h, i, j] = -r1[h] * math.log(1.0 + r2[h] * d)
                else:
                    out[h, i, j] = -r1[h] * d ** r2[h]
    return out


# ---------------------------------------------------------------- the formula


@pytest.mark.parametrize("kind", ["log", "power"])
@pytest.mark.parametrize(("q_len", "k_len"), SHAPES)
def test_formula_element_by_element(kind, q_len, k_len):
    torch.manual_seed(0)
    bias = KerpleBias(3, kind=kind)
    r1 = bias.r1.tolist()
    r2 = bias.r2.tolist()
    out = bias(q_len, k_len)
    assert out.shape == (3, q_len, k_len)
    assert out.dtype == torch.float32
    expected = loop_reference(kind, r1, r2, q_len, k_len).float()
    torch.testing.assert_close(out, expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["log", "power"])
def test_chosen_values_written_out(kind):
    bias = KerpleBias(2, kind=kind)
    set_r(bias, [1.5, 0.25], [0.5, 2.0])
    out = bias(1, 4)[:, 0]  # one query at position 3: distances 3, 2, 1, 0
    if kind == "log":
        expected = [
            [-1.5 * math.log(2.5), -1.5 * math.log(2.0), -1.5 * math.log(1.5), 0.0],
            [-0.25 * math.log(7.0), -0.25 * math.log(5.0), -0.25 * math.log(3.0), 0.0],
        ]
    else:
        expected = [
            [-1.5 * math.sqrt(3), -1.5 * math.sqrt(2), -1.5, 0.0],
            [-0.25 * 9, -0.25 * 4, -0.25, 0.0],
        ]
    torch.testing.assert_close(out, torch.tensor(expected), rtol=1e-5, atol=1e-6)


def official_forward(kind: str, bias_p: torch.Tensor, bias_a: torch.Tensor, k_len: int):
    """A transcription of the official code's bias (ParallelKerpleLog / ParallelKerplePower).

    The official code builds ``tril(m - n)`` (0 above the diagonal) for the
    square training case and takes row ``k_len - 1`` for one cached query;
    its parameters are ``bias_p`` and ``bias_a`` of shape ``[h, 1, 1]``.
    """
    m = torch.arange(k_len).view(k_len, 1).repeat(1, k_len)
    diff = torch.tril(m + torch.arange(0, -k_len, -1)).to(torch.float64)
    if kind == "log":
        return -bias_p * torch.log(1 + bias_a * diff)  # -p * log(1 + a * |m - n|)
    return -(diff.pow(bias_p)) * bias_a  # -a * |m - n| ** p


@pytest.mark.parametrize("kind", ["log", "power"])
@pytest.mark.parametrize("k_len", [1, 5, 12])
def test_equals_official_code_on_causal_entries(kind, k_len):
    torch.manual_seed(1)
    bias = KerpleBias(4, kind=kind)
    r1 = bias.r1.detach().double()[:, None, None]
    r2 = bias.r2.detach().double()[:, None, None]
    # log: r1 is bias_p, r2 is bias_a; power: r1 is bias_a, r2 is bias_p.
    p, a = (r1, r2) if kind == "log" else (r2, r1)
    official = official_forward(kind, p, a, k_len).float()
    causal = torch.ones(k_len, k_len).tril().bool()
    out = bias(k_len)
    torch.testing.assert_close(out[:, causal], official[:, causal], rtol=2e-6, atol=1e-6)
    # The official cache case: one query, the last row.
    torch.testing.assert_close(bias(1, k_len), official[:, -1:, :], rtol=2e-6, atol=1e-6)


def test_power_one_is_symmetric_alibi():
    """With r2 = 1 the power kernel is a line; with ALiBi's slopes as r1 it is ALiBi's bias.

    Only the first six of eight heads: ALiBi's last two slopes, 2**-7 and
    2**-8, lie below KERPLE's floor of 0.01 (the official code's clamp).
    """
    slopes = alibi_slopes(8)[:6].double().tolist()
    bias = KerpleBias(6, kind="power")
    set_r(bias, slopes, [1.0] * 6)
    expected = alibi_bias(8, 5, 11, causal=False)[:6]
    torch.testing.assert_close(bias(5, 11), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["log", "power"])
def test_properties_of_the_bias(kind):
    torch.manual_seed(2)
    bias = KerpleBias(6, kind=kind)
    out = bias(10).detach()
    # zero at distance 0 (a positive zero), negative elsewhere, symmetric
    diagonal = out.diagonal(dim1=-2, dim2=-1)
    assert torch.equal(diagonal, torch.zeros_like(diagonal))
    assert not torch.signbit(diagonal).any()
    off = ~torch.eye(10, dtype=torch.bool)
    assert (out[:, off] < 0).all()
    torch.testing.assert_close(out, out.transpose(-1, -2), rtol=0, atol=0)
    # decreasing in the distance along each row's past
    row = out[:, -1, :]  # distances 9, 8, ..., 0
    assert (row[:, 1:] > row[:, :-1]).all()
    # a function of the distance: the same row for every alignment
    torch.testing.assert_close(bias(1, 10)[:, 0], row, rtol=1e-6, atol=0)
    torch.testing.assert_close(bias(3, 10)[:, -1], row, rtol=1e-6, atol=0)


# ---------------------------------------------------------------- parameterisation


@pytest.mark.parametrize("kind", ["log", "power"])
def test_initialisation_as_official_code(kind):
    torch.manual_seed(3)
    n = 20000
    bias = KerpleBias(n, kind=kind)
    r1, r2 = bias.r1.detach().double(), bias.r2.detach().double()
    # log: r1 ~ U(0, 2), r2 ~ U(0, 1); power: r1 ~ U(0, 1), r2 ~ U(0, 2); floor 0.01
    s1, s2 = (2.0, 1.0) if kind == "log" else (1.0, 2.0)
    for r, scale in ((r1, s1), (r2, s2)):
        assert r.min() >= FLOOR
        assert r.max() <= scale
        # Kolmogorov-Smirnov distance to U(0, scale) above the floor
        x = r.sort().values
        cdf = torch.arange(1, n + 1, dtype=torch.float64) / n
        assert (cdf - x / scale).abs().max() < 0.015
        # draws below the floor start just above it, as the official clamp puts them on it
        below = (x < FLOOR + 1e-5).double().mean()
        assert abs(below - 0.01 / scale) < 0.003


def test_initialisation_follows_the_global_seed():
    torch.manual_seed(4)
    a = KerpleBias(4)
    torch.manual_seed(4)
    b = KerpleBias(4)
    assert torch.equal(a.r1_raw, b.r1_raw)
    assert torch.equal(a.r2_raw, b.r2_raw)
    assert set(a.state_dict()) == {"r1_raw", "r2_raw"}


def assert_constraints(bias: KerpleBias) -> None:
    r1, r2 = bias.r1.detach(), bias.r2.detach()
    assert not r1.isnan().any() and not r2.isnan().any()
    assert (r1 >= FLOOR).all(), r1
    assert (r2 > 0).all() and (r2 >= 0.0099).all(), r2
    if bias.kind == "power":
        assert (r2 <= 2.0).all(), r2


@pytest.mark.parametrize("kind", ["log", "power"])
@pytest.mark.parametrize("optimiser", ["sgd", "adam"])
@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_no_optimiser_step_breaks_the_constraints(kind, optimiser, direction):
    """Minimise or maximise r1, r2 and the bias with huge steps: r1, r2 stay in range."""
    torch.manual_seed(5)
    bias = KerpleBias(4, kind=kind)
    if optimiser == "sgd":
        opt = torch.optim.SGD(bias.parameters(), lr=1e6)
    else:
        opt = torch.optim.Adam(bias.parameters(), lr=1e3)
    for _ in range(200):
        opt.zero_grad()
        loss = direction * (bias.r1.sum() + bias.r2.sum() + bias(6).sum())
        loss.backward()
        opt.step()
        assert_constraints(bias)
    out = bias(6).detach()
    assert torch.isfinite(out).all() and (out <= 0).all()


@pytest.mark.parametrize("kind", ["log", "power"])
def test_adversarial_gradients_and_extreme_raw_values(kind):
    """Gradients of any sign and size, then raw values at the float32 extremes and infinities."""
    gen = torch.Generator().manual_seed(6)
    bias = KerpleBias(16, kind=kind)
    opt = torch.optim.SGD(bias.parameters(), lr=1e8)
    for _ in range(100):
        for p in bias.parameters():
            sign = torch.randint(0, 2, p.shape, generator=gen) * 2.0 - 1.0
            p.grad = sign * 10.0 ** torch.randint(-3, 31, p.shape, generator=gen).float()
        opt.step()
        assert_constraints(bias)
    big = torch.finfo(torch.float32).max
    extremes = torch.tensor([-math.inf, -big, -1e4, -30.0, 0.0, 30.0, 1e4, big, math.inf])
    with torch.no_grad():
        bias.r1_raw.copy_(extremes.repeat(2)[:16])
        bias.r2_raw.copy_(extremes.flip(0).repeat(2)[:16])
    assert_constraints(bias)


@pytest.mark.parametrize("kind", ["log", "power"])
def test_gradients_are_finite_including_distance_zero(kind):
    torch.manual_seed(7)
    bias = KerpleBias(3, kind=kind)
    bias(5, 8).sum().backward()
    assert torch.isfinite(bias.r1_raw.grad).all()
    assert torch.isfinite(bias.r2_raw.grad).all()
    assert (bias.r1_raw.grad != 0).all() and (bias.r2_raw.grad != 0).all()


# ---------------------------------------------------------------- device, dtype, errors


@pytest.mark.parametrize("kind", ["log", "power"])
def test_dtype_and_device_follow_the_parameters(kind):
    torch.manual_seed(8)
    bias = KerpleBias(2, kind=kind).double()
    expected = loop_reference(kind, bias.r1.tolist(), bias.r2.tolist(), 3, 5)
    double = bias(3, 5)
    assert double.dtype == torch.float64
    torch.testing.assert_close(double, expected, rtol=1e-12, atol=1e-12)
    assert KerpleBias(2, kind=kind).to("meta")(3, 5).is_meta


def test_default_k_len_and_empty_outputs():
    bias = KerpleBias(2)
    torch.testing.assert_close(bias(4), bias(4, 4), rtol=0, atol=0)
    assert bias(0, 5).shape == (2, 0, 5)
    assert bias(0).shape == (2, 0, 0)


def test_repr():
    assert repr(KerpleBias(3, kind="power")) == "KerpleBias(n_heads=3, kind='power')"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_heads": 0}, ValueError, "n_heads must be a positive integer, got 0"),
        ({"n_heads": -2}, ValueError, "n_heads must be a positive integer, got -2"),
        ({"n_heads": 2.0}, TypeError, "n_heads must be an integer"),
        ({"n_heads": True}, TypeError, "n_heads must be an integer"),
        ({"n_heads": 2, "kind": "linear"}, ValueError, "kind must be one of 'log', 'power'"),
        ({"n_heads": 2, "kind": None}, ValueError, "kind must be one of 'log', 'power'"),
    ],
)
def test_bad_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        KerpleBias(**kwargs)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((5, 3), ValueError, "q_len must not exceed k_len"),
        ((-1, 3), ValueError, "q_len must be an integer >= 0, got -1"),
        ((2, -1), ValueError, "k_len must be an integer >= 0, got -1"),
        ((2.0, 3), TypeError, "q_len must be an integer"),
    ],
)
def test_bad_lengths(args, error, match):
    with pytest.raises(error, match=match):
        KerpleBias(2)(*args)
