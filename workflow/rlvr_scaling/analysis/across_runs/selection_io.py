"""Reading the sweep's artifacts: the selection (results/selection/<dataset>.json), a sequential
sweep's steps (results/sweep/<dataset>/<run_id>.json), and the points it skipped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.analysis.across_runs.selection import SelectionError, swept_points
from rlvr_scaling.analysis.across_runs.sweep_order import SEQUENTIAL, SweepStop
from rlvr_scaling.errors import StudyError
from rlvr_scaling.measured.models import RunSummary
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PlannedRun, Run, build_plan, dataset_runs, known_runs


def read_selection(root: Path, dataset: str, sweep_run_ids: set[str] | None = None) -> int | None:
    """The selected prompt count, if the artifact exists and was chosen from this plan's sweep (a
    selection made on another site or with other settings names other runs and is ignored)."""
    path = paths.selection_file(root, dataset)
    if not path.exists():
        return None
    if sweep_run_ids is not None:
        try:
            chosen = json.loads(path.read_text())["selected"]["run_id"]
        except (ValueError, KeyError, TypeError):
            chosen = None
        if chosen not in sweep_run_ids:
            return None
    return read_selection_file(path)


def read_selection_file(path: Path) -> int:
    try:
        return int(json.loads(path.read_text())["selected"]["prompts"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StudyError(f"{path} is not a selection artifact ({exc}); delete it to recompute the selection") from None


def read_sweep_step(path: Path) -> bool:
    """Whether the sequential sweep goes on after the point the step file is named for."""
    try:
        return bool(json.loads(path.read_text())["goes_on"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StudyError(f"{path} is not a sweep step ({exc}); delete it to decide the step again") from None


def sweep_runs(study: Study, dataset: str, root: Path) -> list[Run]:
    """Every planned sweep point, in increasing prompts."""
    return [r for r in known_runs(dataset_runs(study, dataset, None, root)) if "sweep" in r.series]


def sweep_run_ids(study: Study, dataset: str, root: Path) -> list[str]:
    return [r.run_id for r in sweep_runs(study, dataset, root)]


@dataclass(frozen=True)
class SkippedPoints:
    dataset: str
    runs: list[Run]  # the planned points past the stop, not run
    stop: SweepStop
    measured: list[Run]  # points past the stop measured all the same (before the stop moved): not used


def skipped_sweep_points(study: Study, root: Path) -> list[SkippedPoints]:
    """Per dataset whose sequential sweep has stopped: the points it will not run, and why. Read from
    the summaries of the points measured in order, by the rule the sweep steps apply."""
    rule = study.config.selection_rule
    if rule.sweep_order != SEQUENTIAL:
        return []
    found = []
    for dataset in study.datasets:
        if study.config.selection.get(dataset) is not None:
            continue
        runs = sweep_runs(study, dataset, root)
        measured = []
        for run in runs:
            path = paths.results_dir(root) / "summaries" / f"{run.run_id}.json"
            if not path.exists():
                break
            measured.append(RunSummary.from_json(json.loads(path.read_text())))
        if not measured:
            continue
        try:
            cap_gb = rule.memory_cap_fraction * measured[0].gpu_memory_gb
            _, stop = swept_points(measured, cap_gb, rule.tolerance, SEQUENTIAL)
        except SelectionError:  # a point that is no measurement: the sweep step says so, not the plan
            continue
        past = [r for r in runs if stop is not None and r.prompts > stop.after_prompts]
        if stop is not None and past:
            made = [r for r in past if paths.run_dir(root, r.run_id).exists()]
            found.append(SkippedPoints(dataset, [r for r in past if r not in made], stop, made))
    return found


def read_selections(root: Path, study: Study) -> dict[str, int | None]:
    return {d: read_selection(root, d, set(sweep_run_ids(study, d, root))) for d in study.datasets}


def current_plan(study: Study, root: Path) -> list[PlannedRun]:
    """The plan with the selections the results hold now, less the sweep points a sequential sweep
    skipped: what `plan`, `launch`, the budget and the rules act on."""
    plan = build_plan(study, read_selections(root, study), root)
    past = {run.run_id for points in skipped_sweep_points(study, root) for run in [*points.runs, *points.measured]}
    # Only a run that is nothing but a sweep point: one that is also a scaling run stays.
    return [run for run in plan if not (isinstance(run, Run) and run.run_id in past and run.series == ["sweep"])]
