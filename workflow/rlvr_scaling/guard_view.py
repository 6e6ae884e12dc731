"""`plan`'s view of the hang guard (execution.stall_guard): what it waits for, and each run's bounds
beside its predicted start-up, step, time limit and where the step's prediction comes from."""

from __future__ import annotations

from rlvr_scaling.execution.stall_guard import run_stall_bound, stall_bound
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PlannedRun, known_runs


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}m"


def guard_line(study: Study, plan: list[PlannedRun]) -> str | None:
    """What the hang guard waits for (execution.stall_guard), before the table of each run's bounds."""
    if not plan:
        return None
    bound = stall_bound(study, 1, 0.0)
    return (
        f"Hang guard: a run that logs no step is stopped and filed as failed. It waits {bound.factor:g} x "
        "(the predicted start-up + the predicted first step) for the first step, then "
        f"{bound.factor:g} x the longest step time or interval between steps it measured (the predicted step "
        f"until one is measured), never under {bound.floor_s / 60:g} min (launch.stall_floor_minutes). "
        "Each run's predictions, their source, its first-step wait and its time limit:"
    )


def guard_table(study: Study, plan: list[PlannedRun]) -> list[str]:
    """Per known run: predicted start-up and step, the guard's waits, the time limit, and where the
    step's prediction comes from."""
    header = ["run_id", "start-up", "step", "first-step wait", "after a step", "time limit", "step from"]
    rows = []
    for run in known_runs(plan):
        bound = run_stall_bound(study, run)
        rows.append(
            [
                run.run_id,
                _minutes(bound.predicted_startup_s),
                f"{bound.predicted_step_s:.0f}s",
                _minutes(bound.first_step_s),
                _minutes(bound.limit_s(True)),
                f"{run.resources['runtime']}m",
                str(run.estimate.get("step_source", "")),
            ]
        )
    if not rows:
        return []
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    return lines + ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
