"""Tests of posenc.random_positions (Ruoss et al. 2023): distinct, sorted, uniform."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import posenc.randomized
from posenc import random_positions


@pytest.fixture(params=["permutation", "draws"])
def path(request, monkeypatch):
    """Run a test through each way of drawing, whatever the sizes; the other one fails if used."""

    def unused(*args):
        raise AssertionError("the other way of drawing was taken")

    if request.param == "permutation":
        monkeypatch.setattr(posenc.randomized, "_PERMUTATION_LIMIT", 1 << 62)
        monkeypatch.setattr(posenc.randomized, "_by_draws", unused)
    else:
        monkeypatch.setattr(posenc.randomized, "_PERMUTATION_LIMIT", 0)
        monkeypatch.setattr(posenc.randomized, "_PERMUTATION_FACTOR", 0)
        monkeypatch.setattr(posenc.randomized, "_by_permutation", unused)
    return request.param


@pytest.mark.parametrize(
    ("seq_len", "max_positions"), [(0, 1), (1, 1), (5, 5), (7, 50), (64, 4096), (3, 10**6)]
)
def test_distinct_sorted_in_range(path, seq_len, max_positions):
    gen = torch.Generator().manual_seed(seq_len + max_positions)
    for _ in range(20):
        pos = random_positions(seq_len, max_positions, generator=gen)
        assert pos.dtype == torch.int64
        assert pos.shape == (seq_len,)
        assert (pos[1:] > pos[:-1]).all()  # strictly increasing: sorted and distinct
        if seq_len:
            assert pos.min() >= 0 and pos.max() < max_positions


def test_full_range_is_every_position(path):
    assert torch.equal(random_positions(9, 9), torch.arange(9))


def test_huge_range_allocates_nothing_of_its_size(monkeypatch):
    """A range of 2**40 positions: drawn one by one (a permutation would need 8 TiB)."""

    def unused(*args):
        raise AssertionError("a permutation of 2**40 positions")

    monkeypatch.setattr(posenc.randomized, "_by_permutation", unused)
    pos = random_positions(1000, 2**40, generator=torch.Generator().manual_seed(0))
    assert pos.shape == (1000,) and (pos[1:] > pos[:-1]).all()
    assert pos.min() >= 0 and pos.max() < 2**40
    assert pos.max() > 2**39  # spread over the range, not packed at its start


def test_determinism_with_a_generator(path):
    a = random_positions(10, 1000, generator=torch.Generator().manual_seed(123))
    b = random_positions(10, 1000, generator=torch.Generator().manual_seed(123))
    c = random_positions(10, 1000, generator=torch.Generator().manual_seed(124))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    torch.manual_seed(5)  # without a generator: torch's global one
    d = random_positions(10, 1000)
    torch.manual_seed(5)
    assert torch.equal(d, random_positions(10, 1000))


def test_device_follows_the_generator():
    gen = torch.Generator().manual_seed(0)
    assert random_positions(3, 10, generator=gen).device.type == "cpu"
    assert random_positions(3, 10, device="cpu").device.type == "cpu"


# ---------------------------------------------------------------- uniformity


def chi_square(counts: torch.Tensor, expected: float) -> float:
    return ((counts.double() - expected) ** 2 / expected).sum().item()


def test_each_position_equally_likely(path):
    """Marginals: every position with probability k / N (chi-square, fixed seed).

    Contiguous blocks (a random start, then k consecutive positions) give the
    ends of the range a frequency of 1 / (N - k + 1) against k / (N - k + 1)
    in the middle, a chi-square in the thousands; the bound 90 is the 0.9995
    quantile of the chi-square distribution with 49 degrees of freedom.
    """
    n, k, trials = 50, 10, 4000
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(n, dtype=torch.int64)
    for _ in range(trials):
        counts[random_positions(k, n, generator=gen)] += 1
    assert chi_square(counts, trials * k / n) < 90

    contiguous = torch.zeros(n, dtype=torch.int64)  # the alternative the test must reject
    for _ in range(trials):
        start = torch.randint(n - k + 1, (1,), generator=gen).item()
        contiguous[start : start + k] += 1
    assert chi_square(contiguous, trials * k / n) > 1000


def test_every_subset_equally_likely(path):
    """Joint law: all C(8, 3) = 56 subsets of 3 out of 8 positions equally often (chi-square).

    The bound 100 is above the 0.9995 quantile (about 98) of the chi-square
    distribution with 55 degrees of freedom.
    """
    n, k, trials = 8, 3, 11200
    gen = torch.Generator().manual_seed(1)
    index = {s: m for m, s in enumerate(itertools.combinations(range(n), k))}
    counts = torch.zeros(len(index), dtype=torch.int64)
    for _ in range(trials):
        counts[index[tuple(random_positions(k, n, generator=gen).tolist())]] += 1
    assert chi_square(counts, trials / math.comb(n, k)) < 100


def test_smallest_position_has_the_exact_law(path):
    """P(min >= m) = C(N - m, k) / C(N, k) for a uniform k-subset of [0, N)."""
    n, k, trials = 40, 6, 4000
    gen = torch.Generator().manual_seed(2)
    smallest = torch.tensor(
        [random_positions(k, n, generator=gen)[0].item() for _ in range(trials)]
    )
    for m in (1, 3, 6, 10, 20):
        exact = math.comb(n - m, k) / math.comb(n, k)
        observed = (smallest >= m).double().mean().item()
        assert abs(observed - exact) < 4 * math.sqrt(exact * (1 - exact) / trials) + 1e-9, m


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (
            (11, 10),
            {},
            ValueError,
            "seq_len must not exceed max_positions .* got seq_len=11, max_positions=10",
        ),
        ((-1, 10), {}, ValueError, "seq_len must be an integer >= 0, got -1"),
        ((3, 0), {}, ValueError, "max_positions must be a positive integer, got 0"),
        ((0, -5), {}, ValueError, "max_positions must be a positive integer, got -5"),
        ((3.0, 10), {}, TypeError, "seq_len must be an integer"),
        ((3, 10.0), {}, TypeError, "max_positions must be an integer"),
        (
            (3, 10),
            {"generator": 0},
            TypeError,
            "generator must be a torch.Generator or None, got int",
        ),
    ],
)
def test_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        random_positions(*args, **kwargs)
