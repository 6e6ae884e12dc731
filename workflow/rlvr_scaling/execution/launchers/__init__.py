"""One launcher per `launch.kind` of a site: how a run's verl reaches its nodes.

Both run the same command.sh (verl's trainer, in the site's image when it has one); they differ in
what the command needs before it starts and what it adds to verl's arguments:

- `local`: verl starts a private Ray instance on this host (launchers/local.py);
- `ray-srun`: a Ray cluster over the Slurm job's nodes, every node's Ray a task of one `srun` step, which verl joins
  (launchers/ray_srun.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from rlvr_scaling.errors import ConfigError
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run


class Started(Protocol):
    """What a launcher started before verl (a Ray cluster), to be stopped when the run ends."""

    def stop(self) -> None: ...


class Launcher(Protocol):
    kind: str

    def verl_args(self) -> list[str]:
        """Arguments the launcher adds to the run's own (in command.sh)."""
        ...

    def start(self, run: Run, log_dir: Path, env: dict[str, str], job: dict[str, Any]) -> Started | None:
        """Runs before command.sh, under the launch's signal handling; may set `env` (verl's
        environment) and record what it started in `job`."""
        ...


def launcher_for(study: Study, root: Path, port_offset: int = 0) -> Launcher:
    """`port_offset`: within the job's block of Ray ports, for a second cluster in one job (the
    preflight's engine smoke after its two-node check), which must not wait for the first's ports."""
    from rlvr_scaling.execution.launchers.local import LocalLauncher
    from rlvr_scaling.execution.launchers.ray_srun import RaySrunLauncher

    kinds: dict[str, type] = {LocalLauncher.kind: LocalLauncher, RaySrunLauncher.kind: RaySrunLauncher}
    kind = study.site.launch.kind
    if kind not in kinds:  # the schema allows only these; a site built in code may not have been checked
        raise ConfigError(
            "launch.kind", kind, f"expected one of {', '.join(kinds)}", source=f"site '{study.site_name}'"
        )
    launcher = kinds[kind](study, root)
    if port_offset:
        launcher.port_offset = port_offset
    return launcher
