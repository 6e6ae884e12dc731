"""Statistics over measured steps: mean, sample std, and block-bootstrap confidence intervals.

Steps of one run are autocorrelated (the same engines, caches and data order), so the interval
resamples contiguous blocks of steps rather than single steps. With the study's 19 measured steps a
percentile interval over a few blocks under-covers (simulated: 88% for independent steps, 81% for
AR(1) steps with phi 0.3, for a nominal 95%); the interval therefore takes a Student t quantile times
the bootstrap standard error, with one degree of freedom fewer than the number of blocks (the
batch-means argument).

Every figure with an interval is positive (a mean step time or throughput, a ratio of them), so the
interval is made on the log scale and mapped back: log(estimate) +- t x the bootstrap standard error
of log(statistic). It never reaches zero, a ratio's interval for B/A is the reciprocal of A/B's, and
where the noise is small it is the linear interval to first order. benchmarks/interval_coverage.py
measures the coverage (docs/interval-coverage.md); tests/test_bootstrap_coverage.py checks the cases
it claims.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_METHOD = (
    "95% interval on the log scale: estimate x/ exp(t(blocks - 1) x moving-block bootstrap standard error of "
    "the log of the statistic) over measured steps (block length ceil(sqrt(n)), 2000 resamples, seed 0)"
)
# Why the log scale, for the report and docs/study.md (stated once, with the method).
BOOTSTRAP_WHY = (
    "step times, throughputs and their ratios are positive, so their intervals are made on the log scale: "
    "never below zero, and asymmetric where the noise is large, as the spread of a positive figure is"
)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def sample_std(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof=1); NaN for fewer than two values."""
    if len(values) < 2:
        return math.nan
    centre = mean(values)
    return math.sqrt(sum((v - centre) ** 2 for v in values) / (len(values) - 1))


def describe(values: Sequence[float]) -> dict[str, float | int]:
    return {"mean": mean(values), "std": sample_std(values), "n": len(values)}


def block_length(n: int) -> int:
    # Long enough for one block to span the steps' autocorrelation: 5 steps at n = 19, 4 at n = 10.
    return max(1, math.ceil(math.sqrt(n)))


def block_count(n: int) -> int:
    return -(-n // block_length(n))


@cache  # a few (p, df) pairs asked for thousands of times (every model's prediction band, point by point)
def t_quantile(p: float, df: int) -> float:
    """Student t quantile for 0.5 < p < 1: bisection on the CDF, the density integrated by Simpson's rule
    (no scipy in the workflow environment; exact to ~1e-9, checked against tabulated values in the tests)."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(t: float) -> float:
        x = np.linspace(0.0, t, 4001)
        density = np.exp(log_norm - (df + 1) / 2 * np.log1p(x * x / df))
        weights = np.ones_like(x)
        weights[1:-1:2], weights[2:-1:2] = 4, 2
        return 0.5 + float((weights * density).sum()) * (x[1] - x[0]) / 3

    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, 2 * high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if cdf(middle) < p else (low, middle)
    return (low + high) / 2


def block_indices(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, n) indices: each row is contiguous blocks of steps, drawn with replacement."""
    block = block_length(n)
    starts = rng.integers(0, n - block + 1, size=(resamples, block_count(n)))
    return (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(resamples, -1)[:, :n]


def row_means(*series: np.ndarray) -> np.ndarray:
    return series[0].mean(axis=1)


def row_mean_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    return numerator.mean(axis=1) / denominator.mean(axis=1)


def bootstrap_ci(
    samples: Sequence[Sequence[float]],
    statistic: Callable[..., np.ndarray] = row_means,
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Interval for a positive statistic(*series): log(statistic of the measured series) +- t x the
    block-bootstrap standard error of log(statistic), mapped back; each series resampled on its own.

    `statistic` maps (resamples, n) arrays to one value per row (row_means, row_mean_ratio). Series too
    short for two blocks, or holding a value that is not positive, have no interval (NaN).
    """
    if any(block_count(len(s)) < 2 for s in samples):
        return math.nan, math.nan
    arrays = [np.asarray(s, dtype=float) for s in samples]
    if not all(np.all(a > 0) and np.all(np.isfinite(a)) for a in arrays):
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    resampled = [a[block_indices(len(a), resamples, rng)] for a in arrays]
    estimate = float(statistic(*[a[None, :] for a in arrays])[0])
    degrees = min(block_count(len(a)) for a in arrays) - 1
    spread = float(np.log(statistic(*resampled)).std(ddof=1))
    # A series without spread keeps the point as both ends: what is left of the log's spread there is
    # the sum's round-off (~1e-16), not the steps'.
    spread = 0.0 if spread < 1e-12 else spread
    factor = math.exp(t_quantile((1 + level) / 2, degrees) * spread)
    return estimate / factor, estimate * factor
