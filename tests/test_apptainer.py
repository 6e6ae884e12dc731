"""The container path: the workflow builds the site's image with Apptainer, and the Slurm launcher runs
verl and every Ray process inside it, on two Slurm nodes. Markers `apptainer` and `slurm`; CI installs
Apptainer (tests/apptainer/install.sh) and sets RLVR_REQUIRE_APPTAINER=1."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from rlvr_scaling.execution.ray_cluster import local_node_ip
from rlvr_scaling.measured.metrics_file import read_metrics_jsonl
from rlvr_scaling.study.config import load_study

from .conftest import REPO, SLURM_TEST_ACCOUNT
from .test_local_study import check_run_directory
from .test_slurm import jobs_since, our_jobs_gone, slurm_now
from .workflow_helpers import SLURM_SNAKEMAKE, assert_no_run_processes, assert_one_step_vni, token_processes

pytestmark = [pytest.mark.apptainer, pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("slurm-cluster")]
PROFILES = ("--profile", "lumi", "--profile", "tests/slurm/profile", "--profile", "tests/apptainer/profile")
TWO_NODES = (
    "only_datasets: [gsm8k]\noverrides:\n  selection.gsm8k: 2\n  algorithm.steps: 3\n"
    "  scaling.weak_nodes: [2]\n  scaling.strong_nodes: [2]\n  scaling.strong_reference_nodes: 2\n"
)

ONE_NODE = TWO_NODES.replace("[2]", "[1]").replace("strong_reference_nodes: 2", "strong_reference_nodes: 1")


@pytest.fixture
def apptainer_workdir(slurm_workdir: Path) -> Path:
    (slurm_workdir / "tests" / "apptainer").symlink_to(REPO / "tests" / "apptainer")
    return slurm_workdir


def in_container(pid: int) -> bool:
    """Whether the process's root is an Apptainer image: every image holds /.singularity.d, the host's
    root does not. Not its environment: a process that retitles itself (Ray's ray::TaskRunnerV1.run)
    may write its title over the start of /proc/<pid>/environ, where Apptainer's variables were."""
    try:
        return Path(f"/proc/{pid}/root/.singularity.d").is_dir()
    except OSError:
        return False


def engine_process(command: str) -> bool:
    """verl, Ray's daemons and actors: what must run in the image (srun, the Apptainer starter and the
    launcher's own join probe run on the host)."""
    if command.startswith(("srun", "env ", "apptainer", "singularity", "bash", "Apptainer")):
        return False
    markers = ("/raylet/raylet", "/gcs/gcs_server", "-m verl.trainer.main_ppo", "-m ray.scripts.scripts")
    return command.startswith("ray::") or any(marker in command for marker in markers)


def test_a_two_node_run_inside_the_sites_apptainer_image(apptainer_workdir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "RLVR_SLURM_ACCOUNT": SLURM_TEST_ACCOUNT}
    results = apptainer_workdir / "results"
    # First an engine the image lacks (vLLM): the workflow builds the image, the preflight fails in
    # it naming the module, and no run is submitted.
    broken = tmp_path / "broken.yaml"
    broken.write_text(TWO_NODES + "  parallel.rollout.engine: vllm\n")
    start = slurm_now()
    failed = subprocess.run(
        [*SLURM_SNAKEMAKE, *PROFILES, "--configfile", str(broken)],
        cwd=apptainer_workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "Error in rule preflight" in output, output[-4000:]
    assert "rule run:" not in output and not (results / "runs").exists()
    log = (results / "logs" / "preflight" / "ci-apptainer.log").read_text()
    assert "module vllm does not import in the engine's Python" in log, log[-3000:]
    refused = json.loads((results / "preflight" / "ci-apptainer.failed.json").read_text())
    assert refused["engine"]["executable"] == "/opt/venv/bin/python3" and refused["engine"]["python"] == "3.11.2"
    assert refused["ray_two_nodes"]["formed"] is True and len(refused["ray_two_nodes"]["node_list"]) == 2
    jobs = jobs_since(start, apptainer_workdir)
    assert len(jobs) == 2, jobs  # the image build and the preflight, no run
    our_jobs_gone(apptainer_workdir)

    study = tmp_path / "study.yaml"
    # No engine smoke: it would be a second two-node start of the same trainer in the same image through
    # the same launcher and command.sh as the run. The smoke's real-trainer runs are the shared local
    # study's (host) and the SquashFS test's (inside the image); its choice of two nodes for a study
    # without a one-node run is tests/test_preflight.py's (smoke_run with max_nodes=2).
    study.write_text(TWO_NODES + "  preflight.engine_smoke_steps: 0\n")
    # Host variables that must not reach verl's processes (the image starts with a clean
    # environment): a library path, as `module load` leaves one, and a variable of nobody's.
    host_only = {"LD_LIBRARY_PATH": str(tmp_path / "host-libs"), "HOST_ONLY_MARKER": tmp_path.name}
    process = subprocess.Popen(
        [*SLURM_SNAKEMAKE, *PROFILES, "--configfile", str(study)],
        cwd=apptainer_workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, **host_only},
    )
    seen: dict[int, tuple[str, bool]] = {}  # every process of the run: its command, inside the image?
    executables: dict[int, str] = {}  # ...and the program it runs (as the process sees its files)
    tokens: dict[int, str] = {}  # ...and the run (or preflight) it belongs to
    slurm_job: dict[int, list[bytes]] = {}  # ...and the RLVR_SLURM_JOB it sees (the site's ${SLURM_JOB_ID})
    leaked: dict[int, list[bytes]] = {}  # ...and which of the host-only variables it has
    deadline = time.monotonic() + 1500
    while process.poll() is None and time.monotonic() < deadline:
        for pid, command in token_processes():
            # A Ray worker renames itself (ray::WorkerDict...) once it hosts an actor, and Apptainer's
            # starter becomes the contained process by exec: keep the latest of both.
            seen[pid] = (command, in_container(pid) or (pid in seen and seen[pid][1]))
            try:
                executables[pid] = os.readlink(f"/proc/{pid}/exe")
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                slurm_job[pid] = [e for e in environ if e.startswith(b"RLVR_SLURM_JOB=")]
                # Apptainer without --cleanenv would append its own libraries to the host's path.
                leaked[pid] = [
                    e
                    for e in environ
                    if any(e.startswith(f"{k}=".encode()) and v.encode() in e for k, v in host_only.items())
                ]
                tokens[pid] = next(e for e in environ if e.startswith(b"RLVR_RUN_TOKEN=")).decode()
            except (OSError, StopIteration):
                pass
        time.sleep(0.5)
    if process.poll() is None:
        process.kill()
    output = process.communicate()[0]
    assert process.returncode == 0, output[-4000:]

    image = results / "containers" / "ci-apptainer" / "verl.sif"
    inspect = subprocess.run(["apptainer", "inspect", "--labels", str(image)], capture_output=True, text=True)
    assert "org.rlvr-scaling.verl: 0.9.1" in inspect.stdout, inspect.stdout + inspect.stderr
    # The build's record: digests, and the packages inside, which every run's job.json repeats.
    record = json.loads((results / "containers" / "ci-apptainer" / "verl.json").read_text())
    assert record["image"]["sha256"] == hashlib.sha256(image.read_bytes()).hexdigest()
    assert record["packages"]["verl"] == "0.9.1" and record["packages"]["torch"] == "2.13.0+cpu"
    runs = list((results / "runs").iterdir())
    assert len(runs) == 1 and "-n2-" in runs[0].name
    check_run_directory(runs[0], steps=3)
    job = json.loads((runs[0] / "job.json").read_text())
    assert job["container"]["image"] == str(image.resolve())
    assert job["container"]["image"] == record["image"]["path"]
    assert job["container"]["sha256"] == record["image"]["sha256"]
    assert job["container"]["packages"]["ray"] == "2.60.0" and job["container"]["base_image"]["sha256"]
    assert len(job["node_list"]) == 2
    assert "apptainer exec" in (runs[0] / "command.sh").read_text()  # container.runtime
    # verl's worker of GPU 0 on each of the two nodes bound itself to the site's CPUs for GPU 0
    # (launch.gpu_cpu_affinity: CPU 1), in the image (engines.hooks through VERL_USE_EXTERNAL_MODULES).
    bound = job["engine"]["cpu_affinity"]
    assert len({b["pid"] for b in bound}) == len(bound) == 2
    assert all(b["gpu"] == "0" and b["cpus"] == [1] for b in bound), bound
    assert all(b["process"] == "WorkerDict" for b in bound), bound
    # Each node's collectives' transport, recorded in the image by verl's own workers (engines.hooks),
    # named per Slurm node: Gloo over TCP as the site's fabric says, so the run is a measurement.
    transports = {node: entry["transport"] for node, entry in job["fabric"]["nodes"].items()}
    assert transports == dict.fromkeys(job["node_list"], "tcp"), job["fabric"]
    assert job["fabric"]["valid_for_scaling"] is True, job["fabric"]
    # The step's Slingshot variables (the test cluster's TaskProlog stands in for Slurm's hpe_slingshot
    # plugin) crossed the image's clean environment into verl's ranks on both nodes: one step's VNI.
    assert_one_step_vni(job["fabric"]["nodes"], job["slurm_job_id"])

    # verl's workers, the generation servers and both raylets (one per Slurm node) ran in the image.
    # The run's Ray cluster: two raylets under its token, one per node. The preflight's two-node check
    # (it reruns after the refused first try; no trainer) lives a few seconds: the 0.5 s samples above
    # may miss one of its raylets on a loaded machine, so its two nodes are read from its record
    # (ray_two_nodes, below) and here it may show at most two, under a token of its own.
    raylet_count = Counter(tokens.get(pid, "?") for pid, (c, _) in seen.items() if "/raylet/raylet" in c)
    trainers = {tokens[pid]: c for pid, (c, _) in seen.items() if "-m verl.trainer.main_ppo" in c and pid in tokens}
    assert len(trainers) == 1 and max(raylet_count.values()) <= 2, (raylet_count, trainers)
    [run_token] = trainers
    assert raylet_count[run_token] == 2, raylet_count
    raylets = [c for pid, (c, _) in seen.items() if "/raylet/raylet" in c and tokens.get(pid) == run_token]
    preflight = json.loads((results / "preflight" / "ci-apptainer.json").read_text())
    assert preflight["engine_smoke"] == {"ran": False, "reason": "preflight.engine_smoke_steps is 0"}
    workers = [(c, inside) for c, inside in seen.values() if c.startswith(("ray::WorkerDict", "ray::HFGeneration"))]
    assert len(raylets) == 2, raylets
    assert len(workers) >= 2, sorted(c for c, _ in seen.values())
    # The site's RLVR_SLURM_JOB: ${SLURM_JOB_ID} reached verl's Ray workers expanded, through `ray
    # start`'s environment (not command.sh's shell). A worker that retitles itself
    # (ray::TaskRunnerV1.run) may write its title over the start of /proc/<pid>/environ: where the
    # variable is still readable it must be the run's job id, and it must be readable in some worker.
    expected = [f"RLVR_SLURM_JOB={job['slurm_job_id']}".encode()]
    run_workers = [pid for pid, (c, _) in seen.items() if c.startswith("ray::") and tokens.get(pid) == run_token]
    assert all(slurm_job.get(pid) in ([], expected, None) for pid in run_workers), {
        p: slurm_job.get(p) for p in run_workers
    }
    assert any(slurm_job.get(pid) == expected for pid in run_workers), "RLVR_SLURM_JOB was readable in no Ray worker"
    # ...while no process inside the image had the host-only variables (exec --cleanenv).
    inside_pids = [pid for pid, (c, inside) in seen.items() if inside and engine_process(c)]
    assert inside_pids and {pid: leaked[pid] for pid in inside_pids if leaked.get(pid)} == {}
    engine = [(c, inside) for c, inside in seen.values() if engine_process(c)]
    assert [c[:100] for c, inside in engine if not inside] == []
    # The image's own Python ran all of it, the join probe too: no process of the run used the host's
    # Python (a different patch release, which Ray would refuse to mix with the image's).
    host_python = (sys.prefix, sys.base_prefix, os.path.realpath(sys.executable))
    used_host = sorted({exe for exe in executables.values() if exe.startswith(host_python)})
    assert used_host == [], used_host
    pythons = {exe for pid, exe in executables.items() if "python" in os.path.basename(exe)}
    assert pythons and all(exe.startswith("/usr/bin/python3") for exe in pythons), pythons
    probe = [c for c, inside in seen.values() if "ray.nodes()" in c]
    assert probe, "the join probe was not seen"
    # Inside the image too, every node's Ray serves on the site's interface (launch.node_interface).
    interface = load_study(site="ci-apptainer").site.launch.node_interface
    pinned = local_node_ip([sys.executable], dict(os.environ), interface)
    assert job["ray_node_addresses"] == dict.fromkeys(job["node_list"], pinned)
    passed = json.loads((results / "preflight" / "ci-apptainer.json").read_text())
    assert passed["problems"] == [] and passed["image"]["image"]["sha256"] == record["image"]["sha256"]
    assert passed["ray_two_nodes"]["formed"] is True and len(set(passed["ray_two_nodes"]["node_list"])) == 2
    # The preflight's all-reduce across its two nodes, in the image, through the runs' launcher.
    collective = passed["collective"]
    assert collective["finished"] and collective["sums_right"] and collective["bus_bandwidth_gb_per_s"] > 0
    crossed = {node: entry["transport"] for node, entry in collective["transport"]["nodes"].items()}
    assert crossed == dict.fromkeys(collective["nodes"], "tcp") and len(crossed) == 2, collective
    assert_no_run_processes()


def test_verl_added_the_squashfs_way_runs_real_steps_from_the_squashfs(apptainer_workdir: Path, tmp_path: Path) -> None:
    """LUMI's other documented way (container.build: venv-squashfs): no image build; a venv made inside
    the base image, packed into SquashFS by the workflow and bound at /user-software for the runs.
    The workflow is asked for the preflight only: its engine smoke is the real trainer, two steps, from
    the SquashFS venv through the launcher and command.sh every run uses. What a study adds after it
    (runs on Slurm nodes inside an image, two nodes, their records) is the same launcher as the test
    above proves with the other build way; a run here would be a second start of the same trainer."""
    env = {**os.environ, "RLVR_SLURM_ACCOUNT": SLURM_TEST_ACCOUNT}
    study = tmp_path / "study.yaml"
    study.write_text(ONE_NODE)
    site = "ci-apptainer-squashfs"
    result = subprocess.run(
        [
            *SLURM_SNAKEMAKE,
            f"results/preflight/{site}.json",  # first: --config takes every word after it
            *PROFILES,
            "--configfile",
            str(study),
            "--config",
            f"site={site}",
        ],
        cwd=apptainer_workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    results = apptainer_workdir / "results"
    image = results / "containers" / site / "verl.sqsh"
    record = json.loads((results / "containers" / site / "verl.json").read_text())
    assert (
        record["build"] == "venv-squashfs"
        and record["image"]["sha256"] == hashlib.sha256(image.read_bytes()).hexdigest()
    )
    # verl and Ray from the SquashFS; torch still the base image's own (the lock pins the same version,
    # so the SquashFS's listing tells: no torch in it).
    assert record["packages"]["verl"] == "0.9.1" and record["packages"]["torch"] == "2.13.0+cpu"
    listing = subprocess.run(["unsquashfs", "-l", str(image)], capture_output=True, text=True, check=True).stdout
    assert "/site-packages/verl/" in listing and "/site-packages/torch/" not in listing
    passed = json.loads((results / "preflight" / f"{site}.json").read_text())
    assert passed["problems"] == [] and passed["engine"]["executable"] == "/user-software/venv/bin/python3"
    assert passed["engine"]["modules"]["verl.trainer.main_ppo"] == "ok"
    assert not (results / "runs").exists()  # the preflight only
    # The engine smoke: two real steps of the study's one-node run, inside the image, from the SquashFS.
    smoke = passed["engine_smoke"]
    assert smoke["status"] == "succeeded" and len(smoke["step_seconds"]) == 2 and smoke["nodes"] == 1
    assert smoke["engines"] == "the CPU engine (verl.trainer.main_ppo)" and smoke["exit_status"] == 0
    assert all(phases.get("gen", 0) > 0 and phases.get("update_actor", 0) > 0 for phases in smoke["phase_seconds"])
    # The rollout's sleep and wake, recorded by the engine hooks in verl's own processes inside the
    # image; on CPU no device memory to read, so no figure of what sleep freed.
    assert {e["event"] for e in smoke["rollout_memory"]} == {"sleep", "wake_up"} and smoke["sleep_freed_gb"] is None
    folder = apptainer_workdir / smoke["folder"]  # relative to the study folder
    records, problems = read_metrics_jsonl(folder / "metrics.jsonl")
    assert not problems and [r["step"] for r in records] == [1, 2]
    command = (folder / "command.sh").read_text()
    assert (
        f"{image.resolve()}:/user-software:ro,image-src=/" in command and "/user-software/venv/bin/python3" in command
    )
    assert "-m verl.trainer.main_ppo" in command
    our_jobs_gone(apptainer_workdir)
    assert_no_run_processes()
