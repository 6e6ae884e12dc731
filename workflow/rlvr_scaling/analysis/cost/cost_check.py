"""Every run's cost predicted against measured: the node-hours the site's estimate gave it when it was
planned, what the calibration gives it from the other runs (its dataset's other valid sweep points for
the step time, the other runs' start-up and tear-down: analysis.cost.calibration), and what it measured
(its launcher's start to its end, times its nodes). No run predicts itself."""

from __future__ import annotations

import math
from typing import Any

from rlvr_scaling.analysis.cost.calibration import calibration_from
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.measured.models import RunSummary


def _error(predicted: float | None, measured: float) -> float:
    return math.nan if predicted is None or measured <= 0 else (predicted - measured) / measured


def calibrated_without(run: RunSummary, valid: list[RunSummary]) -> float | None:
    others = [s for s in valid if s.run_id != run.run_id]
    sweep = [s for s in others if s.dataset == run.dataset and "sweep" in s.series]
    calibration = calibration_from({run.dataset: sweep}, others)
    # The steps it paid for: a stopped run's include those verl logged after the stop, before it ended.
    paid_steps = len(run.steps) + (run.adaptive_stop or {}).get("steps_logged_after", 0)
    return calibration.predict(run.dataset, run.nodes, paid_steps, run.trajectories_per_engine, None)


def cost_rows(results: StudyResults) -> list[dict[str, Any]]:
    valid = [s for s in results.summaries.values() if s.valid and s.measured is not None]
    rows = []
    for dataset in results.datasets():
        for entry in results.index(dataset).runs:
            run = results.summaries[entry.run_id]
            if run not in valid or run.overhead is None:
                continue
            measured = run.nodes * run.overhead["wall_s"] / 3600
            calibrated = calibrated_without(run, valid)
            rows.append(
                {
                    "dataset": dataset,
                    "series": "+".join(run.series),
                    "nodes": run.nodes,
                    "estimated_node_hours": run.estimated_node_hours,
                    "calibrated_node_hours": calibrated,
                    "measured_node_hours": measured,
                    "estimate_error": _error(run.estimated_node_hours, measured),
                    "calibrated_error": _error(calibrated, measured),
                    # The site's estimate priced every configured step; a stopped run paid for fewer.
                    "stopped_after_step": run.adaptive_stop["step"] if run.adaptive_stop else None,
                    "run_id": run.run_id,
                }
            )
    return rows


def _total(rows: list[dict[str, Any]], column: str) -> str:
    known = [r for r in rows if r[column] is not None]
    if not known:
        return "nothing (no run could be priced so)"
    predicted = sum(r[column] for r in known)
    measured = sum(r["measured_node_hours"] for r in known)
    share = "" if len(known) == len(rows) else f" over the {len(known)} runs it could price"
    return (
        f"{predicted:.3g} node-hours ({(predicted - measured) / measured:+.0%} against {measured:.3g} measured{share})"
    )


def cost_finding(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No run recorded its start and end with its steps: no cost to compare."
    errors = [r["calibrated_error"] for r in rows if not math.isnan(r["calibrated_error"])]
    spread = f"; per run {min(errors):+.0%} to {max(errors):+.0%}" if errors else ""
    stopped = sum(r.get("stopped_after_step") is not None for r in rows)
    stopped_note = (
        f" Of these runs, {stopped} {'was' if stopped == 1 else 'were'} stopped early by the adaptive step "
        "count: the site's estimate priced every configured step, the calibration only the steps paid for."
        if stopped
        else ""
    )
    return (
        f"Over the {len(rows)} runs that recorded their times, the site's estimate predicted "
        f"{_total(rows, 'estimated_node_hours')}, and the calibration from the other runs "
        f"{_total(rows, 'calibrated_node_hours')}{spread} (cost table).{stopped_note}"
    )
