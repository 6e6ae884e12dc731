"""Running one run of the plan: a self-describing run directory, moved into place only on success.

Layout written for every run (results/runs/<run_id>/ on success, results/failed/<run_id>/<stamp>/
otherwise): spec.json, command.sh, console.log, metrics.jsonl, job.json.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.analysis.metrics_file import measurement_problems, read_metrics_jsonl
from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution.failed_runs import (
    LAUNCHER_FILE,
    TOKEN_FILE,
    failed_dir,
    file_failed,
    now,
    recover_leftovers,
    staging_name,
    write_launcher_identity,
)
from rlvr_scaling.execution.outcome import lands_in_runs, memory_evidence
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, end_processes, new_token
from rlvr_scaling.execution.provenance import git_commit, host_facts, package_versions
from rlvr_scaling.execution.run_environment import environment_templates, expanded_environment, shell_export
from rlvr_scaling.execution.watchdog import Guard
from rlvr_scaling.fsutil import write_json
from rlvr_scaling.inputs.container import (
    exec_prefix,
    image_path,
    module_environment,
    python_command,
    record_path,
    require_runtime,
)
from rlvr_scaling.inputs.container_build import base_changed_since_build, image_facts
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run
from rlvr_scaling.study.verl_args import CPU_ENGINE_RAY_CPUS

LOGGER_ARG = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"


class RunFailed(Exception):
    """The run ran and failed; its evidence is kept under results/failed/."""


def render_command(study: Study, run: Run, root: Path) -> str:
    """command.sh: the exact command, runnable by hand from any copy of the run directory."""
    assert run.verl_args is not None
    # Hydra's own record of the resolved config lands in hydra/.hydra/ of the run directory.
    args = [*run.verl_args, "hydra.run.dir=hydra"]
    if study.site["launch"]["kind"] == "local":
        # Start a private Ray instance: never join a cluster someone else started on this host.
        args.append("+ray_kwargs.ray_init.address=local")
    lines = [
        "#!/usr/bin/env bash",
        f"# Run {run.run_id} ({'+'.join(run.series)}) of study {study.config['study']['name']} "
        f"on site {study.site_name}.",
        "# Written by `rlvr-scaling launch`; runnable by hand: bash command.sh (writes metrics.jsonl beside it).",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
    ]
    for key, value in sorted(environment_templates(study).items()):
        lines.append(shell_export(key, value))
    lines.append('export VERL_FILE_LOGGER_PATH="$PWD/metrics.jsonl"')
    lines.append(f"exec {shlex.join(python_command(study, root))} -m verl.trainer.main_ppo \\")
    lines += [f"  {shlex.quote(arg)} \\" for arg in args]
    lines.append(f'  "{LOGGER_ARG}=$VERL_FILE_LOGGER_PATH"')
    return "\n".join(lines) + "\n"


def spec_document(study: Study, run: Run) -> dict[str, Any]:
    return {
        "run": run.to_dict(),
        "study": study.config,
        "site": {k: v for k, v in study.site.items() if k != "study_overrides"},
        "software": package_versions(),
        "repository_commit": git_commit(),
    }


def check_inputs(study: Study, run: Run, root: Path, site_env: dict[str, str]) -> None:
    """Fail before anything starts when the inputs cannot serve this run."""
    manifest_path = paths.dataset_dir(root, study.site_name, run.dataset) / "manifest.json"
    if not manifest_path.exists():
        raise StudyError(f"dataset {run.dataset} is missing: {manifest_path} (run the data stage first)")
    rows = json.loads(manifest_path.read_text())["files"]["train"]["rows"]
    if run.prompts is not None and rows < run.prompts:
        raise StudyError(
            f"run {run.run_id} needs {run.prompts} prompts per step but {run.dataset} has only {rows} training rows"
        )
    model = paths.model_dir(root, study.site_name)
    if not (model / "config.json").exists():
        raise StudyError(f"model is missing: {model} (run the model stage first)")
    if study.site["container"]:
        # As the run's commands will see it: after the site's module commands (which may provide it).
        require_runtime(study, {**os.environ, **site_env})
        changed = base_changed_since_build(study, record_path(study, root))
        if changed:
            raise StudyError(changed)


def start_ray_cluster(
    study: Study, nodes_wanted: int, gpus_per_node: int, root: Path, log_dir: Path, env: dict[str, str], job: dict
) -> Any:
    """The Slurm launcher: a Ray cluster over the job's nodes, in the site's image; verl (or the
    preflight's probe) then joins it via RAY_ADDRESS, which this sets in `env`."""
    from rlvr_scaling.execution.ray_cluster import RayCluster, local_node_ip
    from rlvr_scaling.execution.slurm_nodes import job_nodes

    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        raise StudyError(f"site '{study.site_name}' launches inside a Slurm job, but SLURM_JOB_ID is not set")
    nodes = job_nodes(job_id)
    if len(nodes) != nodes_wanted:
        raise StudyError(f"{nodes_wanted} nodes are needed but Slurm job {job_id} has {nodes}")
    launch_site = study.site["launch"]
    engine_cpus = CPU_ENGINE_RAY_CPUS if study.site["engine"] == "verl-cpu" else study.site["hardware"]["cpus_per_node"]
    cluster = RayCluster(
        job_id=job_id,
        nodes=nodes,
        head_ip=local_node_ip(python_command(study, root), env, launch_site.get("node_interface")),
        # Jobs on one host (or one login node) must not share Ray's port.
        port=launch_site["ray_port"] + (int(job_id) % 400) * 5,
        gpus_per_node=gpus_per_node,
        cpus_per_node=engine_cpus,
        slurm_cpus_per_node=study.site["hardware"]["cpus_per_node"],
        # Fake nodes share one host's /dev/shm: keep the CPU engine's object stores small.
        object_store_bytes=2**30 if study.site["engine"] == "verl-cpu" else None,
        python=python_command(study, root),
        env=env,
        unset_environment=launch_site.get("unset_environment", []),
        log_dir=log_dir,
        interface=launch_site.get("node_interface"),
    )
    # Ray workers inherit the raylet's environment, not the driver's: the run's environment goes to
    # every `ray start`.
    env.update(expanded_environment(study, env))
    for name in launch_site.get("unset_environment", []):
        env.pop(name, None)
    job.update(node_list=nodes, ray_head=cluster.head_address)
    env["RAY_ADDRESS"] = cluster.head_address
    # Ray 2.60 authenticates with a token: one per run, handed to every node through srun's
    # environment, never written into the run directory.
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        cluster.start()
        cluster.wait(launch_site["join_timeout_seconds"])
    except BaseException:
        cluster.stop()
        raise
    job.update(ray_node_addresses=cluster.addresses)
    return cluster


def execute(
    command_file: Path, console: Path, env: dict[str, str], token: str, timeout_s: float | None, before: Any = None
) -> tuple[int, str]:
    """Run command.sh (after `before()`, e.g. forming the Ray cluster); on any exit, also a signal to
    us, end every process the run started."""
    status = "failed"
    received: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    cluster = None
    try:
        try:
            cluster = before() if before else None
        except KeyboardInterrupt:
            return 128 + (received[0] if received else signal.SIGINT), "terminated"
        except Exception as exc:  # the evidence goes into console.log; the run is marked failed
            with open(console, "a") as log:
                log.write(f"rlvr-scaling: the launcher failed before verl started: {exc!r}\n")
                log.write(traceback.format_exc())
            return -1, "launch failed"
        with open(console, "ab") as log:
            process = subprocess.Popen(
                ["bash", str(command_file)], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            try:
                code = process.wait(timeout=timeout_s)
                status = "succeeded" if code == 0 else "failed"
            except subprocess.TimeoutExpired:
                code, status = -1, "timed out"
            except KeyboardInterrupt:
                code = 128 + (received[0] if received else signal.SIGINT)
                status = "terminated"
    finally:
        if cluster is not None:
            cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        end_processes(token)
    return code, status


def launch(study: Study, run: Run, root: Path, timeout_s: float | None = None) -> Path:
    """Run `run`; return its directory under results/runs/ or raise RunFailed."""
    if run.run_id is None or run.verl_args is None:
        raise StudyError(f"run {run.dataset} n{run.nodes} waits for the sweep's selection: {run.pending}")
    final = paths.run_dir(root, run.run_id)
    if final.exists():
        raise StudyError(f"{final} exists already: runs are never rewritten in place (delete it to rerun)")
    # What the site's module commands set (LUMI: the AIF bindings), for the checks and the run.
    site_env = module_environment(study, dict(os.environ))
    check_inputs(study, run, root, site_env)
    expanded_environment(study, dict(os.environ))  # a ${NAME} the job lacks stops the run here
    for leftover in recover_leftovers(root, run.run_id):
        print(
            f"rlvr-scaling: an earlier launch of {run.run_id} did not finish; filed it in {leftover}", file=sys.stderr
        )
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    staging = final.parent / staging_name(run.run_id, stamp)
    failed = failed_dir(root, run.run_id, stamp)
    token = new_token()
    # The guard first: from the staging folder's first moment, no death of ours leaves it behind.
    guard = Guard(token, staging, failed)
    done = False  # the launch got through its own cleanup and filed the run
    try:
        staging.mkdir(parents=True)
        (staging / TOKEN_FILE).write_text(token + "\n")
        write_launcher_identity(staging)
        result = _launch_in(study, run, root, staging, final, failed, token, timeout_s, site_env)
        done = True
        return result
    except RunFailed:
        done = True
        raise
    except BaseException as exc:
        if staging.is_dir():
            note = f"The launcher stopped on an error of its own: {exc!r}"
            file_failed(staging, failed, note, status="launcher error")
        raise
    finally:
        # Only a launch that got through its own cleanup tells the guard it is done; otherwise the
        # guard ends whatever of the run is left (a second Ctrl-C during cleanup, an error).
        guard.release(done=done)


def _launch_in(
    study: Study,
    run: Run,
    root: Path,
    staging: Path,
    final: Path,
    failed: Path,
    token: str,
    timeout_s: float | None,
    site_env: dict[str, str],
) -> Path:
    """Everything between the staging folder's creation and its filing, under the guard."""
    assert run.run_id is not None
    write_json(staging / "spec.json", spec_document(study, run))
    command_file = staging / "command.sh"
    command_file.write_text(render_command(study, run, root))
    command_file.chmod(0o755)
    env = dict(os.environ, **{TOKEN_VAR: token})
    env.update(site_env)
    container = exec_prefix(study, root)
    job: dict[str, Any] = {
        "run_id": run.run_id,
        "start": now(),
        "nodes": run.nodes,
        "workers": run.nodes * run.gpus_per_node,
        "launcher": study.site["launch"]["kind"],
        # The image's digest, its base's, its labels and the packages inside it (the build's record).
        "container": {
            "image": str(image_path(study, root).resolve()) if container else None,
            "command": container,
            **(image_facts(record_path(study, root)) or {}),
        }
        if container
        else None,
        "environment": expanded_environment(study, env),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        **host_facts(),
        "versions": package_versions(),
    }
    write_json(staging / "job.json", job)
    started = time.monotonic()
    before = None
    if study.site["launch"]["kind"] == "ray-srun":

        def before() -> Any:
            cluster = start_ray_cluster(study, run.nodes, run.gpus_per_node, root, staging / "ray", env, job)
            write_json(staging / "job.json", job)
            return cluster

    code, status = execute(command_file, staging / "console.log", env, token, timeout_s, before)
    job.update(end=now(), seconds=round(time.monotonic() - started, 1), exit_status=code, status=status)
    problems: list[str] = []
    if status == "succeeded":
        metrics = staging / "metrics.jsonl"
        if not metrics.exists():
            problems = ["verl exited 0 but wrote no metrics.jsonl"]
        else:
            steps, read_problems = read_metrics_jsonl(metrics)
            problems = measurement_problems(steps, read_problems, run.steps)
        if problems:
            job["status"] = status = "invalid metrics"
    job["problems"] = problems
    job["memory_evidence"] = memory_evidence(staging / "console.log") if status != "succeeded" else None
    write_json(staging / "job.json", job)
    if lands_in_runs(run.series, status, job["memory_evidence"]):
        # Its processes are gone: the run directory holds only the run.
        (staging / TOKEN_FILE).unlink()
        (staging / LAUNCHER_FILE).unlink()
        staging.rename(final)
        if status != "succeeded":
            print(
                f"rlvr-scaling: sweep point {run.run_id} ran out of memory ({job['memory_evidence']}); recorded "
                f"as a memory-bound point in {final}",
                file=sys.stderr,
            )
        return final
    detail = "; ".join(problems) if problems else f"exit status {code}"
    failed = file_failed(staging, failed, f"run {run.run_id} {status} ({detail})")
    raise RunFailed(f"run {run.run_id} {status} ({detail}); its logs are in {failed}")
