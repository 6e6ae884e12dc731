"""The hang guard: a run that logs no step within a bound is stopped, instead of holding its nodes to
its time limit (a collective that hangs does so with no error: laifs-container-recipes issue 44).

The bound comes from the plan: before the first step, time_limit_factor x the run's predicted
start-up; after it, time_limit_factor x the slowest interval between steps seen so far, or the
predicted step time if that is longer; never below the site's launch.stall_floor_minutes. The
launcher's step clock (execution.step_clock) knows when each step was logged; `check` says when the
bound is passed, with what job.json and the failed run's note keep of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run, startup_minutes

TAIL_LINES = 5


@dataclass(frozen=True)
class StallBound:
    first_step_s: float  # from the launch to the first step logged
    factor: float  # times the slowest interval between steps (or the predicted step) after it
    predicted_step_s: float
    floor_s: float

    def limit_s(self, slowest_interval_s: float | None) -> float:
        """The longest wait for the next step: before the first (None), or after some."""
        if slowest_interval_s is None:
            return self.first_step_s
        return max(self.floor_s, self.factor * max(slowest_interval_s, self.predicted_step_s))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def stall_bound(study: Study, nodes: int, predicted_step_s: float) -> StallBound:
    factor = study.config.estimate.time_limit_factor
    floor_s = study.site.launch.stall_floor_minutes * 60
    first = max(floor_s, factor * startup_minutes(study, nodes) * 60)
    return StallBound(first_step_s=first, factor=factor, predicted_step_s=predicted_step_s, floor_s=floor_s)


def run_stall_bound(study: Study, run: Run) -> StallBound:
    return stall_bound(study, run.nodes, float(run.estimate.get("step_seconds") or 0.0))


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _tail(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [line for line in path.read_text(errors="replace").splitlines() if line.strip()][-TAIL_LINES:]


def stall_record(
    bound: StallBound,
    waited_s: float,
    last_step: int | None,
    slowest_s: float | None,
    run: Run,
    elapsed_s: float,
    folder: Path,
) -> dict[str, Any]:
    """What job.json keeps of a stopped hang: the bound and its basis, the wait, the node-hours the run
    would still have held up to its time limit, and the last lines of each node's logs."""
    limit = bound.limit_s(slowest_s)
    after = f"after step {last_step}" if last_step is not None else "before the first step"
    left_s = max(0.0, float(run.estimate.get("time_limit_minutes") or 0) * 60 - elapsed_s)
    logs = {"console": _tail(folder / "console.log")}
    logs.update({path.stem.removeprefix("ray-"): _tail(path) for path in sorted((folder / "ray").glob("ray-*.log"))})
    return {
        "detail": f"no step for {_duration(waited_s)} {after} (the bound: {_duration(limit)})",
        "last_step": last_step,
        "waited_seconds": round(waited_s, 1),
        "bound_seconds": round(limit, 1),
        "bound": bound.to_dict(),
        "slowest_interval_seconds": None if slowest_s is None else round(slowest_s, 2),
        "node_hours_saved": round(left_s / 3600 * run.nodes, 3),
        "log_tails": logs,
    }
