"""The `local` launcher: verl on this host, with a Ray instance of its own."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, end_processes
from rlvr_scaling.execution.ray_cluster import RAY_TEARDOWN_ENV
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run


class RayTempDir:
    """The run's own Ray folder (RAY_TMPDIR: sessions, sockets, logs), gone when the run ends: verl's
    `ray.init` left a session folder in /tmp/ray for every local run, 16 for one small study (#61)."""

    def __init__(self, folder: Path, token: str) -> None:
        self.folder = folder
        self.token = token

    def stop(self) -> None:
        # Ray's own processes first: a raylet still running would write into the folder again.
        end_processes(self.token)
        shutil.rmtree(self.folder, ignore_errors=True)


class LocalLauncher:
    kind = "local"

    def __init__(self, study: Study, root: Path) -> None:
        self.study = study

    def verl_args(self) -> list[str]:
        # Start a private Ray instance: never join a cluster someone else started on this host.
        return ["+ray_kwargs.ray_init.address=local"]

    def start(self, run: Run, log_dir: Path, env: dict[str, str], job: dict[str, Any]) -> RayTempDir:
        # Short, under the system's temporary folder: Ray's socket paths must fit 107 characters.
        token = env[TOKEN_VAR]
        folder = Path(tempfile.gettempdir()) / f"rlvr-ray-{os.getuid()}-{token[-16:]}"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        env["RAY_TMPDIR"] = str(folder)
        env.update(RAY_TEARDOWN_ENV)
        job["ray_temp_dir"] = str(folder)
        return RayTempDir(folder, token)
