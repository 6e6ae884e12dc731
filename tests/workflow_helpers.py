"""Running Snakemake on the repository's workflow from a test's own working directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rlvr_scaling.execution.process_cleanup import TOKEN_TAG_VAR, TOKEN_VAR

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
REPO = Path(__file__).resolve().parents[1]
# Snakemake for the Slurm tests: the same, polling job states at the profile's pace (the script says
# why and what production does differently).
SLURM_SNAKEMAKE = [sys.executable, str(REPO / "tests" / "slurm" / "snakemake_steady_polling.py")]

# The stand-in trainer (tests/standin_trainer.py) in place of verl, for tests of the workflow's
# plumbing; production runs verl's main_ppo (execution/run_records.trainer_module). PYTHONPATH lets
# the run's Python find it from the run directory, through Snakemake, sbatch and srun alike.
STANDIN = {"RLVR_STANDIN_TRAINER": "tests.standin_trainer", "PYTHONPATH": str(REPO)}


def private_clone(directory: Path) -> Path:
    """A clone with its own copy of the package, Snakefile and rules (config, profiles and report linked):
    a test that edits a module edits this copy. The repository's package is the code input of every other
    test's study, on both xdist workers: an edit there made another study's steps out of date under it
    (CI, stop 69: the Apptainer study ended with its figures to redo)."""
    shutil.copytree(
        REPO / "workflow" / "rlvr_scaling",
        directory / "workflow" / "rlvr_scaling",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(REPO / "Snakefile", directory / "Snakefile")
    shutil.copytree(REPO / "rules", directory / "rules")
    for name in ("config", "profiles", "report"):
        (directory / name).symlink_to(REPO / name)
    return directory


def snakemake(
    workdir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 1800, check: bool = True
) -> subprocess.CompletedProcess:
    through_slurm = "tests/slurm/profile" in args
    result = subprocess.run(
        [*SLURM_SNAKEMAKE, *args] if through_slurm else [SNAKEMAKE, *args],
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


def study_status(workdir: Path, study: Path) -> str:
    """`rlvr-scaling status` of a study file, as its user would run it in the working directory."""
    command = [sys.executable, "-m", "rlvr_scaling", "status", "--config", str(study)]
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, check=True).stdout


def _environ(pid: str) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


# A test looks only at its own processes: those whose run token carries this test process's tag
# (conftest: the pytest-xdist worker's name and the session's id). Another worker's runs, and another
# clone's suite or study on the same machine, carry other tags or none. Ray and Python retitle
# processes (ray::DashboardAgent), which can overwrite the start of /proc/<pid>/environ; the token,
# which the launcher sets last, stays readable.
_TOKEN_PREFIX = f"{TOKEN_VAR}=".encode()


def _own_token(environ: list[bytes]) -> bool:
    # The tag is read here, not at import: conftest sets it after importing this module.
    own_tag = os.environ.get(TOKEN_TAG_VAR, "").encode()
    if not own_tag:
        raise AssertionError(f"{TOKEN_TAG_VAR} is not set: no process could be told to be this test's")
    tokens = [item[len(_TOKEN_PREFIX) :] for item in environ if item.startswith(_TOKEN_PREFIX)]
    return any(token.split(b"-", 1)[0] == own_tag for token in tokens)


def token_processes() -> list[tuple[int, str]]:
    """(pid, command line) of every process carrying a run token of this test process's runs."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if _own_token(_environ(entry.name)):
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


def slurm_jobs_from(workdir: Path, *squeue_args: str) -> list[dict[str, str]]:
    """The queued or running Slurm jobs submitted from workdir (squeue's %Z, the job's working
    directory): a test's own jobs. Another test's or another clone's jobs on the same cluster, even
    under the same user and account, are neither counted nor cancelled."""
    listing = subprocess.run(
        ["squeue", "-h", "-o", "%i|%T|%r|%Z", *squeue_args], capture_output=True, text=True, check=True
    ).stdout
    jobs = []
    for line in listing.splitlines():
        job_id, state, reason, job_dir = line.split("|", 3)
        if Path(os.path.realpath(job_dir)).is_relative_to(os.path.realpath(workdir)):
            jobs.append({"id": job_id, "state": state, "reason": reason})
    return jobs


def stand_in_vni(job_id: int, step_id: int) -> int:
    """The VNI the test cluster's TaskProlog gives a job step's tasks (tests/slurm/cluster.sh), where
    Slurm's hpe_slingshot plugin would give the step's own."""
    return 1024 + (job_id % 4000) * 16 + step_id % 16


def assert_one_step_vni(nodes: dict[str, dict], job_id: str) -> None:
    """Every rank on every node of `nodes` (a fabric record's) saw the same Slingshot VNI, and it is one
    of the job's numbered steps' (sacct), not the batch script's: the step's credentials reached the
    ranks, and the ranks of all nodes were of one step."""
    steps = subprocess.run(
        ["sacct", "-n", "-P", "-j", job_id, "-o", "JobID"], capture_output=True, text=True, check=True
    ).stdout.split()
    numbered = [int(step.rsplit(".", 1)[1]) for step in steps if step.rsplit(".", 1)[-1].isdigit() and "." in step]
    expected = {str(stand_in_vni(int(job_id), step)) for step in numbered}
    seen = {node: entry["slingshot"] for node, entry in nodes.items()}
    assert all(entry and entry["ranks"] > 0 and entry["ranks_without_vni"] == 0 for entry in seen.values()), seen
    vnis = {tuple(entry["vnis"]) for entry in seen.values()}
    assert len(vnis) == 1 and len(next(iter(vnis))) == 1, seen
    assert next(iter(vnis))[0] in expected, (seen, expected, steps)
