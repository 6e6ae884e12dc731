"""The `local` launcher: verl on this host, with a Ray instance of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run


class LocalLauncher:
    kind = "local"

    def __init__(self, study: Study, root: Path) -> None:
        self.study = study

    def verl_args(self) -> list[str]:
        # Start a private Ray instance: never join a cluster someone else started on this host.
        return ["+ray_kwargs.ray_init.address=local"]

    def start(self, run: Run, log_dir: Path, env: dict[str, str], job: dict[str, Any]) -> None:
        return None
