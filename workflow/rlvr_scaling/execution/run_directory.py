"""A run's folder from its first moment to its filing.

It is staged beside results/runs/ (results/runs/.staging-<run_id>-<stamp>-<pid>/), holds the run's
process token and its launcher's identity while it runs, and ends in exactly one place: moved whole to
results/runs/<run_id>/ (`commit`), or to results/failed/<run_id>/<stamp>/ with a note (`file_failed`).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution import failed_runs
from rlvr_scaling.execution.process_cleanup import new_token
from rlvr_scaling.fsutil import write_json


class RunDirectory:
    def __init__(self, root: Path, run_id: str, stamp: str | None = None) -> None:
        self.run_id = run_id
        self.stamp = stamp or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        self.final = paths.run_dir(root, run_id)
        self.staging = self.final.parent / failed_runs.staging_name(run_id, self.stamp)
        self.failed = failed_runs.failed_dir(root, run_id, self.stamp)
        # Every process of the run carries it in its environment: how the run's processes are found.
        self.token = new_token()

    def refuse_existing(self) -> None:
        if self.final.exists():
            raise StudyError(f"{self.final} exists already: runs are never rewritten in place (delete it to rerun)")

    def create(self) -> None:
        self.staging.mkdir(parents=True)
        (self.staging / failed_runs.TOKEN_FILE).write_text(self.token + "\n")
        failed_runs.write_launcher_identity(self.staging)

    def path(self, name: str) -> Path:
        return self.staging / name

    def write_json(self, name: str, document: Any) -> None:
        write_json(self.path(name), document)

    def write_script(self, name: str, text: str) -> Path:
        script = self.path(name)
        script.write_text(text)
        script.chmod(0o755)
        return script

    def commit(self) -> Path:
        """The run's processes are gone: the folder, without the launch's own marks, becomes the run."""
        (self.staging / failed_runs.TOKEN_FILE).unlink()
        (self.staging / failed_runs.LAUNCHER_FILE).unlink()
        self.staging.rename(self.final)
        return self.final

    def file_failed(self, note: str, **job_updates: Any) -> Path:
        """Moved to results/failed/ with `note` in FAILED.txt; returns where it went."""
        return failed_runs.file_failed(self.staging, self.failed, note, **job_updates)
