"""The runs going on now, read from the results folder and Slurm only (so a second login shell sees
what the controller's shell does): each run's staging folder (results/runs/.staging-<run>-...) holds
its job record, its plan and its metrics as verl writes them; Slurm says whether its job still runs."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.execution.failed_runs import launcher_alive
from rlvr_scaling.execution.slurm_jobs import JobState, Runner, run_command, sacct_states, squeue_states
from rlvr_scaling.measured.metrics_file import read_metrics_jsonl

STEP_TIME = "timing_s/step"


@dataclass(frozen=True)
class LiveRun:
    run_id: str
    folder: str  # the staging folder, relative to results/
    slurm_job_id: str | None
    state: str  # Slurm's state of its job (RUNNING, ...); for a run without one: running or gone
    alive: bool
    nodes: int
    node_list: list[str]
    started: str  # ISO, UTC
    steps_done: int
    steps_planned: int
    last_step_s: float | None
    mean_step_s: float | None
    expected_end: str | None  # ISO, UTC: now + the steps left at the mean step time
    node_hours: float  # its nodes since its start, to now


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _step_times(metrics: Path) -> list[float]:
    steps, _ = read_metrics_jsonl(metrics) if metrics.exists() else ([], [])
    return [float(step[STEP_TIME]) for step in steps if isinstance(step.get(STEP_TIME), int | float)]


def _slurm_state(job_id: str, run: Runner) -> JobState | None:
    states = squeue_states([job_id], run) or {}
    if job_id not in states:
        states = sacct_states([job_id], run) or {}
    return states.get(job_id)


def live_run(staging: Path, now: dt.datetime, run: Runner = run_command) -> LiveRun | None:
    """One staging folder's run as it stands, or None where it holds no job record yet."""
    job = _read_json(staging / "job.json")
    if "run_id" not in job or "start" not in job:
        return None
    planned = _read_json(staging / "spec.json").get("run", {}).get("steps", 0)
    times = _step_times(staging / "metrics.jsonl")
    mean = sum(times) / len(times) if times else None
    started = dt.datetime.fromisoformat(job["start"])
    job_id = job.get("slurm_job_id")
    if job_id:
        slurm = _slurm_state(str(job_id), run)
        state = slurm.state if slurm else "unknown to Slurm"
        alive = slurm is not None and slurm.phase == "live"
    else:
        alive = launcher_alive(staging) is not False
        state = "running" if alive else "gone"
    end = now + dt.timedelta(seconds=mean * max(planned - len(times), 0)) if mean is not None and alive else None
    return LiveRun(
        run_id=job["run_id"],
        folder=str(staging.relative_to(staging.parents[1])),
        slurm_job_id=str(job_id) if job_id else None,
        state=state,
        alive=alive,
        nodes=int(job.get("nodes", 1)),
        node_list=list(job.get("node_list") or []),
        started=job["start"],
        steps_done=len(times),
        steps_planned=int(planned),
        last_step_s=times[-1] if times else None,
        mean_step_s=mean,
        expected_end=end.isoformat(timespec="seconds") if end else None,
        node_hours=int(job.get("nodes", 1)) * max((now - started).total_seconds(), 0.0) / 3600,
    )


def live_runs(root: Path, now: dt.datetime | None = None, run: Runner = run_command) -> list[LiveRun]:
    """Every run with a staging folder under results/runs/, oldest first."""
    now = now or dt.datetime.now(dt.UTC)
    runs_dir = paths.results_dir(root) / "runs"
    found = [_readable(staging, now, run) for staging in sorted(runs_dir.glob(".staging-*"))]
    return sorted((r for r in found if r is not None), key=lambda r: r.started)


def _readable(staging: Path, now: dt.datetime, run: Runner) -> LiveRun | None:
    """A staging folder's run, or None for one that is filed or committed while it is read (its folder
    renamed away) or whose records are not yet (or no longer) what the launcher writes."""
    try:
        return live_run(staging, now, run) if staging.is_dir() else None
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return None
