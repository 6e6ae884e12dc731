"""Where a run that did not finish goes: results/failed/<run_id>/<stamp>/, with a note saying why.

Three ways lead there: the launcher files its own failed run; its guard (rlvr_scaling.execution.watchdog) files
the run when the launcher was killed; and the next launch of a run files what an earlier launch that
died with its guard left in results/runs/.staging-*.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.execution.process_cleanup import end_processes
from rlvr_scaling.execution.slurm_jobs import squeue_states
from rlvr_scaling.fsutil import write_json

NOTE = "FAILED.txt"
TOKEN_FILE = ".run-token"  # the run's process token: a later launch ends what a crash left running
LAUNCHER_FILE = ".launcher.json"  # who owns a staging folder, to tell a live launch from a dead one
_STAGING = re.compile(r"^\.staging-(?P<run_id>.+)-(?P<stamp>\d{8}T\d{6}Z)-(?P<pid>\d+)$")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def staging_name(run_id: str, stamp: str) -> str:
    return f".staging-{run_id}-{stamp}-{os.getpid()}"


def failed_dir(root: Path, run_id: str, stamp: str) -> Path:
    return paths.results_dir(root) / "failed" / run_id / stamp


def file_failed(staging: Path, destination: Path, note: str, **job_updates: Any) -> Path:
    """Move a run directory that did not finish to `destination`, with a note and its job.json updated."""
    job_file = staging / "job.json"
    try:
        job = json.loads(job_file.read_text())
    except (OSError, ValueError):
        job = {}
    if job_updates:
        job.update(job_updates)
        write_json(job_file, job)
    (staging / NOTE).write_text(note.rstrip() + "\n")
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.exists():  # two failures of one run in the same second
        destination = destination.with_name(f"{destination.name}-{staging.name.rsplit('-', 1)[-1]}")
    shutil.move(str(staging), destination)
    return destination


def _start_ticks(pid: int) -> str | None:
    """A process's start time in clock ticks since boot: with the pid, it names one process (pids are
    reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def write_launcher_identity(staging: Path) -> None:
    """Which launcher owns a staging folder: host, pid, its start time, its Slurm job."""
    write_json(
        staging / LAUNCHER_FILE,
        {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "start_ticks": _start_ticks(os.getpid()),
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        },
    )


def _slurm_job_alive(job_id: str) -> bool | None:
    try:
        states = squeue_states([job_id])
    except (OSError, subprocess.TimeoutExpired):
        return None
    if states is None:
        return None
    # A job the controller has forgotten (squeue: "Invalid job id") is over.
    return job_id in states and states[job_id].phase == "live"


def launcher_alive(staging: Path) -> bool | None:
    """True if the launch that owns `staging` still runs, False if it is gone, None if this host cannot
    tell (another host, and no Slurm job to ask about)."""
    try:
        owner = json.loads((staging / LAUNCHER_FILE).read_text())
    except (OSError, ValueError):
        return False  # died before it wrote who it is
    if owner.get("host") == socket.gethostname():
        return owner.get("start_ticks") is not None and _start_ticks(int(owner["pid"])) == owner["start_ticks"]
    if owner.get("slurm_job_id"):
        return _slurm_job_alive(str(owner["slurm_job_id"]))
    return None


def recover_leftovers(root: Path, run_id: str) -> list[Path]:
    """File as failed what earlier launches of `run_id` left behind, ending any of their processes
    still alive on this host. A folder whose launcher still runs (a Slurm job of a killed workflow, a
    launch by hand) or may run (another host, no job to ask about) is left alone."""
    runs = paths.run_dir(root, run_id).parent
    moved = []
    for staging in sorted(runs.glob(f".staging-{run_id}-*")) if runs.exists() else []:
        match = _STAGING.match(staging.name)
        if not match or match["run_id"] != run_id or not staging.is_dir():
            continue
        alive = launcher_alive(staging)
        if alive is not False:
            state = "still runs" if alive else "may still run on another host"
            print(f"rlvr-scaling: left {staging} alone: the launch that owns it {state}", file=sys.stderr)
            continue
        token_file = staging / TOKEN_FILE
        try:
            ended = end_processes(token_file.read_text().strip(), grace_s=3.0) if token_file.exists() else []
            note = (
                f"Filed by a later launch of {run_id} at {now()}: the launch that started at {match['stamp']} "
                f"(pid {match['pid']}) ended without finishing or filing the run (killed with its guard, or "
                f"its node went down); {len(ended)} of its processes were still running on this host and "
                "were ended."
            )
            destination = failed_dir(root, run_id, match["stamp"])
            moved.append(file_failed(staging, destination, note, status="abandoned", problems=[note]))
        except FileNotFoundError:
            continue  # its guard filed it meanwhile
    return moved
