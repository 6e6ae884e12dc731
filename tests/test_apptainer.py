"""The container path: the workflow builds the site's image with Apptainer, and the Slurm launcher runs
verl and every Ray process inside it, on two Slurm nodes. Markers `apptainer` and `slurm`; CI installs
Apptainer (tests/apptainer/install.sh) and sets RLVR_REQUIRE_APPTAINER=1."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import REPO, SLURM_TEST_ACCOUNT
from .test_local_study import check_run_directory
from .workflow_helpers import SNAKEMAKE, assert_no_run_processes, token_processes

pytestmark = [pytest.mark.apptainer, pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("slurm-cluster")]
PROFILES = ("--profile", "lumi", "--profile", "tests/slurm/profile", "--profile", "tests/apptainer/profile")
TWO_NODES = (
    "only_datasets: [gsm8k]\noverrides:\n  selection.gsm8k: 2\n  algorithm.steps: 3\n"
    "  scaling.weak_nodes: [2]\n  scaling.strong_nodes: [2]\n  scaling.strong_reference_nodes: 2\n"
)


@pytest.fixture
def apptainer_workdir(slurm_workdir: Path) -> Path:
    (slurm_workdir / "tests" / "apptainer").symlink_to(REPO / "tests" / "apptainer")
    return slurm_workdir


def in_container(pid: int) -> bool:
    """Apptainer marks every process it starts with APPTAINER_CONTAINER in its environment."""
    try:
        return b"\0APPTAINER_CONTAINER=" in b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def engine_process(command: str) -> bool:
    """verl, Ray's daemons and actors: what must run in the image (srun, the Apptainer starter and the
    launcher's own join probe run on the host)."""
    if command.startswith(("srun", "env ", "singularity", "bash", "Apptainer")):
        return False
    markers = ("/raylet/raylet", "/gcs/gcs_server", "-m verl.trainer.main_ppo", "-m ray.scripts.scripts")
    return command.startswith("ray::") or any(marker in command for marker in markers)


def test_a_two_node_run_inside_the_sites_apptainer_image(apptainer_workdir: Path, tmp_path: Path) -> None:
    study = tmp_path / "study.yaml"
    study.write_text(TWO_NODES)
    process = subprocess.Popen(
        [SNAKEMAKE, *PROFILES, "--configfile", str(study)],
        cwd=apptainer_workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "RLVR_SLURM_ACCOUNT": SLURM_TEST_ACCOUNT},
    )
    seen: dict[int, tuple[str, bool]] = {}  # every process of the run: its command, inside the image?
    deadline = time.monotonic() + 1500
    while process.poll() is None and time.monotonic() < deadline:
        for pid, command in token_processes():
            # A Ray worker renames itself (ray::WorkerDict...) once it hosts an actor, and Apptainer's
            # starter becomes the contained process by exec: keep the latest of both.
            seen[pid] = (command, in_container(pid) or (pid in seen and seen[pid][1]))
        time.sleep(0.5)
    if process.poll() is None:
        process.kill()
    output = process.communicate()[0]
    assert process.returncode == 0, output[-4000:]

    results = apptainer_workdir / "results"
    image = results / "containers" / "ci-apptainer" / "verl.sif"
    inspect = subprocess.run(["apptainer", "inspect", "--labels", str(image)], capture_output=True, text=True)
    assert "org.rlvr-scaling.verl: 0.9.1" in inspect.stdout, inspect.stdout + inspect.stderr
    runs = list((results / "runs").iterdir())
    assert len(runs) == 1 and "-n2-" in runs[0].name
    check_run_directory(runs[0], steps=3)
    job = json.loads((runs[0] / "job.json").read_text())
    assert job["container"]["image"] == str(image.resolve())
    assert len(job["node_list"]) == 2
    assert "singularity exec" in (runs[0] / "command.sh").read_text()

    # verl's workers, the generation servers and both raylets (one per Slurm node) ran in the image.
    raylets = [c for c, inside in seen.values() if "/raylet/raylet" in c]
    workers = [(c, inside) for c, inside in seen.values() if c.startswith(("ray::WorkerDict", "ray::HFGeneration"))]
    assert len(raylets) == 2, raylets
    assert len(workers) >= 2, sorted(c for c, _ in seen.values())
    engine = [(c, inside) for c, inside in seen.values() if engine_process(c)]
    assert [c[:100] for c, inside in engine if not inside] == []
    assert_no_run_processes()
