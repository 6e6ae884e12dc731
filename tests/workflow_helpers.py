"""Running Snakemake on the repository's workflow from a test's own working directory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from rlvr_scaling.execution.process_cleanup import TOKEN_TAG_VAR, TOKEN_VAR

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


def _environ(pid: str) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


# Under pytest-xdist (`make test` runs two workers), each worker's runs carry its name in their
# environment (PYTEST_XDIST_WORKER, inherited through Snakemake, sbatch, srun and Apptainer), so a
# test looks only at its own worker's processes. Only processes that provably belong to the other
# worker are left out: an untagged leftover still counts.
# Ray and Python retitle processes (ray::DashboardAgent), which can overwrite the start of
# /proc/<pid>/environ: the worker's name is also in every token (conftest sets RLVR_RUN_TOKEN_TAG),
# which the launcher sets last and which stays readable.
_WORKER_VAR = b"PYTEST_XDIST_WORKER="
_OWN_WORKER = _WORKER_VAR + os.environ.get("PYTEST_XDIST_WORKER", "").encode()
_TOKEN_PREFIX = f"{TOKEN_VAR}=".encode()
_OWN_TAG = os.environ.get(TOKEN_TAG_VAR, "").encode()


def _other_worker(environ: list[bytes]) -> bool:
    if any(item.startswith(_WORKER_VAR) and item != _OWN_WORKER for item in environ):
        return True
    tokens = [item[len(_TOKEN_PREFIX) :] for item in environ if item.startswith(_TOKEN_PREFIX)]
    return any(b"-" in token and token.split(b"-", 1)[0] != _OWN_TAG for token in tokens)


def token_processes() -> list[tuple[int, str]]:
    """(pid, command line) of every process carrying a run token (of this test worker's runs)."""
    found = []
    token = f"{TOKEN_VAR}=".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = _environ(entry.name)
            if any(item.startswith(token) for item in environ) and not _other_worker(environ):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append((int(entry.name), command))
        except OSError:
            continue
    return found


def run_processes() -> list[str]:
    """Processes still carrying a run token: none may outlive its run."""
    return [command[:120] for _pid, command in token_processes()]


def assert_no_run_processes(grace_s: float = 15.0) -> None:
    """None of the runs' processes outlives them. Ray's agents exit a few seconds after their raylet
    (they poll for it), and a loaded machine stretches that: a process still there after grace_s is a
    survivor."""
    deadline = time.monotonic() + grace_s
    while (left := run_processes()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == [], f"{len(left)} process(es) of finished runs still alive after {grace_s:.0f} s: {left}"
