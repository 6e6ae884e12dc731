"""The optional adaptive step count: a run stops once the 95% interval of its mean step time is within a
set share of the mean, after a set number of measured steps (config `adaptive_steps`).

The interval is the summaries' own (measured.stats.bootstrap_ci, seeded), so the stop is reproducible:
the launcher applies the rule as the steps are logged (execution.step_clock), and the summary applies
it again to the steps the run kept, so a run that stopped early proves its own stop. What the report
says of the stops is analysis.cost.adaptive_report's (report wording does not redo the summaries)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlvr_scaling.measured.metrics_file import is_number, is_positive_finite
from rlvr_scaling.measured.models import Check
from rlvr_scaling.measured.stats import bootstrap_ci, mean


@dataclass(frozen=True)
class StopRule:
    min_measured_steps: int
    relative_halfwidth: float
    warmup_steps: int
    configured_steps: int

    @classmethod
    def of_run(cls, run: dict[str, Any]) -> StopRule | None:
        """The rule of a run as its spec records it (plan.Run), None when it takes all its steps."""
        adaptive = run.get("adaptive_steps")
        if not adaptive:
            return None
        return cls(adaptive["min_measured_steps"], adaptive["relative_halfwidth"], run["warmup_steps"], run["steps"])

    def thresholds(self) -> dict[str, Any]:
        """The setting's part (sections.AdaptiveSteps.rule()): what job.json's stop record names."""
        return {"min_measured_steps": self.min_measured_steps, "relative_halfwidth": self.relative_halfwidth}

    def describe(self) -> str:
        return describe_rule(self.thresholds())

    def halfwidth(self, step_times: list[float]) -> float:
        """The interval's half-width as a share of the mean (NaN while it has none)."""
        low, high = bootstrap_ci([step_times])
        centre = mean(step_times)
        return (high - low) / 2 / centre if centre > 0 else math.nan

    def stops_after(self, step: int, measured_times: list[float]) -> float | None:
        """The relative half-width when the run stops after `step`, whose measured steps so far took
        `measured_times`; None when it goes on. The last configured step ends the run anyway."""
        if step >= self.configured_steps or len(measured_times) < self.min_measured_steps:
            return None
        width = self.halfwidth(measured_times)
        return width if width <= self.relative_halfwidth else None

    def first_stop(self, steps: list[dict[str, Any]]) -> tuple[int, float] | None:
        """Over logged steps 1, 2, ...: the first after which the rule stops, and its half-width. A
        step without a usable time ends the look (the measurement check names it)."""
        measured: list[float] = []
        for expected, record in enumerate(steps, 1):
            if record["step"] != expected or not is_positive_finite(record.get("timing_s/step")):
                return None
            if record["step"] > self.warmup_steps:
                measured.append(float(record["timing_s/step"]))
            width = self.stops_after(record["step"], measured)
            if width is not None:
                return record["step"], width
        return None


def describe_rule(thresholds: dict[str, Any]) -> str:
    return (
        f"stop once the 95% interval of the mean step time is within +-{thresholds['relative_halfwidth']:.1%} "
        f"of it, after at least {thresholds['min_measured_steps']} measured steps"
    )


def stop_record(rule: StopRule, step: int, measured_times: list[float], width: float) -> dict[str, Any]:
    """What job.json keeps of a stop (`adaptive_stop`)."""
    return {
        "step": step,
        "configured_steps": rule.configured_steps,
        "measured_steps": len(measured_times),
        "mean_step_s": mean(measured_times),
        "relative_halfwidth": width,
        "rule": rule.thresholds(),
    }


def _stop_step(job: dict[str, Any]) -> int | None:
    """The step job.json says the run stopped after (None: it did not stop, or the record is broken,
    which stop_check names)."""
    stop = job.get("adaptive_stop")
    step = stop.get("step") if isinstance(stop, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) and step > 0 else None


def expected_steps(run: dict[str, Any], job: dict[str, Any]) -> int:
    """The steps a run had to log: all it was configured for, or those up to its stop."""
    return _stop_step(job) or run["steps"]


def stop_check(run: dict[str, Any], job: dict[str, Any], steps: list[dict[str, Any]]) -> Check | None:
    """The rule applied again to the steps the run kept: a run stopped where its rule stops it, with the
    figures its record gives, and one that ran on had no step where it would have. None for a run
    without the rule."""
    rule, stop = StopRule.of_run(run), job.get("adaptive_stop")
    if rule is None and stop is None:
        return None
    if rule is None:
        return Check(
            "adaptive_steps", False, f"job.json records a stop ({stop!r}) but the run has no adaptive_steps rule"
        )
    found = rule.first_stop(steps)
    if stop is None:
        if found is None:
            detail = f"ran all {rule.configured_steps} steps: the rule ({rule.describe()}) did not hold before the last"
            return Check("adaptive_steps", True, detail)
        # verl ended on its own as the rule held, or the launcher missed its moment: more steps, still
        # a measurement.
        return Check(
            "adaptive_steps", True, f"the rule held after step {found[0]} ({found[1]:.1%}) but the run went on"
        )
    step = _stop_step(job)
    if step is None:
        return Check("adaptive_steps", False, f"job.json's adaptive_stop names no step: {stop!r}")
    if found is None or found[0] != step:
        where = "never holds" if found is None else f"holds first after step {found[0]}"
        return Check("adaptive_steps", False, f"stopped after step {step}, but over the steps kept the rule {where}")
    measured = [float(s["timing_s/step"]) for s in steps[rule.warmup_steps : step]]
    expected = stop_record(rule, step, measured, found[1])
    recorded = {key: stop.get(key) for key in expected}
    if not _same(recorded, expected):
        return Check("adaptive_steps", False, f"job.json's adaptive_stop {recorded} differs from the rule's {expected}")
    return Check(
        "adaptive_steps",
        True,
        f"stopped after step {step} of {rule.configured_steps}: the interval was +-{found[1]:.1%} of the "
        f"mean after {step - rule.warmup_steps} measured steps ({rule.describe()})",
    )


def _same(recorded: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Equal, the figures computed from the steps to float precision (the record was written by JSON)."""
    for key, value in expected.items():
        if isinstance(value, float):
            if not (is_number(recorded[key]) and math.isclose(recorded[key], value, rel_tol=1e-9)):
                return False
        elif recorded[key] != value:
            return False
    return True
