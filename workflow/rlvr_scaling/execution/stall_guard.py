"""The hang guard: a run that logs no step within a bound is stopped, instead of holding its nodes to
its time limit (a collective that hangs does so with no error: laifs-container-recipes issue 44).

A bound must never stop a healthy run, whose start-up and steps may take far longer than toy ones
(LUMI: 15 to 27 min of start-up, steps of up to 20 min). Before the first step the run waits for its
predicted start-up and its predicted first step, times estimate.stall_factor (by default the
time limit's factor). After a step it
waits factor x the longest it has measured itself: the steps' own times as verl logs them
(`timing_s/step`) and the intervals between the steps' lines. The predicted step serves only while
nothing is measured (a first step logged without its time). Never below the site's
launch.stall_floor_minutes. The predictions are the plan's, or the measured ones the caller passes
(analysis.cost.run_estimates: the launch command prices each run from the runs done before it). The
launcher's step clock (execution.step_clock) knows when each step was logged; `stall_record` says what
job.json and the failed run's note keep of a stop.
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
    first_step_s: float  # the wait allowed from the launch to the first step logged
    factor: float  # times the longest measured step or interval (or the predicted step) after it
    predicted_step_s: float
    floor_s: float
    predicted_startup_s: float = 0.0
    source: str = ""  # where the predictions come from

    def limit_s(self, after_step: bool, measured_s: float | None = None) -> float:
        """The longest wait for the next step: before the first, or after one, given the longest step
        time or interval measured so far (None: nothing measured yet, the prediction serves)."""
        if not after_step:
            return self.first_step_s
        longest = self.predicted_step_s if measured_s is None else measured_s
        return max(self.floor_s, self.factor * longest)

    def to_dict(self) -> dict[str, Any]:
        return {key: round(value, 1) if isinstance(value, float) else value for key, value in asdict(self).items()}


def stall_bound(
    study: Study, nodes: int, predicted_step_s: float, startup_s: float | None = None, source: str = ""
) -> StallBound:
    """`startup_s`: the run's predicted start-up (default: the site's estimate for `nodes`)."""
    factor = study.config.estimate.guard_factor
    floor_s = study.site.launch.stall_floor_minutes * 60
    startup = startup_minutes(study, nodes) * 60 if startup_s is None else startup_s
    first = max(floor_s, factor * (startup + predicted_step_s))
    return StallBound(
        first_step_s=first,
        factor=factor,
        predicted_step_s=predicted_step_s,
        floor_s=floor_s,
        predicted_startup_s=startup,
        source=source,
    )


def run_stall_bound(study: Study, run: Run) -> StallBound:
    """The bound from the run's estimate as the plan (or the caller's measured estimate) holds it: its
    bounds' step and start-up where the estimate has them (never under the plan's), else its own."""
    estimate = run.estimate
    startup = estimate.get("bound_startup_minutes", estimate.get("startup_minutes"))
    return stall_bound(
        study,
        run.nodes,
        float(estimate.get("bound_step_seconds", estimate.get("step_seconds")) or 0.0),
        None if startup is None else float(startup) * 60,
        str(estimate.get("step_source") or ""),
    )


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
    measured_s: float | None,
    run: Run,
    elapsed_s: float,
    folder: Path,
) -> dict[str, Any]:
    """What job.json keeps of a stopped hang: the bound and its basis, the wait, the node-hours the run
    would still have held up to its time limit, and the last lines of each node's logs."""
    limit = bound.limit_s(last_step is not None, measured_s)
    after = f"after step {last_step}" if last_step is not None else "before the first step"
    left_s = max(0.0, float(run.estimate.get("time_limit_minutes") or 0) * 60 - elapsed_s)
    logs = {"console": _tail(folder / "console.log")}
    logs.update({path.stem.removeprefix("ray-"): _tail(path) for path in sorted((folder / "ray").glob("ray-*.log"))})
    return {
        "detail": f"no step for {_duration(waited_s)} {after} (the bound: {_duration(limit)})",
        "last_step": last_step,
        "waited_seconds": round(waited_s, 2),
        "bound_seconds": round(limit, 1),
        "bound": bound.to_dict(),
        # the longest step time or interval measured before the stop: what the bound followed
        "longest_measured_seconds": None if measured_s is None else round(measured_s, 2),
        "node_hours_saved": round(left_s / 3600 * run.nodes, 3),
        "log_tails": logs,
    }
