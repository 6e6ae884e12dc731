"""The study's node-hour budget (`budget.node_hours`): what the runs done have cost, measured from
their job records, plus the estimate of every planned run not yet done. Over the budget, the
workflow submits nothing more and says which runs and what they cost."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PlannedRun, Run, known_runs

SHOWN_RUNS = 8


@dataclass(frozen=True)
class Cost:
    budget: float | None
    # Node-hours of the runs done and of the failed attempts, as measured: the launcher's start to the
    # run's end, times its nodes (the allocation began a little earlier: Slurm bills a few seconds more).
    spent: float
    to_run: list[tuple[Run, float]]  # planned and not done, with their cost, the largest first
    basis: str  # what the planned costs come from

    @property
    def planned(self) -> float:
        return sum(cost for _, cost in self.to_run)

    @property
    def total(self) -> float:
        return self.spent + self.planned

    @property
    def over(self) -> bool:
        return self.budget is not None and self.total > self.budget


def measured_node_hours(run_dir: Path) -> float | None:
    """A finished run's cost from its job record: its nodes for the time from start to end."""
    try:
        job = json.loads((run_dir / "job.json").read_text())
        seconds = (dt.datetime.fromisoformat(job["end"]) - dt.datetime.fromisoformat(job["start"])).total_seconds()
        return job["nodes"] * seconds / 3600
    except (OSError, ValueError, KeyError, TypeError):
        return None


def of_study(run_dir: Path, study_name: str | None) -> bool:
    """Whether a run folder is one of the named study's (its spec.json's study.name); every folder
    when no name is given, and one whose spec cannot be read (paid for, whoever's it was). Another
    study in the same results/ (the demo's, before one's own) is not this study's spending (#61)."""
    if study_name is None:
        return True
    try:
        spec = json.loads((run_dir / "spec.json").read_text())
        return spec["study"]["study"]["name"] == study_name
    except (OSError, ValueError, KeyError, TypeError):
        return True


def failed_attempts_cost(root: Path, study_name: str | None = None) -> float:
    """What the attempts filed under results/failed/<run>/<stamp>/ cost: paid for, if no result."""
    attempts = (paths.results_dir(root) / "failed").glob("*/*/job.json")
    return sum(measured_node_hours(job.parent) or 0.0 for job in attempts if of_study(job.parent, study_name))


def cost_function(study: Study, plan: list[PlannedRun], root: Path) -> tuple[Callable[[Run], float], str]:
    """A run's node-hours: measured for a run done; else priced from what the runs done measured
    (analysis.cost.run_estimates: the sweep's line, the start-up, the nearest run of its series measured,
    with the measured tear-down) where anything is, else the plan's estimate; and a phrase saying
    which, for the runs not done."""
    from rlvr_scaling.analysis.cost.run_estimates import RunEstimates

    estimates = RunEstimates.of(study, plan, root)
    calibration = estimates.calibration

    def cost_of(run: Run) -> float:
        measured = measured_node_hours(paths.run_dir(root, run.run_id))
        if measured is not None:
            return measured
        priced = estimates.run(run)
        if priced is run:
            return run.node_hours
        return priced.nodes * (priced.estimate["runtime_minutes"] * 60 + calibration.teardown_s) / 3600

    if not calibration.points:
        return cost_of, " (the site's estimate: no sweep point measured yet)"
    points = ", ".join(f"{d} {n}" for d, n in calibration.points.items())
    startup = "measured" if calibration.startup_s is not None else "estimated"
    return cost_of, f" (calibrated by the sweep points measured: {points}; start-up {startup})"


def runs_cost(root: Path, study_name: str | None = None) -> float:
    """Every run directory's measured cost: the plan's runs done, and those it no longer names (a sweep
    point measured past where a sequential sweep stops, a run of an earlier plan): paid for all the same.
    With a study name, that study's only."""
    run_dirs = (paths.results_dir(root) / "runs").glob("*/")
    return sum(measured_node_hours(run_dir) or 0.0 for run_dir in run_dirs if of_study(run_dir, study_name))


def study_cost(study: Study, plan: list[PlannedRun], root: Path) -> Cost:
    cost_of, basis = cost_function(study, plan, root)
    spent = failed_attempts_cost(root, study.name) + runs_cost(root, study.name)
    to_run = [
        (run, cost_of(run)) for run in known_runs(plan) if measured_node_hours(paths.run_dir(root, run.run_id)) is None
    ]
    to_run.sort(key=lambda item: (-item[1], item[0].run_id))
    return Cost(study.config.budget.node_hours, spent, to_run, basis)


def budget_line(cost: Cost) -> str:
    if cost.budget is None:
        return "Budget: none set (budget.node_hours)."
    state = "OVER the budget: nothing more is submitted" if cost.over else "within the budget"
    return (
        f"Budget: {cost.budget:g} node-hours; spent {cost.spent:.1f} (measured), planned {cost.planned:.1f} "
        f"({len(cost.to_run)} runs{cost.basis}): {cost.total:.1f}, {state}."
    )


def check_budget(study: Study, plan: list[PlannedRun], root: Path) -> None:
    """Raises, naming the costliest runs not yet done, when the study would go over its budget."""
    # Every Snakemake start asks: without a budget, pricing (which reads every summary) is not done.
    if study.config.budget.node_hours is None:
        return
    cost = study_cost(study, plan, root)
    # With every run done nothing is submitted, whatever they cost: a finished study stays usable.
    if not cost.over or not cost.to_run:
        return
    shown = "; ".join(
        f"{run.run_id} ({run.nodes} node{'' if run.nodes == 1 else 's'}) {hours:.2f}"
        for run, hours in cost.to_run[:SHOWN_RUNS]
    )
    more = f"; and {len(cost.to_run) - SHOWN_RUNS} more" if len(cost.to_run) > SHOWN_RUNS else ""
    raise StudyError(
        f"budget.node_hours is {cost.budget:g}, but the study needs {cost.total:.2f} node-hours: "
        f"{cost.spent:.2f} spent by the runs done and {cost.planned:.2f} planned for the {len(cost.to_run)} runs "
        f"not done{cost.basis}: {shown}{more}. Nothing more is submitted: raise the budget, or plan fewer or "
        "shorter runs (`rlvr-scaling plan` shows each run's cost)"
    )
