"""The cost of the runs not yet made, calibrated by what was measured: per dataset, step time as a
line in the trajectories per engine, fitted to the one-node sweep points measured, plus the start-up
the runs measured (analysis.per_run.overhead). Until sweep points are measured, the site's estimate stands."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlvr_scaling import paths
from rlvr_scaling.measured.models import RunSummary
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PlannedRun, Run, known_runs
from rlvr_scaling.study.sections import Estimate


@dataclass(frozen=True)
class Calibration:
    step_lines: dict[str, tuple[float, float]]  # dataset: (seconds, seconds per trajectory per engine)
    points: dict[str, int]  # dataset: sweep points fitted
    startup_s: float | None  # the runs' measured start-up on one node (the line's value at N = 1)
    # Seconds more per doubling of nodes, measured where runs of two node counts or more recorded
    # their start-up; None: the estimate's startup_minutes_per_doubling.
    startup_per_doubling_s: float | None = None
    teardown_s: float = 0.0  # the runs' measured median tear-down (not in the site's estimate)

    def outside_steps_s(self, estimate: Estimate | None, nodes: int) -> float | None:
        """Seconds a run on `nodes` spends outside its steps: the start-up, measured where runs
        recorded it (else the site's `estimate`; None without either), growing per doubling of nodes
        (measured, else the estimate's), and the measured tear-down."""
        if self.startup_s is not None:
            startup = self.startup_s
        elif estimate is not None:
            startup = 60 * estimate.startup_minutes
        else:
            return None
        growth = self.startup_per_doubling_s
        if growth is None:
            growth = 60 * estimate.startup_minutes_per_doubling if estimate is not None else 0.0
        return startup + growth * math.log2(nodes) + self.teardown_s

    def predict(
        self, dataset: str, nodes: int, steps: int, per_engine: float, estimate: Estimate | None
    ) -> float | None:
        """Node-hours of a run of `steps` steps with `per_engine` trajectories per generation engine;
        None for a dataset with no sweep point measured (or nothing to price the start-up with)."""
        outside = self.outside_steps_s(estimate, nodes)
        if dataset not in self.step_lines or outside is None:
            return None
        fixed, per_trajectory = self.step_lines[dataset]
        step_s = max(0.0, fixed + per_trajectory * per_engine)
        return nodes * (outside + steps * step_s) / 3600

    def node_hours(self, study: Study, run: Run) -> float | None:
        """The run's node-hours by the measured line and start-up; None for a dataset not measured."""
        return self.predict(run.dataset, run.nodes, run.steps, run.trajectories_per_engine, study.config.estimate)


def _summaries(root: Path, runs: list[Run]) -> list[RunSummary]:
    found = []
    for run in runs:
        path = paths.results_dir(root) / "summaries" / f"{run.run_id}.json"
        if path.exists():
            summary = RunSummary.from_json(json.loads(path.read_text()))
            if summary.valid:
                found.append(summary)
    return found


def step_line(points: list[RunSummary]) -> tuple[float, float]:
    """Least squares of step time on trajectories per engine; one point: through the origin."""
    x = [s.trajectories_per_engine for s in points]
    y = [s.figures.step_time_s.mean for s in points]
    if len(set(x)) < 2:
        return 0.0, y[0] / x[0]
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def calibration_from(sweeps: dict[str, list[RunSummary]], measured: list[RunSummary]) -> Calibration:
    """From each dataset's valid sweep points (its step line) and the valid runs that recorded their
    time outside the steps (start-up, tear-down)."""
    lines = {dataset: step_line(points) for dataset, points in sweeps.items() if points}
    counts = {dataset: len(points) for dataset, points in sweeps.items() if points}
    recorded = [(s.nodes, s.overhead) for s in measured if s.overhead]
    teardown = statistics.median(overhead["teardown_s"] for _, overhead in recorded) if recorded else 0.0
    startups = [(nodes, overhead["startup_s"]) for nodes, overhead in recorded]
    if len({nodes for nodes, _ in startups}) >= 2:
        per_doubling, at_one = np.polyfit([math.log2(n) for n, _ in startups], [s for _, s in startups], 1)
        return Calibration(lines, counts, float(at_one), float(per_doubling), teardown)
    return Calibration(lines, counts, statistics.median(s for _, s in startups) if startups else None, None, teardown)


def calibrate(study: Study, plan: list[PlannedRun], root: Path) -> Calibration:
    runs = known_runs(plan)
    sweeps = {
        dataset: _summaries(root, [r for r in runs if r.dataset == dataset and "sweep" in r.series])
        for dataset in study.datasets
    }
    return calibration_from(sweeps, _summaries(root, runs))
