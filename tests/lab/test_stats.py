"""Tests of posenc_lab.stats: the intervals and paired differences the
experiment chapters quote."""

from __future__ import annotations

import math

import pytest

from posenc_lab.stats import paired_difference, t_interval, t_quantile


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [  # printed tables of Student's t (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2)
        (0.975, 1, 12.706),
        (0.975, 4, 2.776),
        (0.975, 9, 2.262),
        (0.975, 30, 2.042),
        (0.95, 4, 2.132),
        (0.995, 4, 4.604),
    ],
)
def test_t_quantile_matches_the_printed_tables(p, df, expected):
    assert round(t_quantile(p, df), 3) == expected


def test_t_quantile_median_and_large_df():
    assert t_quantile(0.5, 3) == pytest.approx(0.0, abs=1e-9)
    assert t_quantile(0.975, 2000) == pytest.approx(1.95996, abs=2e-3)  # the normal's 1.96


def test_t_interval_by_hand():
    mean, low, high = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.7764451 * math.sqrt(2.5) / math.sqrt(5)  # t_{0.975, 4} s / sqrt(n)
    assert mean == 3.0
    assert (low, high) == pytest.approx((3 - half, 3 + half), abs=1e-6)
    assert t_interval([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)


def test_paired_difference_uses_the_pairs():
    a, b = [1.0, 2.0, 3.0, 4.0], [0.5, 1.5, 2.5, 3.5]
    assert paired_difference(a, b) == pytest.approx((0.5, 0.5, 0.5))
    # unpaired, the spread of a and b would swamp the difference
    assert t_interval(a)[1] < t_interval(b)[2]


def test_statistics_name_their_errors():
    with pytest.raises(ValueError, match="at least 2"):
        t_interval([1.0])
    with pytest.raises(ValueError, match="pair up"):
        paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match=r"p must be in \[0.5, 1\)"):
        t_quantile(0.2, 3)
    with pytest.raises(ValueError, match="df must be"):
        t_quantile(0.9, 0)
