"""Shared fixtures; tests that need Slurm, Apptainer or verl skip without them unless CI requires them."""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rlvr_scaling.paths import link_workflow

from .workflow_helpers import slurm_jobs_from

# Every run token of this test process carries a tag of its own (the launcher reads
# RLVR_RUN_TOKEN_TAG): its pytest-xdist worker's name and this test session's id, so each worker's
# process checks see only its own runs, never another worker's or another clone's suite beside it
# (two clones' workers are both called gw0). No "-": a token is "<tag>-<uuid>".
_SESSION = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
# Only a test that asks for the stand-in trainer gets it (workflow_helpers.STANDIN): one leaked from
# the shell would make the real trainer's tests run the stand-in.
os.environ.pop("RLVR_STANDIN_TRAINER", None)
# No test writes the repository's inputs lock (config/inputs.lock.json): downloads in tests lock into
# a file of this session's (inputs/input_lock).
_INPUTS_LOCK_DIR = tempfile.mkdtemp(prefix="rlvr-test-lock-")
os.environ["RLVR_INPUTS_LOCK"] = str(Path(_INPUTS_LOCK_DIR) / "inputs.lock.json")
# Removed when this test process ends: every pytest process (each xdist worker too) made its own.
atexit.register(shutil.rmtree, _INPUTS_LOCK_DIR, ignore_errors=True)
os.environ["RLVR_RUN_TOKEN_TAG"] = f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}x{_SESSION[:16]}".replace("-", "")

# A test process keeps fabricated studies, matplotlib figures and verl's modules alive together, and
# Python's default thresholds (700 allocations) run the cyclic collector through all of it thousands
# of times: a quarter of a bundle's verify in this process (0.61 -> 0.49 s, 2026-12-05). The CLI steps
# production runs are short processes with small heaps and keep the default.
gc.set_threshold(100_000, 50, 1000)

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
# The login-node environment (`make workflow-env`), beside the full one the tests run in.
WORKFLOW_PYTHON = Path(os.environ.get("RLVR_WORKFLOW_VENV", REPO / ".venv-workflow")) / "bin" / "python"


def _verl_installed() -> bool:
    # A namespace package (origin None) is what an empty or hidden directory looks like: not verl.
    spec = importlib.util.find_spec("verl")
    return spec is not None and spec.origin is not None


@dataclass(frozen=True)
class Requirement:
    variable: str  # =1 turns a missing tool into a failure (CI sets it)
    present: Callable[[], bool]
    missing: str


def _resolve_python_found() -> bool:
    from rlvr_scaling.errors import StudyError
    from rlvr_scaling.inputs.base_packages import find_python

    try:
        find_python((3, 12))
    except StudyError:
        return False
    return True


REQUIREMENTS = {
    "slurm": Requirement("RLVR_REQUIRE_SLURM", lambda: shutil.which("sbatch") is not None, "sbatch not found"),
    "apptainer": Requirement(
        "RLVR_REQUIRE_APPTAINER", lambda: shutil.which("apptainer") is not None, "apptainer not found"
    ),
    # `slow` tests run the real verl trainer on CPU.
    "slow": Requirement("RLVR_REQUIRE_VERL", _verl_installed, "verl is not importable"),
    "verl": Requirement("RLVR_REQUIRE_VERL", _verl_installed, "verl is not importable"),
    # The resolve check: the base's Python version (3.12) and the package index.
    "resolve": Requirement("RLVR_REQUIRE_RESOLVE", _resolve_python_found, "no Python 3.12 for the resolve check"),
    "workflow_env": Requirement(
        "RLVR_REQUIRE_WORKFLOW_ENV",
        lambda: os.access(WORKFLOW_PYTHON, os.X_OK),
        f"{WORKFLOW_PYTHON} is missing (make workflow-env)",
    ),
}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture: a missing tool skips the test, or fails it in one line where it is required.

    A hook, not a fixture added at collection: pytest ignores `usefixtures` markers added there.
    """
    if item.nodeid in item.config.stash.get(_UNGROUPED, set()):
        pytest.fail(
            f"pytest-xdist's --dist loadgroup is not in effect with pytest {pytest.__version__}: this test's "
            "group would run beside others; install the pytest pinned in envs/local.txt",
            pytrace=False,
        )
    missing = {
        r for marker, r in REQUIREMENTS.items() if item.get_closest_marker(marker) is not None and not r.present()
    }
    required = sorted(f"{r.variable}=1 but {r.missing}" for r in missing if os.environ.get(r.variable) == "1")
    if required:
        pytest.fail("; ".join(required), pytrace=False)
    if missing:
        pytest.skip("; ".join(sorted(f"{r.missing} (set {r.variable}=1 to make this a failure)" for r in missing)))


_UNGROUPED = pytest.StashKey[set[str]]()
# Markers of tests that take seconds to minutes (pyproject.toml says what each runs).
_LONG_MARKERS = ("heavy", "standin", "workflow_env", "slow", "resolve")


def _long(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in _LONG_MARKERS)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup` each xdist_group must reach one worker (the Slurm tests share one cluster
    queue). xdist marks the group in the test id; an id without it means the groups are off, and those
    tests fail at setup (below) rather than run side by side."""
    # The Slurm group runs on one worker, in this order. Its tests that mostly wait (the rehearsal
    # measured 215 core-s in 440 s alone) go first, while the other worker's CPU-bound tests (the shared
    # local study) fill the cores; its CPU-bound ones (image builds, real two-node verl) last, when that
    # worker may be done and both cores are theirs. Run last, the waits left both cores idle for minutes
    # at the end of .ci/run. Then, outside the groups, the modules with long tests (Snakemake runs,
    # the login-node environment, mypy) before the short ones, a whole module at a time so that its
    # shared setup stays on one worker: the two workers then end on short tests, together. Last in
    # the files' order, two long tests ended .ci/run side by side at 24-42% of the cores. A stable
    # sort: every group keeps its own order, and every other test its place.
    long_modules = {item.path for item in items if _long(item) and not item.get_closest_marker("xdist_group")}
    items.sort(
        key=lambda item: (
            item.get_closest_marker("mostly_waiting") is None,
            item.path not in long_modules and not item.get_closest_marker("xdist_group"),
        )
    )
    if getattr(config.option, "loadgroup", False):
        config.stash[_UNGROUPED] = {i.nodeid for i in items if i.get_closest_marker("xdist_group")} - {
            i.nodeid for i in items if "@" in i.nodeid
        }


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory that sees the repository's workflow but keeps its own results/."""
    return link_workflow(tmp_path)


