"""A study left running, through the real Slurm cluster (tests/slurm/cluster.sh): a controller killed
and started again while its run's job still runs waits on that job instead of submitting a second one,
and a job Slurm no longer lists anywhere ends the wait with a failure that says so. The executor is the
profile's own (`rlvr-slurm`, workflow/snakemake_executor_plugin_rlvr_slurm); the trainer the stand-in
(tests/test_slurm.py says why)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from rlvr_scaling.measured.metrics_file import read_metrics_jsonl

from .conftest import PYTHON
from .conftest import SLURM_TEST_ACCOUNT as ACCOUNT
from .test_slurm import LONG_RUN, PROFILES, _start, _wait_for_step, jobs_since, our_jobs_gone, slurm_now, study_file
from .workflow_helpers import SLURM_SNAKEMAKE, assert_no_run_processes, slurm_jobs_from

# Both mostly wait: on a controller that is gone, then on Slurm to let go of a job.
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.verl,
    pytest.mark.xdist_group("slurm-cluster"),
    pytest.mark.mostly_waiting,
]
# Long enough (1 s steps) for the killed controller's successor to start while the job still runs.
STEPS = 60


def _run_jobs(start: str, workdir: Path) -> list[str]:
    """The run jobs (not the preflight) accounting holds for this test: "JobID|JobName|Account|State"."""
    return [job for job in jobs_since(start, workdir) if job.split("|", 1)[0] not in _preflight_job_ids(workdir)]


def _preflight_job_ids(workdir: Path) -> set[str]:
    logs = workdir / "results" / "logs" / "slurm" / "rule_preflight"
    return {log.stem for log in logs.rglob("*.log")}


def test_a_restarted_controller_waits_on_the_running_job_and_the_run_is_measured_once(
    slurm_workdir: Path, tmp_path: Path
) -> None:
    config = study_file(tmp_path, LONG_RUN.replace("algorithm.steps: 200", f"algorithm.steps: {STEPS}"))
    start = slurm_now()
    first = _start(slurm_workdir, config)
    _wait_for_step(slurm_workdir, first, 2)
    [job] = slurm_jobs_from(slurm_workdir)
    # The controller dies as a login node's process would: no chance to cancel anything.
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert [j["id"] for j in slurm_jobs_from(slurm_workdir)] == [job["id"]]  # the run's job lives on
    # With no controller at all, the live view still sees the run: from the results folder and Slurm.
    live = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "status", "--running", "--json", "--configfile", config, "--site", "ci-slurm"],
        cwd=slurm_workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    [running] = json.loads(live.stdout)["running"]
    assert (running["slurm_job_id"], running["state"], running["alive"]) == (job["id"], "RUNNING", True)
    assert running["steps_planned"] == STEPS and 2 <= running["steps_done"] < STEPS, running
    assert running["node_list"] and running["expected_end"], running
    # The README's way back after a kill: unlock, then the same command.
    account = {**os.environ, "RLVR_SLURM_ACCOUNT": ACCOUNT}
    subprocess.run(
        [*SLURM_SNAKEMAKE, *PROFILES, "--configfile", config, "--unlock"], cwd=slurm_workdir, check=True, env=account
    )
    second = _start(slurm_workdir, config)
    output, _ = second.communicate(timeout=900)
    assert second.returncode == 0, output[-4000:]
    # The successor said which job it waits on and how to stop it, and submitted no run of its own.
    assert f"already in Slurm as job {job['id']} (RUNNING)" in output, output[-4000:]
    assert f"scancel {job['id']}" in output
    assert "has been submitted with SLURM jobid" not in output, output[-4000:]
    [run] = (slurm_workdir / "results" / "runs").iterdir()
    record = json.loads((run / "job.json").read_text())
    assert record["status"] == "succeeded" and record["slurm_job_id"] == job["id"]
    steps, problems = read_metrics_jsonl(run / "metrics.jsonl")
    assert [s["step"] for s in steps] == list(range(1, STEPS + 1)) and not problems  # measured once
    assert not (slurm_workdir / "results" / "failed").exists()
    # Accounting's word: one run job since the test began, the one the first controller submitted.
    run_jobs = _run_jobs(start, slurm_workdir)
    assert [j.split("|")[0] for j in run_jobs] == [job["id"]] and run_jobs[0].endswith("|COMPLETED"), run_jobs
    # A third start has nothing to do: the run's incomplete mark went with the job that finished it.
    plan = subprocess.run(
        [*SLURM_SNAKEMAKE, *PROFILES, "--configfile", config, "-n"],
        cwd=slurm_workdir,
        capture_output=True,
        text=True,
        env=account,
    )
    assert "rule run:" not in plan.stdout, plan.stdout[-3000:]
    our_jobs_gone(slurm_workdir)
    assert_no_run_processes()


def test_a_job_slurm_no_longer_lists_ends_the_wait_with_a_failure_that_says_so(
    slurm_workdir: Path, tmp_path: Path
) -> None:
    # A cluster without accounting (sacct not read), and a controller that was not looking while its
    # run's job ended and squeue let go of it (MinJobAge=5 on the test cluster): stopped (SIGSTOP), as
    # a login node's hiccup or a poll interval longer than MinJobAge would leave it. No source knows
    # the job any more; the wait must end at the bound, 20 s here, with a failure that says so.
    config = study_file(tmp_path, LONG_RUN)
    settings = ("--rlvr-slurm-no-accounting", "--rlvr-slurm-vanished-after-seconds", "20")
    process = _start(slurm_workdir, config, *settings, "--seconds-between-status-checks", "5")
    _wait_for_step(slurm_workdir, process, 2)
    [job] = slurm_jobs_from(slurm_workdir)
    process.send_signal(signal.SIGSTOP)
    try:
        subprocess.run(["scancel", job["id"]], check=True)
        deadline = time.monotonic() + 180
        while _still_listed(job["id"]) and time.monotonic() < deadline:
            time.sleep(1)
        assert not _still_listed(job["id"]), f"squeue still lists job {job['id']} 180 s after scancel"
    finally:
        process.send_signal(signal.SIGCONT)
    resumed = time.monotonic()
    output, _ = process.communicate(timeout=600)
    waited = time.monotonic() - resumed
    assert process.returncode != 0, output[-4000:]
    assert f"Slurm job {job['id']} vanished: squeue (accounting not read) have not listed it for" in output
    assert "(the bound: 20 s)" in output and "Error in rule run" in output, output[-4000:]
    # The bound after the first check that missed it, and a check (5 s) either side: not the run's 200
    # steps, nor its time limit. Snakemake's own ending after the error adds seconds.
    assert 20 <= waited < 20 + 5 + 5 + 30, waited
    our_jobs_gone(slurm_workdir)
    assert_no_run_processes()


def _still_listed(job_id: str) -> bool:
    listing = subprocess.run(
        ["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--format=%T"], capture_output=True, text=True
    )
    return bool(listing.stdout.strip())
