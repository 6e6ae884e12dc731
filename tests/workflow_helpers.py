"""Running Snakemake on the repository's workflow from a test's own working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rlvr_scaling.process_cleanup import TOKEN_VAR

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def snakemake(
    workdir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 1800, check: bool = True
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [SNAKEMAKE, *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-4000:]}\n"
            f"{result.stderr[-4000:]}"
        )
    return result


def token_processes() -> list[tuple[int, str]]:
    """(pid, command line) of every process carrying a run token."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{TOKEN_VAR}=".encode() in (entry / "environ").read_bytes():
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append((int(entry.name), command))
        except OSError:
            continue
    return found


def run_processes() -> list[str]:
    """Processes still carrying a run token: none may outlive its run."""
    return [command[:120] for _pid, command in token_processes()]
