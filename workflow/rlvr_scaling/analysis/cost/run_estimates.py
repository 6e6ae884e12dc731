"""Each run's estimate from what is known when it is asked for: its time limit, the hang guard's
bounds and its node-hours for the runs not yet submitted.

The step time, in order of what is known:
1. the plan's: the site's seconds_per_trajectory with ideal scaling, times the published shape where
   the study's reference covers the run (study.step_estimate);
2. once sweep points are measured on the site: the line in trajectories per engine they calibrate
   (analysis.cost.calibration), times the same published shape;
3. once a run of the same dataset and series is measured (the nearest in log2 of nodes): that, times
   what the run measured over what 1 or 2 predicted for it.
The start-up: the site's estimate until runs have measured theirs (the calibration's start-up, per
doubling of nodes where two node counts measured it).

Its node-hours are the best guess from what is measured. Its time limit and the hang guard's first
wait never fall below the plan's (`bound_step_seconds`, `bound_startup_minutes`): measurements only
lengthen them, as a bound too short stops a healthy run.

Snakemake computes a job's time limit once it is ready to run: the sweep's points one after the
other, every scaling run together once the selection is made. The launch command prices its run
again as it starts, so the hang guard's bounds follow every run measured before it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.analysis.cost.calibration import Calibration, calibrate
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.measured.models import RunSummary
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PlannedRun, Run, estimate_for, known_runs, startup_minutes
from rlvr_scaling.study.step_estimate import PublishedShape, published_shapes


def _measured(root: Path, runs: list[Run]) -> dict[str, RunSummary]:
    found = {}
    for run in runs:
        path = paths.results_dir(root) / "summaries" / f"{run.run_id}.json"
        if not path.exists():
            continue
        try:
            summary = RunSummary.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):  # a summary being written: not measured yet
            continue
        if summary.valid and summary.measured is not None:
            found[run.run_id] = summary
    return found


@dataclass(frozen=True)
class RunEstimates:
    study: Study
    runs: dict[str, Run]
    calibration: Calibration
    shapes: dict[str, PublishedShape]
    measured: dict[str, RunSummary]

    @classmethod
    def of(cls, study: Study, plan: list[PlannedRun], root: Path) -> RunEstimates:
        runs = known_runs(plan)
        return cls(
            study,
            {run.run_id: run for run in runs},
            calibrate(study, plan, root),
            published_shapes(study),
            _measured(root, runs),
        )

    def _before_runs(self, run: Run) -> tuple[float, str]:
        """The step from the plan, or from the measured sweep's line times the published shape."""
        line = self.calibration.step_lines.get(run.dataset)
        if line is None:
            return float(run.estimate["step_seconds"]), str(run.estimate.get("step_source", "site estimate"))
        fixed, per_trajectory = line
        step = max(0.0, fixed + per_trajectory * run.trajectories_per_engine)
        points = self.calibration.points[run.dataset]
        source = (
            f"the line of {points} sweep point(s) measured: {step:.4g} s at {run.trajectories_per_engine:g} per engine"
        )
        shape = self.shapes.get(run.dataset)
        published = shape.shape(run.series, run.nodes) if shape is not None else None
        if published is not None:
            step *= published.factor
            source += f"; {published.factor:.3g} x, {published.source}"
        return step, source

    def _nearest_measured(self, run: Run) -> Run | None:
        """The measured run of the same dataset and a series of this one's nearest in nodes."""
        others = [
            other
            for run_id, other in self.runs.items()
            if run_id in self.measured and run_id != run.run_id and other.dataset == run.dataset
            if set(other.series) & set(run.series) - {"sweep"}
        ]
        if not others:
            return None
        return min(others, key=lambda o: (abs(math.log2(o.nodes) - math.log2(run.nodes)), -o.nodes, o.run_id))

    def step(self, run: Run) -> tuple[float, str]:
        """The run's predicted step time and where it comes from."""
        step, source = self._before_runs(run)
        anchor = self._nearest_measured(run)
        if anchor is None:
            return step, source
        predicted, _ = self._before_runs(anchor)
        summary = self.measured[anchor.run_id]
        assert summary.measured is not None  # _measured keeps only runs that measured steps
        measured = summary.measured.step_time_s.mean
        if predicted <= 0 or not math.isfinite(measured):
            return step, source
        ratio = measured / predicted
        return (
            step * ratio,
            f"{source}; x {ratio:.3g}, as {anchor.run_id} measured {measured:.4g} s for {predicted:.4g} s",
        )

    def startup_minutes(self, run: Run) -> tuple[float, str]:
        """The start-up measured (a line in log2 of nodes where two node counts measured it), never under
        the site's estimate beyond the largest node count measured: the hang guard's first wait rests on
        it, and a start-up extrapolated from smaller runs could stop a healthy larger one."""
        calibration = self.calibration
        estimated = startup_minutes(self.study, run.nodes)
        if calibration.startup_s is None:
            return estimated, "the site's estimate"
        growth = calibration.startup_per_doubling_s
        measured_growth = growth is not None
        if growth is None:
            growth = 60 * self.study.config.estimate.startup_minutes_per_doubling
        minutes = max(0.0, calibration.startup_s + growth * math.log2(run.nodes)) / 60
        source = "measured" + ("" if measured_growth else ", its growth per doubling estimated")
        largest = max((self.runs[r].nodes for r in self.measured if r in self.runs), default=1)
        if run.nodes > largest and minutes < estimated:
            return estimated, f"the site's estimate (measured up to {largest} node(s): {minutes:.3g} min)"
        return minutes, source

    def estimate(self, run: Run) -> dict[str, Any]:
        """The run's estimate as the plan writes it (study.plan.estimate_for), from what is known now."""
        if run.run_id in self.measured or (self.calibration.step_lines.get(run.dataset) is None and not self._any(run)):
            return run.estimate
        step, source = self.step(run)
        startup, startup_source = self.startup_minutes(run)
        try:
            return estimate_for(self.study, run.dataset, run.nodes, step, source, startup, startup_source)
        except ConfigError as error:
            raise StudyError(f"run {run.run_id} is refused before it is submitted: {error.expected}") from error

    def _any(self, run: Run) -> bool:
        """Something measured that the plan's estimate does not know: a start-up or a run to scale by."""
        return self.calibration.startup_s is not None or self._nearest_measured(run) is not None

    def run(self, run: Run) -> Run:
        """The run with its estimate, time limit and node-hours from what is known now (from the
        plan's own run of that id: a run priced already is not priced twice)."""
        run = self.runs.get(run.run_id, run)
        estimate = self.estimate(run)
        if estimate is run.estimate:
            return run
        # The node-hours are the best guess, either way; the bounds only ever grow from the plan's:
        # a time limit or a first wait too short stops a healthy run, one too long costs only a later
        # start in the queue or a longer wait on a real hang (a sweep's line extrapolated far beyond its
        # points, or through a slow one, can fall well under a run's real step).
        plan = run.estimate
        guarded = {
            "time_limit_minutes": max(int(estimate["time_limit_minutes"]), int(plan["time_limit_minutes"])),
            "bound_step_seconds": max(estimate["step_seconds"], plan["step_seconds"]),
            "bound_startup_minutes": max(estimate["startup_minutes"], plan["startup_minutes"]),
        }
        return dataclasses.replace(
            run,
            estimate={**estimate, **guarded},
            resources={**run.resources, "runtime": guarded["time_limit_minutes"]},
            node_hours=run.nodes * estimate["runtime_minutes"] / 60,
        )


def priced_plan(study: Study, plan: list[PlannedRun], root: Path) -> list[PlannedRun]:
    """The plan with every known run priced from what is measured under `root`."""
    estimates = RunEstimates.of(study, plan, root)
    return [estimates.run(run) if isinstance(run, Run) else run for run in plan]
