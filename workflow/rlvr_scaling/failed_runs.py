"""Where a run that did not finish goes: results/failed/<run_id>/<stamp>/, with a note saying why.

Three ways lead there: the launcher files its own failed run; its guard (rlvr_scaling.watchdog) files
the run when the launcher was killed; and the next launch of a run files what an earlier launch that
died with its guard left in results/runs/.staging-*.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from . import paths
from .process_cleanup import end_processes

NOTE = "FAILED.txt"
TOKEN_FILE = ".run-token"  # the run's process token: a later launch ends what a crash left running
_STAGING = re.compile(r"^\.staging-(?P<run_id>.+)-(?P<stamp>\d{8}T\d{6}Z)-(?P<pid>\d+)$")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def staging_name(run_id: str, stamp: str) -> str:
    return f".staging-{run_id}-{stamp}-{os.getpid()}"


def failed_dir(root: Path, run_id: str, stamp: str) -> Path:
    return paths.results_dir(root) / "failed" / run_id / stamp


def write_json(path: Path, value: Any) -> None:
    """Whole or not at all: a kill in the middle leaves the previous version."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=1, default=str) + "\n")
    tmp.replace(path)


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


def recover_leftovers(root: Path, run_id: str) -> list[Path]:
    """File as failed what earlier launches of `run_id` left behind, ending any of their processes
    still alive on this host.

    Only this run's leftovers: Snakemake runs one job per output at a time (and locks the directory),
    so a staging folder of this run is never that of a live launch.
    """
    runs = paths.run_dir(root, run_id).parent
    moved = []
    for staging in sorted(runs.glob(f".staging-{run_id}-*")) if runs.exists() else []:
        match = _STAGING.match(staging.name)
        if not match or match["run_id"] != run_id or not staging.is_dir():
            continue
        token_file = staging / TOKEN_FILE
        ended = end_processes(token_file.read_text().strip()) if token_file.exists() else []
        note = (
            f"Filed by a later launch of {run_id} at {now()}: the launch that started at {match['stamp']} "
            f"(pid {match['pid']}) ended without finishing or filing the run (killed with its guard, or "
            f"its node went down); {len(ended)} of its processes were still running on this host and "
            "were ended."
        )
        destination = failed_dir(root, run_id, match["stamp"])
        moved.append(file_failed(staging, destination, note, status="abandoned", problems=[note]))
    return moved
