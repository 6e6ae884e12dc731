"""What a run directory says about its run: spec.json (what was asked), command.sh (the exact command,
runnable by hand), job.json (where, when, in what, and how it ended)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.execution.failed_runs import now
from rlvr_scaling.execution.provenance import git_commit, host_facts, package_versions
from rlvr_scaling.execution.run_environment import environment_templates, recorded_environment, shell_export
from rlvr_scaling.inputs.container import exec_prefix, image_path, python_command, record_path
from rlvr_scaling.inputs.container_build import image_facts
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.model_shape import model_record
from rlvr_scaling.study.plan import Run

LOGGER_ARG = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"
TRAINER_MODULE = "verl.trainer.main_ppo"
# Tests of the workflow's own plumbing (a kill, a crash, a time limit, scancel, reruns, the sequential
# sweep) name a stand-in trainer here that behaves like verl's process tree (tests/standin_trainer.py),
# so they need not pay verl's start-up each time. Production never sets it: every run is verl's
# main_ppo. job.json records which trainer ran, so a stand-in run is told apart from a measurement by
# its record (the test suite drops the variable at its start, so only the tests that ask get one).
STANDIN_TRAINER_VAR = "RLVR_STANDIN_TRAINER"


def trainer_module() -> str:
    return os.environ.get(STANDIN_TRAINER_VAR) or TRAINER_MODULE


def render_command(study: Study, run: Run, root: Path, launcher_args: list[str]) -> str:
    """command.sh: the exact command, runnable by hand from any copy of the run directory."""
    # Hydra's own record of the resolved config lands in hydra/.hydra/ of the run directory.
    args = [*run.verl_args, "hydra.run.dir=hydra", *launcher_args]
    lines = [
        "#!/usr/bin/env bash",
        f"# Run {run.run_id} ({'+'.join(run.series)}) of study {study.name} on site {study.site_name}.",
        "# Written by `rlvr-scaling launch`; runnable by hand: bash command.sh (writes metrics.jsonl beside it).",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
    ]
    for key, value in sorted(environment_templates(study).items()):
        lines.append(shell_export(key, value))
    lines.append('export VERL_FILE_LOGGER_PATH="$PWD/metrics.jsonl"')
    lines.append(f"exec {shlex.join(python_command(study, root))} -m {shlex.quote(trainer_module())} \\")
    lines += [f"  {shlex.quote(arg)} \\" for arg in args]
    lines.append(f'  "{LOGGER_ARG}=$VERL_FILE_LOGGER_PATH"')
    return "\n".join(lines) + "\n"


def spec_document(study: Study, run: Run) -> dict[str, Any]:
    return {
        "run": run.to_dict(),
        "study": study.config.to_dict(),
        "site": study.site.recorded(),
        "software": package_versions(),
        "repository_commit": git_commit(),
    }


def job_record(study: Study, run: Run, root: Path, env: dict[str, str]) -> dict[str, Any]:
    """job.json as the run starts; the launcher and the run's end add to it."""
    container = exec_prefix(study, root)
    return {
        "run_id": run.run_id,
        "start": now(),
        "nodes": run.nodes,
        "workers": run.nodes * run.gpus_per_node,
        "launcher": study.site.launch.kind,
        "trainer": trainer_module(),
        # The image's digest, its base's, its labels and the packages inside it (the build's record).
        "container": {
            "image": str(image_path(study, root).resolve()),
            "command": container,
            **(image_facts(record_path(study, root)) or {}),
        }
        if container
        else None,
        "environment": recorded_environment(study, env),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        **host_facts(),
        "versions": package_versions(),
        # The shape the run's MFU is counted from (analysis.per_run.model_flops).
        "model": model_record(paths.model_dir(root, study.site_name, study.model_folder) / "config.json"),
    }
