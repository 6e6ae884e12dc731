"""A run hurt midway, on this host: a crashed worker, a killed workflow. What is tested is the
launcher, its guard and Snakemake, not verl, so the run is the stand-in trainer
(tests/standin_trainer.py: verl's process tree, its logs, its death when a worker dies) and each test
takes seconds of steps instead of verl's minute of start-up. What it does not prove: how the real
verl tree dies (the stand-in prints Ray's message for a dead worker, which the memory-evidence check
reads; tests/test_selection.py holds Ray's real text). The real trainer's runs end through the same
launcher in tests/test_local_study.py and tests/test_apptainer.py; no real-verl failure is tested.
Marker `verl`: the workflow's preflight composes verl's configuration before any run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .workflow_helpers import SNAKEMAKE, STANDIN, assert_no_run_processes, snakemake, token_processes

pytestmark = [pytest.mark.verl, pytest.mark.standin]
# Slow enough for a test to act between two steps, fast enough that 40 steps take 20 s.
STEPS_ENV = {**STANDIN, "RLVR_STANDIN_STEP_SECONDS": "0.5"}


def _single_sweep_run(tmp_path: Path) -> Path:
    """A study of one long sweep run: time enough to hurt it midway."""
    single = tmp_path / "single.yaml"
    single.write_text(
        "only_datasets: [gsm8k]\noverrides:\n  datasets.gsm8k.sweep: [2]\n  algorithm.steps: 40\n"
        "  scaling.weak_nodes: [1]\n  scaling.strong_nodes: [1]\n  scaling.strong_reference_nodes: 1\n"
    )
    return single


def _wait_for_step(runs: Path, process: subprocess.Popen, step: int, timeout_s: float = 900) -> Path:
    """The staging folder of the run in progress, once its console shows `step`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read()[-3000:] if process.stdout else ""
            raise AssertionError(
                f"snakemake exited ({process.returncode}) before its run reached step {step}:\n{output}"
            )
        logs = list(runs.glob(".staging-*/console.log")) if runs.exists() else []
        if logs and f"step:{step} " in logs[0].read_text(errors="replace"):
            return logs[0].parent
        time.sleep(1)
    raise AssertionError(f"the run never reached step {step} in {timeout_s:.0f} s")


def _worker_pids() -> list[int]:
    return [pid for pid, command in token_processes() if "WorkerDict" in command]


def test_a_crashed_run_keeps_its_evidence_and_is_redone_alone(workdir: Path, tmp_path: Path) -> None:
    # A sweep point: a crash there used to land in results/runs/ as a "memory bound" verdict.
    single = _single_sweep_run(tmp_path)
    process = subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", "--configfile", str(single)],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **STEPS_ENV},
    )
    runs = workdir / "results" / "runs"
    _wait_for_step(runs, process, 2)
    killed = _worker_pids()
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    assert killed, "no verl worker of the run was found"
    output, _ = process.communicate(timeout=900)
    assert process.returncode != 0
    assert "Error in rule run" in output
    failed = list((workdir / "results" / "failed").glob("*/*"))
    assert len(failed) == 1
    job = json.loads((failed[0] / "job.json").read_text())
    assert job["status"] == "failed" and job["exit_status"] != 0 and job["trainer"] == STANDIN["RLVR_STANDIN_TRAINER"]
    assert job["memory_evidence"] is None  # Ray's "potential root causes: ... OOM killer" is no evidence
    assert json.loads((failed[0] / "spec.json").read_text())["run"]["series"] == ["sweep"]
    assert (failed[0] / "console.log").stat().st_size > 0
    assert not runs.exists() or not any(runs.iterdir()), "a failed run must leave nothing under results/runs"
    assert_no_run_processes()
    plan = snakemake(workdir, "-n", "--cores", "2", "--configfile", str(single)).stdout
    assert plan.count("rule run:") == 1


def test_a_killed_workflow_leaves_no_process_and_a_rerun_redoes_exactly_the_killed_run(
    workdir: Path, tmp_path: Path
) -> None:
    single = _single_sweep_run(tmp_path)
    # As `setsid snakemake ... & kill -9 -- -$!`: the whole process group, launcher included, SIGKILLed.
    process = subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", "--configfile", str(single)],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **STEPS_ENV},
    )
    runs = workdir / "results" / "runs"
    staging = _wait_for_step(runs, process, 1)
    run_id = staging.name.removeprefix(".staging-").rsplit("-", 2)[0]
    assert token_processes(), "the run's processes should be alive before the kill"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    killed_at = time.monotonic()
    assert_no_run_processes(grace_s=30)
    print(f"run processes gone {time.monotonic() - killed_at:.1f} s after the SIGKILL")
    # The guard files the folder once the processes are gone: a moment after them.
    deadline = time.monotonic() + 30
    while staging.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    print(f"staging folder filed {time.monotonic() - killed_at:.1f} s after the SIGKILL")
    failed = list((workdir / "results" / "failed" / run_id).glob("*"))
    assert len(failed) == 1 and not staging.exists() and not any(runs.iterdir())
    assert json.loads((failed[0] / "job.json").read_text())["status"] == "killed"
    assert "was killed" in (failed[0] / "FAILED.txt").read_text()
    # Snakemake keeps its lock after a SIGKILL (README: unlock, then rerun with --rerun-incomplete).
    snakemake(workdir, "--unlock", "--configfile", str(single))
    plan = snakemake(workdir, "-n", "--cores", "2", "--rerun-incomplete", "--configfile", str(single)).stdout
    assert plan.count("rule run:") == 1 and f"results/runs/{run_id}" in plan
    assert "rule dataset:" not in plan and "rule model:" not in plan
