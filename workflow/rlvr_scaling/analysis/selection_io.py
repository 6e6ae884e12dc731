"""Reading the sweep's selection artifacts (results/selection/<dataset>.json)."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PlannedRun, build_plan, dataset_runs, known_runs


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


def sweep_run_ids(study: Study, dataset: str, root: Path) -> list[str]:
    return [r.run_id for r in known_runs(dataset_runs(study, dataset, None, root)) if "sweep" in r.series]


def read_selections(root: Path, study: Study) -> dict[str, int | None]:
    return {d: read_selection(root, d, set(sweep_run_ids(study, d, root))) for d in study.datasets}


def current_plan(study: Study, root: Path) -> list[PlannedRun]:
    """The plan with the selections the results hold now: what `plan`, `launch` and the rules act on."""
    return build_plan(study, read_selections(root, study), root)
