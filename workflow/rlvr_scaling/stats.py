"""Statistics over measured steps: mean, sample std, and block-bootstrap confidence intervals.

Steps of one run are autocorrelated (the same engines, caches and data order), so the interval
resamples contiguous blocks of steps rather than single steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_METHOD = (
    "95% moving-block bootstrap over measured steps (block length round(n^(1/3)), 2000 resamples, seed 0)"
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


def block_indices(n: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, n) indices: each row is contiguous blocks of steps, drawn with replacement."""
    block = max(1, round(n ** (1 / 3)))
    blocks = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(resamples, blocks))
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
    """Percentile interval of statistic(*resampled series), each series resampled on its own.

    `statistic` maps (resamples, n) arrays to one value per row (row_means, row_mean_ratio).
    """
    if any(len(s) < 2 for s in samples):
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    resampled = [np.asarray(s, dtype=float)[block_indices(len(s), resamples, rng)] for s in samples]
    values = statistic(*resampled)
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)
