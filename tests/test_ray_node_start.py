"""What runs on every node before `ray start` (ray_cluster.NODE_START): the address on the site's
network interface, and the refusal of a job step bound to fewer CPUs than the site's nodes have.
The Slurm test checks the same on a real two-node cluster (test_slurm.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution.ray_cluster import NODE_START, RayCluster, local_node_ip


def test_the_address_is_the_named_interfaces() -> None:
    assert local_node_ip([sys.executable], dict(os.environ), "lo") == "127.0.0.1"


def test_an_interface_the_node_lacks_is_named_with_the_setting() -> None:
    with pytest.raises(StudyError) as caught:
        local_node_ip([sys.executable], dict(os.environ), "nohsn9")
    message = str(caught.value)
    assert "'nohsn9'" in message and "launch.node_interface" in message and socket.gethostname() in message
    assert "'lo'" in message  # the interfaces the node does have


def test_a_step_bound_to_fewer_cpus_than_the_site_says_is_refused() -> None:
    usable = len(os.sched_getaffinity(0))  # cores, or more where a core has two hardware threads
    command = [sys.executable, "-c", NODE_START, "start", "", str(usable + 1), "start", "--head"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert " cores (CPUs [" in result.stderr and f"the site has {usable + 1} per node" in result.stderr
    assert "hardware.cpus_per_node" in result.stderr


def test_a_step_with_the_sites_cpus_runs_rays_cli_with_the_interfaces_address(tmp_path: Path) -> None:
    # A stand-in `ray.scripts.scripts` that reports its arguments: what NODE_START hands to Ray.
    package = tmp_path / "ray" / "scripts"
    package.mkdir(parents=True)
    (tmp_path / "ray" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "scripts.py").write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    command = [sys.executable, "-c", NODE_START, "start", "lo", "1", "start", "--block"]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(tmp_path)}
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["start", "--block", "--node-ip-address=127.0.0.1"]


def test_every_node_starts_through_the_check_with_the_sites_interface(tmp_path: Path) -> None:
    cluster = RayCluster(
        job_id="7",
        nodes=["n1", "n2"],
        head_ip="10.0.0.1",
        port=6379,
        gpus_per_node=8,
        cpus_per_node=56,
        slurm_cpus_per_node=56,
        object_store_bytes=None,
        python=["singularity", "exec", "verl.sif", "/opt/venv/bin/python3"],
        env={},
        unset_environment=["ROCR_VISIBLE_DEVICES"],
        log_dir=tmp_path,
        interface="hsn0",
    )
    for index in (0, 1):
        command = cluster._ray_start(index)
        at = command.index(NODE_START)
        assert command[:at] == ["env", "--unset=ROCR_VISIBLE_DEVICES", *cluster.python, "-c"]
        assert command[at + 1 : at + 5] == ["start", "hsn0", "56", "start"]
    assert "--address=10.0.0.1:6379" in cluster._ray_start(1)
