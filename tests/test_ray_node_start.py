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
    command = cluster.step_command(wait_seconds=600)
    # One job step over both nodes, one task each (on Slingshot only a multi-node step gets a VNI,
    # and the processes of one step share it): the head's node too, not the batch step.
    at = command.index(NODE_START)
    assert command[:at] == [
        "srun",
        "--jobid=7",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--nodelist=n1,n2",
        "--cpus-per-task=56",
        "--gpus-per-node=8",
        "--overlap",
        "--kill-on-bad-exit=0",
        *cluster.python,
        "-c",
    ]
    assert command[at + 1 : at + 4] == ["step", "hsn0", "56"]
    plan = json.loads(command[at + 4])
    assert plan["unset"] == ["ROCR_VISIBLE_DEVICES"] and plan["node_var"] == "RLVR_NODE_NAME"
    head, worker = plan["nodes"]["n1"], plan["nodes"]["n2"]
    assert head["head_address"] is None and "--head" in head["args"] and "--port=6379" in head["args"]
    assert worker["head_address"] == "10.0.0.1:6379" and "--address=10.0.0.1:6379" in worker["args"]
    assert worker["log"] == str(tmp_path / "ray-n2.log")


def test_a_task_of_the_step_takes_its_nodes_part_waits_for_the_head_and_logs_to_its_file(tmp_path: Path) -> None:
    """The task on n2 finds its part by SLURMD_NODENAME, unsets what Ray owns, names its node for
    Ray's processes, waits for the head's port and becomes Ray's CLI (a stand-in that reports)."""
    package = tmp_path / "ray" / "scripts"
    package.mkdir(parents=True)
    (tmp_path / "ray" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    report = (
        "import json, os, sys\n"
        "print(json.dumps([sys.argv[1:], os.environ.get('RLVR_NODE_NAME'), 'ROCR_VISIBLE_DEVICES' in os.environ]))\n"
    )
    (package / "scripts.py").write_text(report)
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"127.0.0.1:{head.getsockname()[1]}"
        plan = {
            "nodes": {
                "n1": {"args": ["start", "--head"], "log": str(tmp_path / "n1.log"), "head_address": None},
                "n2": {
                    "args": ["start", f"--address={address}"],
                    "log": str(tmp_path / "n2.log"),
                    "head_address": address,
                },
            },
            "unset": ["ROCR_VISIBLE_DEVICES"],
            "node_var": "RLVR_NODE_NAME",
            "wait_seconds": 30,
        }
        env = {**os.environ, "PYTHONPATH": str(tmp_path), "SLURMD_NODENAME": "n2", "ROCR_VISIBLE_DEVICES": "0"}
        command = [sys.executable, "-c", NODE_START, "step", "lo", "1", json.dumps(plan)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, (tmp_path / "n2.log").read_text()
    assert result.stdout == ""  # all of it in the node's own log
    logged = json.loads((tmp_path / "n2.log").read_text())
    assert logged == [["start", f"--address={address}", "--node-ip-address=127.0.0.1"], "n2", False]
    assert not (tmp_path / "n1.log").exists()


def test_a_task_on_a_node_outside_the_plan_is_refused_by_name(tmp_path: Path) -> None:
    plan = {"nodes": {"n1": {}}, "unset": [], "node_var": "RLVR_NODE_NAME", "wait_seconds": 1}
    env = {**os.environ, "SLURMD_NODENAME": "n9"}
    command = [sys.executable, "-c", NODE_START, "step", "", "1", json.dumps(plan)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode != 0 and "'n9' (SLURMD_NODENAME) is not one of ['n1']" in result.stderr
