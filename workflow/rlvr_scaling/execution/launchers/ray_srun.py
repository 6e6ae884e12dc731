"""The `ray-srun` launcher: a Ray cluster over the Slurm job's nodes (the head on the node where the
launcher runs, every node's Ray a task of one `srun` step, all in the site's image), which verl then
joins via RAY_ADDRESS."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution.ray_cluster import RAY_TEARDOWN_ENV, RayCluster, local_node_ip
from rlvr_scaling.execution.run_environment import expanded_environment, job_folders
from rlvr_scaling.execution.slurm_nodes import job_nodes
from rlvr_scaling.inputs.container import python_command
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run
from rlvr_scaling.study.verl_args import CPU_ENGINE_RAY_CPUS


class RaySrunLauncher:
    kind = "ray-srun"

    def __init__(self, study: Study, root: Path) -> None:
        self.study = study
        self.root = root
        self.port_offset = 0

    def verl_args(self) -> list[str]:
        return []

    def start(self, run: Run, log_dir: Path, env: dict[str, str], job: dict[str, Any]) -> RayCluster:
        return start_ray_cluster(
            self.study, run.nodes, run.gpus_per_node, self.root, log_dir, env, job, port_offset=self.port_offset
        )


def _job_nodes(study: Study, nodes_wanted: int) -> tuple[str, list[str]]:
    """This Slurm job's id and the nodes the cluster takes: a run's job has exactly its nodes; the
    preflight's two-node job runs its one-node engine smoke on the first (where the launcher runs,
    the Ray head)."""
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        raise StudyError(f"site '{study.site_name}' launches inside a Slurm job, but SLURM_JOB_ID is not set")
    nodes = job_nodes(job_id)
    if len(nodes) < nodes_wanted:
        raise StudyError(f"{nodes_wanted} nodes are needed but Slurm job {job_id} has {nodes}")
    return job_id, nodes[:nodes_wanted]


def start_ray_cluster(
    study: Study,
    nodes_wanted: int,
    gpus_per_node: int,
    root: Path,
    log_dir: Path,
    env: dict[str, str],
    job: dict,
    port_offset: int = 0,
) -> RayCluster:
    """A Ray cluster over the job's nodes, in the site's image; verl (or the preflight's probe) then
    joins it via RAY_ADDRESS, which this sets in `env`."""
    job_id, nodes = _job_nodes(study, nodes_wanted)
    site = study.site
    engine_cpus = CPU_ENGINE_RAY_CPUS if site.cpu_engine else site.hardware.cpus_per_node
    cluster = RayCluster(
        job_id=job_id,
        nodes=nodes,
        head_ip=local_node_ip(python_command(study, root), env, site.launch.node_interface),
        # Jobs on one host (or one login node) must not share Ray's port.
        # Five ports per job (a cluster takes two: GCS and the client server); a second cluster in
        # one job takes the next two (port_offset 2).
        port=site.launch.ray_port + (int(job_id) % 400) * 5 + port_offset,
        gpus_per_node=gpus_per_node,
        cpus_per_node=engine_cpus,
        slurm_cpus_per_node=site.hardware.cpus_per_node,
        # Fake nodes share one host's /dev/shm: keep the CPU engine's object stores small.
        object_store_bytes=2**30 if site.cpu_engine else None,
        python=python_command(study, root),
        env=env,
        unset_environment=site.launch.unset_environment,
        log_dir=log_dir,
        interface=site.launch.node_interface,
        # Short (Ray's socket paths must stay under 107 characters), per user, job and cluster.
        temp_dir=f"{site.launch.ray_temp_root}/rlvr-ray-{os.getuid()}-{job_id}-{port_offset}",
    )
    # Ray workers inherit the raylet's environment, not the driver's: the run's environment goes to
    # every `ray start`.
    env.update(expanded_environment(study, env))
    cluster.job_folders = job_folders(study, env)
    for name in site.launch.unset_environment:
        env.pop(name, None)
    job.update(
        node_list=nodes, ray_head=cluster.head_address, ray_temp_dir=cluster.temp_dir, job_folders=cluster.job_folders
    )
    env["RAY_ADDRESS"] = cluster.head_address
    # Ray 2.60 authenticates with a token: one per run, handed to every node through srun's
    # environment, never written into the run directory.
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    env.update(RAY_TEARDOWN_ENV)
    try:
        cluster.start(site.launch.join_timeout_seconds)
        cluster.wait(site.launch.join_timeout_seconds)
    except BaseException:
        cluster.stop()
        raise
    job.update(ray_node_addresses=cluster.addresses)
    return cluster
