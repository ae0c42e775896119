"""The statistics the experiment chapters quote: Student-t intervals over seeds.

:func:`t_interval` gives a mean over seeds with its 95 % interval;
:func:`paired_difference` the mean difference between two rows of the same
seeds, whose interval is narrower than the unpaired one when the seeds move
both rows together. :func:`t_quantile` is Student's t quantile, computed
here so that the lab needs nothing beyond torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = ["paired_difference", "t_interval", "t_quantile"]


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, ``0.5 <= p < 1``.

    Bisection on the distribution function, which is integrated from the
    density with Simpson's rule in float64.
    """
    if not 0.5 <= p < 1:
        raise ValueError(f"p must be in [0.5, 1), got {p}")
    if df < 1:
        raise ValueError(f"df must be a positive integer, got {df}")
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(x: float) -> float:
        n = 2000  # even
        t = torch.linspace(0, x, n + 1, dtype=torch.float64)
        f = torch.exp(log_c - (df + 1) / 2 * torch.log1p(t * t / df))
        w = torch.ones(n + 1, dtype=torch.float64)
        w[1:-1:2], w[2:-1:2] = 4, 2
        return 0.5 + (x / n / 3) * float((w * f).sum())

    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, 2 * high
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < p else (low, mid)
    return (low + high) / 2


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval ``mean -/+ t * sd / sqrt(n)`` of at least two values."""
    n = len(values)
    if n < 2:
        raise ValueError(f"values must hold at least 2 numbers, got {n}")
    x = torch.tensor(values, dtype=torch.float64)
    mean, sd = x.mean().item(), x.std().item()  # sd with n - 1
    half = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def paired_difference(a: Sequence[float], b: Sequence[float], level: float = 0.95):
    """Mean of ``a - b`` over paired seeds, with its t interval."""
    if len(a) != len(b):
        raise ValueError(f"a and b must pair up, got {len(a)} and {len(b)} values")
    return t_interval([x - y for x, y in zip(a, b, strict=True)], level)
