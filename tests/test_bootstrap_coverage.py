"""Coverage of the step-statistics interval by simulation: how often a 95% interval holds the true mean.

Series are shaped like one run of the study (19 measured steps), with independent steps and with AR(1)
autocorrelated ones (what the moving-block bootstrap is for); the issue asks for roughly 93-97%.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from rlvr_scaling.analysis.stats import bootstrap_ci

TRUE_MEAN = 200.0  # seconds per step
SIGMA = 4.0  # innovation std
STEPS = 19  # steps 2..20
SERIES = 2000  # binomial std of a 95% coverage estimate: 0.5 points
COVERAGE = (0.93, 0.97)
CASES = {"independent steps": 0.0, "AR(1) phi=0.3": 0.3}
# Student t quantiles for 18 degrees of freedom (a reference interval that is exact for normal steps)
T18 = {0.95: 2.100922, 0.80: 1.330391}

Interval = Callable[[Sequence[Sequence[float]]], tuple[float, float]]


def ar1_series(phi: float, seed: int, count: int = SERIES, n: int = STEPS) -> np.ndarray:
    """(count, n) stationary AR(1) series around TRUE_MEAN; phi = 0 gives independent normal steps."""
    rng = np.random.default_rng(seed)
    x = np.empty((count, n))
    # start in the stationary distribution, so every step has the same mean and variance
    x[:, 0] = rng.normal(0.0, SIGMA / math.sqrt(1 - phi**2), count)
    for i in range(1, n):
        x[:, i] = phi * x[:, i - 1] + rng.normal(0.0, SIGMA, count)
    return TRUE_MEAN + x


def coverage(series: np.ndarray, interval: Interval) -> float:
    hits = 0
    for s in series:
        low, high = interval([s.tolist()])
        hits += low <= TRUE_MEAN <= high
    return hits / len(series)


def t_interval(level: float) -> Interval:
    def interval(samples: Sequence[Sequence[float]]) -> tuple[float, float]:
        values = np.asarray(samples[0])
        half = T18[level] * values.std(ddof=1) / math.sqrt(len(values))
        return values.mean() - half, values.mean() + half

    return interval


def within(value: float) -> bool:
    return COVERAGE[0] <= value <= COVERAGE[1]


@pytest.mark.parametrize("case", list(CASES))
def test_95_percent_interval_covers_the_true_mean(case: str) -> None:
    measured = coverage(ar1_series(CASES[case], seed=1), bootstrap_ci)
    assert within(measured), f"{case}: bootstrap_ci covers the true mean in {measured:.1%} of {SERIES} series"


def test_the_coverage_check_tells_a_right_level_from_a_wrong_one() -> None:
    """An exact 95% interval passes the check; the same interval at 80%, or the bootstrap interval
    asked for 80% while reported as 95%, does not."""
    independent = ar1_series(0.0, seed=2)
    exact = coverage(independent, t_interval(0.95))
    assert within(exact), exact
    assert not within(coverage(independent, t_interval(0.80)))
    assert not within(coverage(independent, lambda s: bootstrap_ci(s, level=0.80)))


def test_the_simulated_series_have_the_intended_autocorrelation() -> None:
    series = ar1_series(0.3, seed=3, count=4000)
    centred = series - TRUE_MEAN
    lag1 = (centred[:, 1:] * centred[:, :-1]).mean() / centred.var()
    assert lag1 == pytest.approx(0.3, abs=0.02)
    assert centred.mean() == pytest.approx(0.0, abs=0.05)
