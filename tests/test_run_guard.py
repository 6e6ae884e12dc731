"""No orphans: a killed launcher's run is ended and filed by its guard, and leftovers by the next launch.

These use a stand-in run (a `sleep` carrying the run's token, in a session of its own, as verl is);
tests/test_local_study.py kills a real workflow running the real trainer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

from rlvr_scaling.execution.failed_runs import (
    LAUNCHER_FILE,
    NOTE,
    TOKEN_FILE,
    launcher_alive,
    recover_leftovers,
    write_launcher_identity,
)
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, processes_with_token

from .conftest import PYTHON

RUN_ID = "gsm8k-n1-p2-0123456789"

# A launcher in miniature: stage, guard, start the "trainer" in its own session, then wait for it.
LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from pathlib import Path
    from rlvr_scaling.execution.process_cleanup import TOKEN_VAR
    from rlvr_scaling.execution.watchdog import Guard

    token, staging, failed, release = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    guard = Guard(token, staging, failed)
    trainer = subprocess.Popen(["sleep", "300"], env=dict(os.environ, **{TOKEN_VAR: token}), start_new_session=True)
    print(trainer.pid, flush=True)
    if release != "keep":
        guard.release(done=release == "done")
        print("released", flush=True)
    time.sleep(300)
    """
)


