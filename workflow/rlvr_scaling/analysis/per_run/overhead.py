"""What a run cost outside its steps: the start-up before its first step (Ray, model load, engine
warm-up) and the tear-down after its last, from the job record's start and end and the times the
launcher saw the first and last step logged (execution.step_clock), as a share of its node-hours."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from rlvr_scaling.analysis.per_run.results_io import StudyResults


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def run_overhead(job: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, float] | None:
    """Seconds of the run: in all, in its steps, before its first step began, after its last was
    logged. None for a run whose record lacks the times (made before the launcher noted them)."""
    clock = job.get("step_clock") or {}
    durations = {s["step"]: float(s["timing_s/step"]) for s in steps if "timing_s/step" in s}
    try:
        start, end = _time(job["start"]), _time(job["end"])
        first, last = _time(clock["first_step_logged"]), _time(clock["last_step_logged"])
        first_duration = durations[clock["first_step"]]
    except (KeyError, TypeError, ValueError):
        return None
    wall = (end - start).total_seconds()
    in_steps = sum(durations.values())
    # The first step began its duration before it was logged.
    startup = max(0.0, (first - start).total_seconds() - first_duration)
    teardown = max(0.0, (end - last).total_seconds())

    def share(seconds: float) -> float:
        return seconds / wall if wall > 0 else math.nan

    return {
        "wall_s": wall,
        "steps_s": in_steps,
        "startup_s": startup,
        "teardown_s": teardown,
        "startup_share": share(startup),
        "teardown_share": share(teardown),
        # start-up, tear-down and what lies between the steps (validation, logging, checkpoints)
        "outside_steps_share": share(wall - in_steps),
    }


def overhead_rows(results: StudyResults) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        for run in results.index(dataset).runs:
            summary = results.summaries[run.run_id]
            cost = summary.overhead
            if cost is None:
                continue
            node_hours_per_second = summary.nodes / 3600
            rows.append(
                {
                    "dataset": dataset,
                    "nodes": summary.nodes,
                    "series": "+".join(run.series),
                    "wall_s": cost["wall_s"],
                    "startup_s": cost["startup_s"],
                    "steps_s": cost["steps_s"],
                    "teardown_s": cost["teardown_s"],
                    "startup_share": cost["startup_share"],
                    "teardown_share": cost["teardown_share"],
                    "outside_steps_share": cost["outside_steps_share"],
                    "node_hours": cost["wall_s"] * node_hours_per_second,
                    "outside_steps_node_hours": (cost["wall_s"] - cost["steps_s"]) * node_hours_per_second,
                    "run_id": run.run_id,
                }
            )
    return rows


def overhead_finding(rows: list[dict[str, Any]], runs: int) -> str:
    """`runs`: how many runs the study has; those without a step clock (failed sweep points, runs
    made before the clock or elsewhere) are not in `rows`, and the sentence says so."""
    if not rows:
        return "No run recorded when its steps were logged, so its start-up and tear-down are not known."
    total = sum(r["node_hours"] for r in rows)
    if total <= 0:
        return f"The {len(rows)} runs that recorded their steps' times took no measurable time."
    outside = sum(r["outside_steps_node_hours"] for r in rows)
    startup = sum(r["startup_s"] * r["nodes"] for r in rows) / 3600
    teardown = sum(r["teardown_s"] * r["nodes"] for r in rows) / 3600
    left_out = f" ({runs - len(rows)} of the {runs} runs recorded no step times and are not counted)"
    return (
        f"Outside their steps the {len(rows)} runs spent {outside:.3g} of their {total:.3g} node-hours "
        f"({outside / total:.0%}): start-up {startup:.3g} node-hours, tear-down {teardown:.3g}, the rest "
        f"between steps{left_out if runs > len(rows) else ''}."
    )
