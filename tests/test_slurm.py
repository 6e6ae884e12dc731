"""The study through a real Slurm cluster (tests/slurm/cluster.sh): sbatch, srun, a Ray cluster over
two Slurm nodes, and the faults a cluster produces. Marker `slurm`; CI sets RLVR_REQUIRE_SLURM=1.

What these tests prove is Slurm's and the launcher's part (submission, accounts, the budget gate, the
Ray cluster the launcher forms over the job's nodes, scancel and time limits, the sequential sweep
under the Slurm executor), so the trainer in them is the stand-in (tests/standin_trainer.py, verl's
process tree and logs in seconds). The real verl trainer runs through this same Slurm cluster, across
two nodes and inside the site's image, in tests/test_apptainer.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rlvr_scaling.execution.ray_cluster import local_node_ip
from rlvr_scaling.measured.metrics_file import read_metrics_jsonl
from rlvr_scaling.study.config import load_study

from .conftest import SLURM_TEST_ACCOUNT
from .workflow_helpers import (
    SLURM_SNAKEMAKE,
    STANDIN,
    assert_no_run_processes,
    assert_one_step_vni,
    slurm_jobs_from,
    snakemake,
    token_processes,
)

# One test worker runs the Slurm cluster's tests, one after another: the nodes-down test sets every
# node down, and the cluster's four nodes are this machine's two cores. Each test counts only its own
# jobs (slurm_jobs_from). `verl`: the preflight composes verl's configuration before any run.
pytestmark = [pytest.mark.slurm, pytest.mark.verl, pytest.mark.xdist_group("slurm-cluster")]
ACCOUNT = SLURM_TEST_ACCOUNT
PROFILES = ("--profile", "lumi", "--profile", "tests/slurm/profile")


def study_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return str(path)


def our_jobs_gone(workdir: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while (left := slurm_jobs_from(workdir)) and time.monotonic() < deadline:
        time.sleep(1)
    assert not left, f"Slurm jobs of this test still queued or running {timeout:.0f} s later: {left}"


def filed_failures(workdir: Path, timeout: float = 180) -> list[Path]:
    """The failed runs' folders, once one has its FAILED.txt. Slurm reports a job cancelled or over
    its limit as it signals it, and Snakemake stops then; the run's launcher files the evidence after
    (within Slurm's KillWait), so a test waits for the note the filing writes last."""
    deadline = time.monotonic() + timeout
    while not list((workdir / "results" / "failed").glob("*/*/FAILED.txt")) and time.monotonic() < deadline:
        time.sleep(1)
    return list((workdir / "results" / "failed").glob("*/*"))


def slurm_now() -> str:
    """A start time for sacct -S, in the cluster's own clock (second resolution)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def jobs_since(start: str, workdir: Path) -> list[str]:
    """Every job submitted from workdir since start, as accounting (slurmdbd) recorded it, whatever
    its user or account (a bad account must reach no job at all): "JobID|JobName|Account|State"."""
    records = subprocess.run(
        ["sacct", "-a", "-n", "-X", "-P", "-S", start, "-o", "JobID,JobName,Account,State,WorkDir"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    own = os.path.realpath(workdir)
    return [r.rsplit("|", 1)[0] for r in records if Path(os.path.realpath(r.rsplit("|", 1)[1])).is_relative_to(own)]


def test_local_study_through_slurm_with_a_two_node_ray_cluster(slurm_workdir: Path, tmp_path: Path) -> None:
    config = study_file(
        tmp_path,
        # A sequential sweep of two points (the selected one is weak n1), then weak n2 = strong n2:
        # three runs, one across two Slurm nodes.
        "only_datasets: [gsm8k]\noverrides:\n  datasets.gsm8k.sweep: [2, 4]\n  algorithm.steps: 3\n"
        "  scaling.strong_nodes: [2]\n",
    )
    env = {"RLVR_SLURM_ACCOUNT": ACCOUNT, **STANDIN}
    snakemake(slurm_workdir, *PROFILES, "--configfile", config, env=env, timeout=1500)
    runs = sorted((slurm_workdir / "results" / "runs").iterdir())
    assert len(runs) == 3
    # The second point ran once the step after the first (on the Snakemake host) said the sweep goes on.
    [step] = (slurm_workdir / "results" / "sweep" / "gsm8k").iterdir()
    assert json.loads(step.read_text())["goes_on"] and "-p2-" in step.name
    for run_dir in runs:
        job = json.loads((run_dir / "job.json").read_text())
        assert job["status"] == "succeeded" and job["slurm_job_id"]
        assert job["launcher"] == "ray-srun" and len(job["node_list"]) == job["nodes"]
        assert job["trainer"] == STANDIN["RLVR_STANDIN_TRAINER"]
        steps, problems = read_metrics_jsonl(run_dir / "metrics.jsonl")
        assert len(steps) == 3 and not problems
    two = next(r for r in runs if "-n2-" in r.name)
    job = json.loads((two / "job.json").read_text())
    assert len(set(job["node_list"])) == 2
    # Every node's raylet ran as a task of one job step over both nodes (on Slingshot the only way
    # their processes share a VNI: docs/lumi.md), each logging to its node's file, and joined the head.
    assert all((two / "ray" / f"ray-{node}.log").stat().st_size > 0 for node in job["node_list"])
    assert (two / "ray" / "ray-step.log").exists()
    # The stand-in trainer starts no process group: no transport on record, so the two-node run is not
    # a measurement of the site's scaling (verl's runs record theirs: test_apptainer, test_local_study).
    assert job["fabric"]["valid_for_scaling"] is False
    assert "no transport recorded on " in job["fabric"]["detail"]
    # The preflight's all-reduce crossed its two Slurm nodes through the same one-step launcher.
    collective = json.loads((slurm_workdir / "results" / "preflight" / "ci-slurm.json").read_text())["collective"]
    assert collective["finished"] and collective["sums_right"] and collective["bus_bandwidth_gb_per_s"] >= 0.01
    crossed = {node: entry["transport"] for node, entry in collective["transport"]["nodes"].items()}
    assert crossed == dict.fromkeys(collective["nodes"], "tcp") and len(crossed) == 2, collective
    # The step's Slingshot variables (planted by the test cluster's TaskProlog where Slurm's hpe_slingshot
    # plugin sets them on LUMI) reached every rank of both nodes, one step's VNI on both.
    preflight_job = json.loads((slurm_workdir / "results" / "preflight" / "ci-slurm.json").read_text())["slurm"]["id"]
    assert_one_step_vni(collective["transport"]["nodes"], preflight_job)
    # Both nodes registered with Ray on the site's interface (launch.node_interface), not on the
    # address Ray picks by itself.
    interface = load_study(site="ci-slurm").site.launch.node_interface
    pinned = local_node_ip([sys.executable], dict(os.environ), interface)
    assert pinned != local_node_ip([sys.executable], dict(os.environ))
    assert job["ray_node_addresses"] == dict.fromkeys(job["node_list"], pinned)
    assert job["ray_head"].startswith(f"{pinned}:")
    # Ray's folder was this job's own, node-local (never the shared /tmp/ray), and is gone after it.
    assert job["ray_temp_dir"] == f"/tmp/rlvr-ray-{os.getuid()}-{job['slurm_job_id']}-0"
    assert not Path(job["ray_temp_dir"]).exists()
    # So were the site's per-job folders (XDG_CACHE_HOME, which the trainer filled), on both nodes.
    assert job["job_folders"] == [f"/tmp/rlvr-cache-{job['slurm_job_id']}"]
    assert f"cache written: {job['job_folders'][0]}/standin" in (two / "console.log").read_text()
    assert not Path(job["job_folders"][0]).exists()
    accounting = subprocess.run(
        ["sacct", "-n", "-X", "-j", job["slurm_job_id"], "-o", "NNodes,State"], capture_output=True, text=True
    ).stdout.split()
    assert accounting[:2] == ["2", "COMPLETED"]
    assert_no_run_processes()


@pytest.mark.parametrize(
    ("account", "message"),
    [("no-such-account", "no-such-account"), ("", "needs a Slurm project account")],
    ids=["unknown-account", "no-account"],
)
def test_a_bad_account_is_a_clear_error_and_nothing_is_submitted(
    slurm_workdir: Path, tmp_path: Path, account: str, message: str
) -> None:
    config = study_file(tmp_path, "only_datasets: [gsm8k]\noverrides:\n  selection.gsm8k: 2\n")
    start = slurm_now()
    env = {"RLVR_SLURM_ACCOUNT": account, "SLURM_ACCOUNT": "", "SBATCH_ACCOUNT": ""}
    # A real invocation, not a dry run: only the cluster itself can say that nothing was submitted.
    result = snakemake(slurm_workdir, *PROFILES, "--configfile", config, env=env, check=False, timeout=600)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert not (slurm_workdir / "results" / "runs").exists()
    assert slurm_jobs_from(slurm_workdir) == []
    assert jobs_since(start, slurm_workdir) == []


def test_a_study_over_its_budget_submits_nothing_and_says_why(slurm_workdir: Path, tmp_path: Path) -> None:
    config = study_file(
        tmp_path, "only_datasets: [gsm8k]\noverrides:\n  selection.gsm8k: 2\nbudget:\n  node_hours: 0.001\n"
    )
    start = slurm_now()
    # A real invocation, not a dry run: only the cluster itself can say that nothing was submitted.
    env = {"RLVR_SLURM_ACCOUNT": ACCOUNT}
    result = snakemake(slurm_workdir, *PROFILES, "--configfile", config, env=env, check=False, timeout=600)
    assert result.returncode != 0
    message = result.stdout + result.stderr
    assert re.search(r"budget\.node_hours is 0\.001, but the study needs [0-9.]+ node-hours", message), message
    assert re.search(r"gsm8k-n2-p4-[0-9a-f]{10} \(2 nodes\) [0-9.]+", message), message
    assert not (slurm_workdir / "results" / "runs").exists()
    assert slurm_jobs_from(slurm_workdir) == []
    assert jobs_since(start, slurm_workdir) == []


def _start(slurm_workdir: Path, config: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*SLURM_SNAKEMAKE, *PROFILES, "--configfile", config, *extra],
        cwd=slurm_workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "RLVR_SLURM_ACCOUNT": ACCOUNT, **STANDIN, "RLVR_STANDIN_STEP_SECONDS": "1"},
    )


def _wait_for_step(slurm_workdir: Path, process: subprocess.Popen, step: int, timeout: float = 900) -> None:
    runs = slurm_workdir / "results" / "runs"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = list(runs.glob(".staging-*/console.log")) if runs.exists() else []
        if logs and f"step:{step} " in logs[0].read_text(errors="replace"):
            return
        if process.poll() is not None:
            raise AssertionError(
                f"snakemake exited ({process.returncode}) before a run reached step {step}:\n"
                f"{process.stdout.read()[-3000:]}"
            )
        time.sleep(1)
    raise AssertionError(f"no run reached step {step} in {timeout:.0f} s")


LONG_RUN = (
    "only_datasets: [gsm8k]\noverrides:\n  selection.gsm8k: 2\n  algorithm.steps: 200\n"
    "  scaling.weak_nodes: [1]\n  scaling.strong_nodes: [1]\n  scaling.strong_reference_nodes: 1\n"
)


def test_scancel_midway_is_reported_keeps_logs_and_is_redone_alone(slurm_workdir: Path, tmp_path: Path) -> None:
    config = study_file(tmp_path, LONG_RUN)
    process = _start(slurm_workdir, config)
    _wait_for_step(slurm_workdir, process, 2)
    job_ids = [job["id"] for job in slurm_jobs_from(slurm_workdir)]
    assert len(job_ids) == 1
    # The site's RLVR_SLURM_JOB: ${SLURM_JOB_ID} reached the run's raylets expanded (through `ray
    # start`'s environment, not command.sh's shell). That verl's Ray workers inherit it from them is
    # checked on the real trainer in tests/test_apptainer.py.
    processes = token_processes()
    raylets = [pid for pid, command in processes if "/raylet/raylet" in command]
    assert raylets, f"no raylet of the run was found: {processes}"
    for pid in raylets:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert [e for e in environ if e.startswith(b"RLVR_SLURM_JOB=")] == [f"RLVR_SLURM_JOB={job_ids[0]}".encode()]
    subprocess.run(["scancel", job_ids[0]], check=True)
    output, _ = process.communicate(timeout=600)
    assert process.returncode != 0 and "Error in rule run" in output
    failed = filed_failures(slurm_workdir)
    assert len(failed) == 1
    job = json.loads((failed[0] / "job.json").read_text())
    assert job["status"] in ("terminated", "failed") and job["slurm_job_id"] == job_ids[0]
    assert (failed[0] / "console.log").stat().st_size > 0
    our_jobs_gone(slurm_workdir)
    assert_no_run_processes()
    plan = snakemake(slurm_workdir, *PROFILES, "--configfile", config, "-n", env={"RLVR_SLURM_ACCOUNT": ACCOUNT})
    assert plan.stdout.count("rule run:") == 1


@pytest.mark.mostly_waiting  # on Slurm to see the limit passed, then on its kill
def test_a_run_over_its_time_limit_is_marked_failed(slurm_workdir: Path, tmp_path: Path) -> None:
    # A run that cannot finish inside its limit on any host: 100,000 steps of 1 s against 1 minute.
    steps = 100_000
    # The estimate says it fits (a plan over the partition's walltime stops before submitting).
    config = study_file(
        tmp_path,
        LONG_RUN.replace("algorithm.steps: 200", f"algorithm.steps: {steps}")
        + "  datasets.gsm8k.estimate.seconds_per_trajectory: 0.00001\n",
    )
    process = _start(slurm_workdir, config, "--set-resources", "run:runtime=1")
    output, _ = process.communicate(timeout=900)
    assert process.returncode != 0 and "Error in rule run" in output
    failed = filed_failures(slurm_workdir)
    assert len(failed) == 1
    job = json.loads((failed[0] / "job.json").read_text())
    assert job["status"] == "terminated"
    # Killed by the limit while still running: Slurm says TIMEOUT after at least the minute, and the
    # trainer had started its steps but was far from the last one.
    state, elapsed, limit = (
        subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", job["slurm_job_id"], "-o", "State,ElapsedRaw,TimelimitRaw"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split("|")
    )
    assert state == "TIMEOUT" and limit == "1" and int(elapsed) >= 60, (state, elapsed, limit)
    console = (failed[0] / "console.log").read_text(errors="replace")
    # In its training loop, stopped far from its last step.
    assert "ready to fit" in console, console[-2000:]
    reached = [int(m) for m in re.findall(r"step:(\d+) ", console)]
    assert not reached or max(reached) < steps, reached[-3:]
    # Slurm's SIGTERM reached the run's Ray, which stopped without draining its node first: Ray 2.60
    # drains for 30 s unless told not to (ray_cluster.RAY_TEARDOWN_ENV), and the run was filed 30 s late.
    ray_node = (failed[0] / "ray" / "ray-n1.log").read_text(errors="replace")
    assert "Ray runtime started" in ray_node and "Draining for up to" not in ray_node, ray_node[-2000:]
    our_jobs_gone(slurm_workdir)
    assert_no_run_processes()


@pytest.mark.mostly_waiting  # a pending job's reason
def test_nodes_down_the_job_waits_with_a_reason_and_the_workflow_does_not_hang(
    slurm_workdir: Path, tmp_path: Path
) -> None:
    config = study_file(tmp_path, LONG_RUN.replace("algorithm.steps: 200", "algorithm.steps: 3"))
    subprocess.run(["scontrol", "update", "nodename=ALL", "state=down", "reason=rlvr-test"], check=True)
    try:
        process = _start(slurm_workdir, config)
        # Data and model are prepared locally first; then the run is submitted and pends. Slurm gives
        # the reason "None" until its scheduler has looked at the job, so wait for a real one.
        deadline = time.monotonic() + 600
        reason = ""
        while time.monotonic() < deadline and process.poll() is None:
            reason = " ".join(job["reason"] for job in slurm_jobs_from(slurm_workdir, "-t", "PD"))
            if reason and reason != "None":
                break
            time.sleep(2)
        assert process.poll() is None, f"the workflow ended before its run was queued:\n{process.stdout.read()}"
        assert "DOWN" in reason or "ReqNodeNotAvail" in reason, f"pending reason: {reason!r}"
        time.sleep(10)
        assert process.poll() is None  # waiting, while Slurm says why
        subprocess.run(["scancel", *[job["id"] for job in slurm_jobs_from(slurm_workdir)]], check=True)
        output, _ = process.communicate(timeout=300)
        assert process.returncode != 0, output[-3000:]  # cancelled while pending: reported, not hung
        # The first job to wait is the preflight, ahead of every run.
        assert "Error in rule preflight" in output, output[-3000:]
    finally:
        subprocess.run(["scontrol", "update", "nodename=ALL", "state=resume"], check=False)
        our_jobs_gone(slurm_workdir)
    assert not (slurm_workdir / "results" / "runs").exists() or not any((slurm_workdir / "results" / "runs").iterdir())


# Run in a two-node job: the ci-slurm site as if its collectives had to travel over Slingshot.
PLANTED_FABRIC = """
import dataclasses, json, os, sys
from pathlib import Path
from rlvr_scaling.execution.preflight.checks import two_node_checks
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.sections import Fabric

study = load_study(site="ci-slurm")
planted = Fabric.from_dict({**study.site.fabric.to_dict(), "transport": "ofi-cxi"})
study = dataclasses.replace(study, site=dataclasses.replace(study.site, fabric=planted))
root = Path(sys.argv[1])
ray, collective, problems = two_node_checks(study, root, dict(os.environ), root / "results" / "preflight" / "ray")
Path(sys.argv[2]).write_text(json.dumps({"ray": ray, "collective": collective, "problems": problems}))
"""


def test_a_preflight_collective_over_another_transport_than_the_sites_fails_in_one_line(
    slurm_workdir: Path, tmp_path: Path
) -> None:
    """Planted: the site expects ofi-cxi. The preflight's two-node check runs for real in a two-node
    Slurm job (the one-step launcher, Ray across both nodes, one Gloo rank per node, a new group's
    all-reduce); Gloo's ranks connect over TCP, so it fails in one line naming both transports."""
    script, verdict = tmp_path / "planted.py", tmp_path / "verdict.json"
    script.write_text(PLANTED_FABRIC)
    submitted = subprocess.run(
        [
            "sbatch",
            "--parsable",
            f"--account={ACCOUNT}",
            "--partition=standard-g",
            "--nodes=2",
            "--ntasks-per-node=1",
            "--cpus-per-task=2",
            "--gpus-per-node=1",
            "--time=10",
            f"--chdir={slurm_workdir}",
            f"--output={tmp_path / 'job.log'}",
            f"--wrap={sys.executable} {script} {slurm_workdir} {verdict}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    job_id = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 600
    while not verdict.exists() and time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True).stdout
        if not state.strip() and not verdict.exists():
            break  # the job ended without a verdict: its log says why
        time.sleep(1)
    log = (tmp_path / "job.log").read_text() if (tmp_path / "job.log").exists() else ""
    assert verdict.exists(), log[-3000:]
    found = json.loads(verdict.read_text())
    assert found["ray"]["formed"] is True and len(found["ray"]["node_list"]) == 2
    collective = found["collective"]
    assert collective["finished"] is True and collective["sums_right"] is True
    nodes = found["ray"]["node_list"]
    assert found["problems"] == [
        f"the all-reduce across nodes {', '.join(nodes)}: collectives over "
        f"{', '.join(f'tcp on {node}' for node in sorted(nodes))}; the site expects ofi-cxi "
        "(fabric.transport): not a measurement of the site's scaling"
    ]
    assert_no_run_processes()