# The account tests submit under on the test cluster (tests/slurm/cluster.sh creates it).
SLURM_TEST_ACCOUNT = os.environ.get("RLVR_SLURM_TEST_ACCOUNT", "rlvr-test")


@pytest.fixture
def slurm_workdir(workdir: Path) -> Iterator[Path]:
    """A workdir that also sees the LUMI profile and the Slurm test profile layered on it."""
    (workdir / "lumi").symlink_to(REPO / "lumi")
    (workdir / "tests").mkdir()
    (workdir / "tests" / "slurm").symlink_to(REPO / "tests" / "slurm")
    yield workdir
    _leave_the_cluster_empty(workdir)


def _parent(pid: int) -> int:
    # /proc/<pid>/stat: "pid (comm) state ppid ...", comm may hold spaces and parentheses.
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _descendants_working_in(directory: Path) -> list[int]:
    """This test process's descendants (its Snakemake and what that started on this host) that work in
    directory. Slurm's jobs descend from slurmstepd, not from here: scancel ends those, as on a cluster
    (a slurmstepd killed by hand would drain its node)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or not Path(os.readlink(entry / "cwd")).is_relative_to(directory):
                continue
            pid = int(entry.name)
            while pid > 1 and pid != os.getpid():
                pid = _parent(pid)
            if pid == os.getpid():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _leave_the_cluster_empty(workdir: Path, timeout: float = 120) -> None:
    """A Slurm test that fails midway leaves its Snakemake and its jobs behind (CI once saw a failed
    test's 200-step run hold a node and both cores through the next three tests, which then failed on
    that). The tests after it count the queue: nothing of this test may outlive it."""
    for signal_number in (signal.SIGTERM, signal.SIGKILL):
        for pid in _descendants_working_in(workdir):
            with contextlib.suppress(OSError):
                os.kill(pid, signal_number)
        deadline = time.monotonic() + 15
        while _descendants_working_in(workdir) and time.monotonic() < deadline:
            time.sleep(0.5)
    if shutil.which("scancel") is None:
        return
    # Only the jobs submitted from this test's workdir: another test's or clone's jobs on the same
    # cluster, or a developer's own on a real one, are not this test's.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            jobs = [job["id"] for job in slurm_jobs_from(workdir)]
        except subprocess.CalledProcessError:
            time.sleep(1)
            continue
        if not jobs:
            return
        subprocess.run(["scancel", *jobs], check=False)
        time.sleep(1)


@pytest.fixture(scope="session")
def local_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The study `make demo` runs (the default config on the local site: both datasets, 8 runs of the
    real verl trainer on CPU), made once for the session. Every check of a finished local study reads
    it (tests/test_local_study.py, xdist group local-engine, so that one worker makes it) and leaves
    it as it found it."""
    from .workflow_helpers import snakemake  # after this module has set the run token's tag

    workdir = link_workflow(tmp_path_factory.mktemp("local-study"))
    # Results outside the working directory, as LUMI keeps them on scratch (storage.results).
    scratch = workdir.parent / f"{workdir.name}-scratch" / "results"
    # For a developer's quick rerun of these checks: a copy of a finished `make demo` (its results/
    # and .snakemake/ folders, named by RLVR_TEST_LOCAL_STUDY_FROM=<repository>) to start from;
    # Snakemake then redoes only what is not up to date. CI never sets it: it makes the study.
    source = os.environ.get("RLVR_TEST_LOCAL_STUDY_FROM")
    if source:
        shutil.copytree(Path(source) / "results", scratch, symlinks=True)
        shutil.copytree(Path(source) / ".snakemake", workdir / ".snakemake", symlinks=True, ignore=_LOCKS)
    snakemake(workdir, "--cores", "2", env={"RLVR_RESULTS_ROOT": str(scratch)})
    return workdir


_LOCKS = shutil.ignore_patterns("locks", "incomplete", "auxiliary", "log")
