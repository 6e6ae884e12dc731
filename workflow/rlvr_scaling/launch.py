"""Running one run of the plan: a self-describing run directory, moved into place only on success.

Layout written for every run (results/runs/<run_id>/ on success, results/failed/<run_id>/<stamp>/
otherwise): spec.json, command.sh, console.log, metrics.jsonl, job.json.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from . import paths
from .config import Study
from .errors import StudyError
from .metrics_file import read_metrics_jsonl, step_problems
from .plan import Run
from .process_cleanup import TOKEN_VAR, end_processes
from .provenance import git_commit, host_facts, package_versions
from .verl_args import CPU_ENGINE_ENV

LOGGER_ARG = "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"


class RunFailed(Exception):
    """The run ran and failed; its evidence is kept under results/failed/."""


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def run_environment(study: Study) -> dict[str, str]:
    env = dict(study.site["environment"])
    if study.site["engine"] == "verl-cpu":
        env.update(CPU_ENGINE_ENV)
    return env


def render_command(study: Study, run: Run) -> str:
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
    for key, value in sorted(run_environment(study).items()):
        lines.append(f"export {key}={shlex.quote(value)}")
    lines.append('export VERL_FILE_LOGGER_PATH="$PWD/metrics.jsonl"')
    lines.append(f"exec {shlex.quote(sys.executable)} -m verl.trainer.main_ppo \\")
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


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1, default=str) + "\n")


def check_inputs(study: Study, run: Run, root: Path) -> None:
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


def execute(command_file: Path, console: Path, token: str, timeout_s: float | None) -> tuple[int, str]:
    """Run command.sh; on any exit (also a signal to us) end every process the run started."""
    env = dict(os.environ, **{TOKEN_VAR: token})
    status = "failed"
    received: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
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
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        end_processes(token)
    return code, status


def launch(study: Study, run: Run, root: Path, timeout_s: float | None = None) -> Path:
    """Run `run`; return its directory under results/runs/ or raise RunFailed."""
    if run.run_id is None or run.verl_args is None:
        raise StudyError(f"run {run.dataset} n{run.nodes} waits for the sweep's selection: {run.pending}")
    if study.site["launch"]["kind"] != "local":
        raise StudyError(
            f"site '{study.site_name}' needs the multi-node Ray launcher "
            f"(launch.kind {study.site['launch']['kind']!r}), which this version does not have yet; "
            "nothing was started"
        )
    final = paths.run_dir(root, run.run_id)
    if final.exists():
        raise StudyError(f"{final} exists already: runs are never rewritten in place (delete it to rerun)")
    check_inputs(study, run, root)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    staging = final.parent / f".staging-{run.run_id}-{stamp}-{os.getpid()}"
    staging.mkdir(parents=True)
    _write_json(staging / "spec.json", spec_document(study, run))
    command_file = staging / "command.sh"
    command_file.write_text(render_command(study, run))
    command_file.chmod(0o755)
    token = uuid.uuid4().hex
    job: dict[str, Any] = {
        "run_id": run.run_id,
        "start": now(),
        "nodes": run.nodes,
        "workers": run.nodes * run.gpus_per_node,
        "launcher": study.site["launch"]["kind"],
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        **host_facts(),
        "versions": package_versions(),
    }
    _write_json(staging / "job.json", job)
    started = time.monotonic()
    code, status = execute(command_file, staging / "console.log", token, timeout_s)
    job.update(end=now(), seconds=round(time.monotonic() - started, 1), exit_status=code, status=status)
    problems: list[str] = []
    if status == "succeeded":
        metrics = staging / "metrics.jsonl"
        if not metrics.exists():
            problems = ["verl exited 0 but wrote no metrics.jsonl"]
        else:
            steps, read_problems = read_metrics_jsonl(metrics)
            problems = read_problems + step_problems(steps, run.steps)
        if problems:
            job["status"] = status = "invalid metrics"
    job["problems"] = problems
    _write_json(staging / "job.json", job)
    if status == "succeeded":
        staging.rename(final)
        return final
    if run.series == ["sweep"] and status in ("failed", "invalid metrics"):
        # A sweep point that runs out of memory is a measurement of the memory bound, not a broken
        # study: it is kept as a failed point (no metrics) and the selection counts it as over the cap.
        staging.rename(final)
        print(
            f"rlvr-scaling: sweep point {run.run_id} {status}; recorded as a failed point in {final}", file=sys.stderr
        )
        return final
    failed = paths.results_dir(root) / "failed" / run.run_id / stamp
    failed.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(staging), failed)
    detail = "; ".join(problems) if problems else f"exit status {code}"
    raise RunFailed(f"run {run.run_id} {status} ({detail}); its logs are in {failed}")