def _wait_until(condition, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def _staging(root: Path, stamp: str = "20261130T120000Z", pid: int = 4242, run_id: str = RUN_ID) -> Path:
    staging = root / "results" / "runs" / f".staging-{run_id}-{stamp}-{pid}"
    staging.mkdir(parents=True)
    (staging / "job.json").write_text(json.dumps({"run_id": run_id, "start": "then"}))
    (staging / "console.log").write_text("step:1 - ...\n")
    return staging


def _guard_pids(token: str) -> list[int]:
    """The guard of the run with this token (its command line names the token; it carries none)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and token.encode() in (entry / "cmdline").read_bytes()
                and b"watchdog import main" in (entry / "cmdline").read_bytes()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _guarded_run(tmp_path: Path, release: str) -> tuple[Path, Path, str, subprocess.Popen, int]:
    """A staged run under a miniature launcher: staging folder, failed folder, token, launcher, trainer."""
    staging = _staging(tmp_path)
    failed = tmp_path / "results" / "failed" / RUN_ID / "20261130T120000Z"
    token = uuid.uuid4().hex
    launcher, trainer = _start_launcher(staging, failed, token, release)
    # The trainer carries the token from its exec on (before it, a child has its parent's environment).
    _wait_until(lambda: trainer in processes_with_token(token))
    if release != "keep":
        # Killed before it let its guard go, the launcher is a killed launcher, and the guard rightly
        # ends its run (a loaded CI machine did that to the released-guard test): wait for the release.
        assert launcher.stdout.readline().strip() == "released"
    return staging, failed, token, launcher, trainer


def _start_launcher(staging: Path, failed: Path, token: str, release: str) -> tuple[subprocess.Popen, int]:
    launcher = subprocess.Popen(
        [PYTHON, "-c", LAUNCHER, token, str(staging), str(failed), release],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as the workflow's: killed whole below
    )
    trainer = int(launcher.stdout.readline())
    return launcher, trainer


def test_a_killed_launcher_takes_its_run_down_and_files_it(tmp_path: Path) -> None:
    staging, failed, token, launcher, trainer = _guarded_run(tmp_path, release="keep")
    assert processes_with_token(token) == [trainer] and len(_guard_pids(token)) == 1
    os.killpg(launcher.pid, signal.SIGKILL)  # the trainer is in another session: this does not reach it
    launcher.wait()
    assert _wait_until(lambda: not processes_with_token(token)), "the guard did not end the run's processes"
    assert _wait_until(failed.is_dir), "the guard did not file the staging folder"
    assert not staging.exists()
    job = json.loads((failed / "job.json").read_text())
    assert job["status"] == "killed" and job["run_id"] == RUN_ID
    note = (failed / NOTE).read_text()
    assert "was killed" in note and "ended 1 process" in note
    assert (failed / "console.log").read_text() == "step:1 - ...\n"


def test_a_released_guard_leaves_the_run_alone(tmp_path: Path) -> None:
    staging, failed, token, launcher, trainer = _guarded_run(tmp_path, release="done")
    try:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        # Not a fixed wait: the guard's own end is the event (a released guard has nothing left to do).
        assert _wait_until(lambda: not _guard_pids(token)), "the released guard did not end"
        assert processes_with_token(token) == [trainer] and staging.is_dir() and not failed.exists()
    finally:
        os.kill(trainer, signal.SIGKILL)


def test_the_next_launch_files_what_a_dead_launch_left(tmp_path: Path) -> None:
    # The launcher and its guard both died (a node crash, a SIGKILL of the whole job): the next launch
    # of the same run ends what still runs here and files the folder; other runs' folders stay.
    mine = _staging(tmp_path)
    other = _staging(tmp_path, run_id=RUN_ID + "9")
    token = uuid.uuid4().hex
    (mine / TOKEN_FILE).write_text(token + "\n")
    survivor = subprocess.Popen(["sleep", "300"], env=dict(os.environ, **{TOKEN_VAR: token}), start_new_session=True)
    # Until its exec the child still has our environment, without the token: wait for the trainer.
    assert _wait_until(lambda: processes_with_token(token) == [survivor.pid])
    moved = recover_leftovers(tmp_path, RUN_ID)
    assert moved == [tmp_path / "results" / "failed" / RUN_ID / "20261130T120000Z"]
    assert survivor.wait(timeout=20) is not None and not processes_with_token(token)
    assert not mine.exists() and other.is_dir()
    job = json.loads((moved[0] / "job.json").read_text())
    assert job["status"] == "abandoned"
    assert "pid 4242" in (moved[0] / NOTE).read_text() and "1 of its processes" in (moved[0] / NOTE).read_text()
    assert recover_leftovers(tmp_path, RUN_ID) == []


def test_the_guard_ignores_the_signals_meant_for_the_run(tmp_path: Path) -> None:
    # Slurm's SIGTERM at a time limit reaches every process of the job step, the guard too: it must
    # stay until the launcher has filed the run.
    staging = _staging(tmp_path)
    read_end, write_end = os.pipe()
    guard = subprocess.Popen(
        [sys.executable, "-m", "rlvr_scaling.execution.watchdog", "t" * 32, str(staging), str(tmp_path / "f"), "1"],
        stdin=read_end,
        start_new_session=True,
    )
    os.close(read_end)

    def ignores_sigterm() -> bool:
        status = Path(f"/proc/{guard.pid}/status").read_text()
        mask = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
        return bool(mask & (1 << (signal.SIGTERM - 1)))

    assert _wait_until(ignores_sigterm)
    guard.send_signal(signal.SIGTERM)
    # No fixed wait: a guard the SIGTERM had ended would exit -15; this one goes on to read "done".
    os.write(write_end, b"done\n")
    os.close(write_end)
    assert guard.wait(timeout=20) == 0 and staging.is_dir()


def test_a_launcher_whose_cleanup_was_interrupted_leaves_the_ending_to_its_guard(tmp_path: Path) -> None:
    # release(done=False): e.g. a second Ctrl-C during the launcher's own cleanup.
    _staging_folder, _failed, token, launcher, _trainer = _guarded_run(tmp_path, release="interrupted")
    try:
        assert _wait_until(lambda: not processes_with_token(token)), "the guard did not end the run's processes"
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()


def test_a_staging_folder_of_a_live_launch_is_left_alone(tmp_path: Path) -> None:
    # A Slurm job of a killed workflow still runs, or a launch by hand: its folder is not filed.
    staging = _staging(tmp_path)
    write_launcher_identity(staging)  # this test process: alive
    assert launcher_alive(staging) is True
    assert recover_leftovers(tmp_path, RUN_ID) == [] and staging.is_dir()
    owner = json.loads((staging / LAUNCHER_FILE).read_text())
    (staging / LAUNCHER_FILE).write_text(json.dumps({**owner, "start_ticks": "1"}))  # the pid reused
    assert launcher_alive(staging) is False
    (staging / LAUNCHER_FILE).write_text(json.dumps({**owner, "host": "elsewhere", "slurm_job_id": None}))
    assert launcher_alive(staging) is None and recover_leftovers(tmp_path, RUN_ID) == []
