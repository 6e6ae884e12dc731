"""Whether a run's measured steps were disturbed (a busy machine, a stalled file system), by a stated bound.

The intervals (measured.stats) hold their coverage for steady steps with up to ~20% noise, independent
or autocorrelated (docs/interval-coverage.md); a few steps slowed by a large factor break it, as the
mean then depends on whether a run happened to catch one. So a run is flagged, never dropped: its
summary, the tables, the report, the reproduction verdict and `compare` say so, with the steps that
stand out. Two ways to be flagged:

- its step times' coefficient of variation exceeds CV_BOUND (they vary throughout), or
- steps stand out (more than OUTLIER_MADS scaled median absolute deviations, 1.4826 x MAD: a standard
  deviation for normal steps, and more than OUTLIER_SHARE from the median step time) AND they decide
  the run's mean: with them the mean lies outside the 95% interval (the study's own, measured.stats)
  of the other steps. A single hiccup of 1.3-1.5x among steps that jitter by several percent (a CPU
  machine's, Python's collector) moves a 10-step mean by less than those steps' own interval allows,
  and the intervals keep their coverage (docs/interval-coverage.md): such a step is listed, not flagged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from rlvr_scaling.measured.stats import bootstrap_ci

CV_BOUND = 0.3
OUTLIER_MADS = 5.0
OUTLIER_SHARE = 0.2
MAD_TO_SD = 1.4826  # the MAD of normal values times this is their standard deviation
RULE = (
    f"coefficient of variation of the measured step times > {CV_BOUND:g}, or steps more than "
    f"{OUTLIER_MADS:g} scaled MADs and more than {OUTLIER_SHARE:.0%} from their median that move the mean "
    "outside the 95% interval of the other steps"
)


def assess(steps: Sequence[tuple[int, float]]) -> dict[str, Any] | None:
    """(step, seconds) of the measured steps -> the record the summary keeps; None for fewer than two
    steps (no spread to judge)."""
    if len(steps) < 2:
        return None
    times = [t for _, t in steps]
    centre, median = statistics.fmean(times), statistics.median(times)
    cv = statistics.stdev(times) / centre if centre > 0 else math.inf
    scaled_mad = MAD_TO_SD * statistics.median(abs(t - median) for t in times)
    reach = max(OUTLIER_MADS * scaled_mad, OUTLIER_SHARE * median)
    outliers = [
        {"step": step, "time_s": t, "from_median": (t - median) / median if median > 0 else math.inf}
        for step, t in steps
        if abs(t - median) > reach
    ]
    shift, allowed = _mean_shift(times, [o["time_s"] for o in outliers], centre)
    return {
        "disturbed": cv > CV_BOUND or (bool(outliers) and not abs(shift) <= allowed),
        "cv": cv,
        "median_s": median,
        "max_over_min": max(times) / min(times) if min(times) > 0 else math.inf,
        "outliers": outliers,
        "mean_shift": shift,
        "allowed_shift": allowed,
        "rule": RULE,
    }


def _mean_shift(times: list[float], outlying: list[float], centre: float) -> tuple[float, float]:
    """(how far the outlying steps move the mean, relative to the other steps' mean; how far that
    mean's 95% interval reaches on that side, relative). No outliers: (0, 0); other steps without an
    interval (too few, or not positive): (shift, 0), so any shift is beyond it."""
    if not outlying:
        return 0.0, 0.0
    rest = list(times)
    for t in outlying:
        rest.remove(t)
    rest_mean = statistics.fmean(rest) if rest else math.nan
    if not rest_mean > 0:
        return math.inf, 0.0
    shift = centre / rest_mean - 1
    low, high = bootstrap_ci([rest])
    if not (math.isfinite(low) and math.isfinite(high)):
        return shift, 0.0
    return shift, (high / rest_mean - 1) if shift > 0 else (1 - low / rest_mean)


def is_disturbed(record: dict[str, Any] | None) -> bool:
    return bool(record and record["disturbed"])


def describe(record: dict[str, Any]) -> str:
    """One line: why the run is flagged and which steps stand out."""
    text = f"step times vary with coefficient of variation {record['cv']:.2f} (bound {CV_BOUND:g}), "
    text += f"slowest {record['max_over_min']:.1f}x the fastest"
    if record["outliers"]:
        text += "; steps far from the median of {:.4g} s: ".format(record["median_s"]) + ", ".join(
            f"{o['step']} ({o['time_s']:.4g} s, {o['from_median']:+.0%})" for o in record["outliers"]
        )
        if "mean_shift" in record:  # records written before the shift was judged have none
            text += (
                f", moving the mean {record['mean_shift']:+.1%} (the other steps' 95% interval reaches "
                f"{record['allowed_shift']:.1%})"
            )
    else:
        text += "; no single step stands out"
    return text


def short(record: dict[str, Any] | None) -> str:
    """A table cell: empty for a steady run, else the coefficient of variation and the outlying steps."""
    if not is_disturbed(record):
        return ""
    assert record is not None
    steps = " ".join(str(o["step"]) for o in record["outliers"])
    return f"cv {record['cv']:.2f}" + (f"; steps {steps}" if steps else "")
