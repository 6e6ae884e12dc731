"""How often the interval of a run that the adaptive step count stopped holds the true mean step time.

Stopping the first time the interval looks narrow favours runs whose steps happen to look steady, so
a stopped run's interval is not a strict 95% interval. This simulates runs whose measured step times
are AR(1) around a known mean (as tests/test_bootstrap_coverage.py does for a fixed number of steps),
applies the rule after each step (measured.adaptive_steps.StopRule, the launcher's and the summary's),
and prints, per noise level: the share of runs stopped early, the mean number of measured steps, the
interval's coverage of the true mean for the runs as they ended, and for comparison the coverage with
every step. No verl, no files: a few minutes of numpy.

    .venv/bin/python benchmarks/adaptive_coverage.py [--runs 300] [--steps 20] [--min-steps 8] [--halfwidth 0.05]
"""

from __future__ import annotations

import argparse

import numpy as np
from rlvr_scaling.measured.adaptive_steps import StopRule
from rlvr_scaling.measured.stats import bootstrap_ci

# (relative sd of a step, AR(1) coefficient): steady GPU steps, noisier ones, and autocorrelated ones.
NOISE = ((0.02, 0.0), (0.05, 0.0), (0.05, 0.3), (0.10, 0.3))


def step_times(rng: np.random.Generator, steps: int, sd: float, phi: float) -> list[float]:
    noise = np.empty(steps)
    noise[0] = rng.normal(0, sd)  # stationary start: var = sd^2
    for i in range(1, steps):
        noise[i] = phi * noise[i - 1] + rng.normal(0, sd * np.sqrt(1 - phi * phi))
    return list(1.0 + noise)


def covers(times: list[float]) -> bool:
    low, high = bootstrap_ci([times])
    return bool(low <= 1.0 <= high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=20, help="configured steps, the first one warm-up (the study: 20)")
    parser.add_argument("--min-steps", type=int, default=8)
    parser.add_argument("--halfwidth", type=float, default=0.05)
    args = parser.parse_args()
    rule = StopRule(args.min_steps, args.halfwidth, warmup_steps=1, configured_steps=args.steps)
    rng = np.random.default_rng(1)
    print(f"rule: {rule.describe()}; {args.steps} steps, 1 warm-up; {args.runs} runs per row")
    print("step sd  AR(1)  stopped early  measured steps  coverage as ended  coverage, every step")
    for sd, phi in NOISE:
        stopped, used, covered, covered_full = 0, 0, 0, 0
        for _ in range(args.runs):
            measured = step_times(rng, args.steps - 1, sd, phi)
            records = [{"step": 1, "timing_s/step": 2.0}]  # the warm-up: slower, never measured
            records += [{"step": i + 2, "timing_s/step": t} for i, t in enumerate(measured)]
            found = rule.first_stop(records)
            kept = measured[: found[0] - 1] if found else measured
            stopped += found is not None
            used += len(kept)
            covered += covers(kept)
            covered_full += covers(measured)
        n = args.runs
        print(
            f"{sd:>7.0%}  {phi:>5.1f}  {stopped / n:>13.0%}  {used / n:>14.1f}  {covered / n:>17.1%}  "
            f"{covered_full / n:>20.1%}"
        )


if __name__ == "__main__":
    main()
