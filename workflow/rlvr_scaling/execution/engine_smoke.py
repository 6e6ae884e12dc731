"""The preflight's engine smoke: the site's real trainer configuration, run for a few steps on one
node before any run is submitted, so that the engines the study measures (vLLM generation and
Megatron training on LUMI, the CPU engine locally) are known to start, generate, train and sync
weights inside the image, and a failure costs minutes of one node instead of the study's first jobs.

It runs the plan's smallest one-node run (shortest responses, fewest prompts; a study of multi-node
runs only: its smallest run, on the preflight's nodes) with its own engines,
parallelism, model and data, for `preflight.engine_smoke_steps` steps, through the same launcher and
command.sh as a run, in results/preflight/<site>-engine-smoke/ (replaced by the next preflight).
Not a tiny random model of the study's architecture: the study's own model, so what is proven is
exactly what the runs will load (on LUMI: minutes of one node for Qwen3-8B).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.execution.engine_record import RECORD_DIR_VAR, engine_events, sleep_freed_gb
from rlvr_scaling.execution.launchers import Started, launcher_for
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, new_token
from rlvr_scaling.execution.run_records import render_command, trainer_module
from rlvr_scaling.execution.watchdog import Guard
from rlvr_scaling.measured.metrics import MEMORY_KEYS, PHASES, read_steps
from rlvr_scaling.measured.metrics_file import is_positive_finite
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run

STEP_ARGS = ("trainer.total_training_steps=", "trainer.total_epochs=", "trainer.experiment_name=")
ERROR_LINE = re.compile(r"\b\w*(Error|Exception)\b.*")


def smoke_run(plan: list[Run], steps: int, max_nodes: int = 1) -> Run | None:
    """The plan's smallest one-node run, cut to `steps` steps; a study without one-node runs (a
    two-node study) smokes its smallest run on the preflight's nodes (`max_nodes`); None if there is
    no run it can take."""
    runs = [run for run in plan if run.verl_args]
    candidates = [run for run in runs if run.nodes == 1] or [run for run in runs if run.nodes <= max_nodes]
    if not candidates or steps <= 0:
        return None
    run = min(candidates, key=lambda r: (r.nodes, r.max_response_length, r.prompts, r.run_id))
    name = f"{run.run_id}-engine-smoke"
    args = [arg for arg in run.verl_args if not arg.startswith(STEP_ARGS)]
    args += [
        f"trainer.total_training_steps={steps}",
        f"trainer.total_epochs={steps}",
        f"trainer.experiment_name={name}",
    ]
    return dataclasses.replace(run, run_id=name, steps=steps, warmup_steps=0, verl_args=args, adaptive_steps=None)


def folder_of(study: Study, root: Path) -> Path:
    return paths.results_dir(root) / "preflight" / f"{study.site_name}-engine-smoke"


def _error_of(console: Path) -> str:
    """The last line of the log that names an error (verl's, Ray's or Python's), else its last line."""
    if not console.exists():
        return "no console output"
    lines = [line.strip() for line in console.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if ERROR_LINE.search(line)]
    return (errors or lines or ["no console output"])[-1][:500]


def no_smoke_reason(study: Study) -> str:
    return (
        f"site '{study.site_name}' runs no engine smoke (site engine_smoke: false): a smoke protects an expensive "
        "allocation, and here the first run costs what a smoke costs and proves more (the same trainer, "
        "engines and data, for all its steps)"
    )


def engines_of(study: Study) -> str:
    parallel = study.config.parallel
    engine = "the CPU engine" if study.site.cpu_engine else f"{parallel.rollout.engine} + {parallel.training.engine}"
    return f"{engine} ({trainer_module()})"


def run_smoke(
    study: Study, plan: list[Run], root: Path, env: dict[str, str], timeout_s: float, max_nodes: int = 1
) -> tuple[dict, list[str]]:
    """Run it; the record for the preflight's `engine_smoke`, and the problems (none: it passed)."""
    from rlvr_scaling.execution.launch import execute  # launch imports the preflight's neighbours

    steps_wanted = study.config.preflight.engine_smoke_steps
    if not study.site.engine_smoke and steps_wanted > 0:
        return {"ran": False, "reason": no_smoke_reason(study)}, []
    run = smoke_run(plan, steps_wanted, max_nodes)
    if run is None:
        reason = (
            "preflight.engine_smoke_steps is 0"
            if steps_wanted <= 0
            else f"the plan has no run of at most {max_nodes} node(s), the preflight's"
        )
        return {"ran": False, "reason": reason}, []
    folder = folder_of(study, root)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # Ray ports of its own in the job: the preflight's two-node check has just used the first two.
    launcher = launcher_for(study, root, port_offset=2)
    command = folder / "command.sh"
    command.write_text(render_command(study, run, root, launcher.verl_args()))
    token = new_token()
    smoke_env = {**env, TOKEN_VAR: token, RECORD_DIR_VAR: str(folder / "engine")}
    job: dict[str, Any] = {}

    def before() -> Started | None:
        return launcher.start(run, folder / "ray", smoke_env, job)

    began = time.monotonic()
    # As a run's: a guard the smoke's processes (Ray's daemons, verl's actors, in sessions of their
    # own) cannot outlive, should the preflight be killed (SIGKILL included) while it runs.
    guard = Guard(token, None, None)
    done = False
    try:
        code, status = execute(command, folder / "console.log", smoke_env, token, timeout_s, before)
        done = True
    finally:
        guard.release(done=done)
    record = _smoke_record(study, run, folder, steps_wanted, status, code, time.monotonic() - began)
    timed = record["step_seconds"]
    if code == 0 and len(timed) >= steps_wanted:
        return record, []
    record["error"] = _error_of(folder / "console.log")
    return record, [
        f"the engine smoke ({engines_of(study)}, {run.dataset} on {run.nodes} node(s)) failed: {status}, "
        f"exit {code}, "
        f"{len(timed)} of {steps_wanted} steps; {record['error']} (log: {folder / 'console.log'})"
    ]


def _smoke_record(
    study: Study, run: Run, folder: Path, steps_wanted: int, status: str, code: int | None, seconds: float
) -> dict[str, Any]:
    """What the smoke measured: its steps' and phases' times, peak memory, and the engine's own records
    (whether the rollout's sleep freed its share, each GPU worker's CPU binding)."""
    metrics = folder / "metrics.jsonl"
    measured = read_steps(metrics)[0] if metrics.exists() else []
    timed = [step for step in measured if is_positive_finite(step.get("timing_s/step"))]
    memory = [float(step[key]) for step in measured for key in MEMORY_KEYS if is_positive_finite(step.get(key))]
    record = {
        "ran": True,
        "of_run": run.run_id.removesuffix("-engine-smoke"),
        "dataset": run.dataset,
        "nodes": run.nodes,
        "prompts": run.prompts,
        "engines": engines_of(study),
        "steps_asked": steps_wanted,
        "status": status,
        "exit_status": code,
        "seconds": round(seconds, 1),
        "step_seconds": [float(step["timing_s/step"]) for step in timed],
        "phase_seconds": [
            {phase: step[f"timing_s/{phase}"] for phase in PHASES if is_positive_finite(step.get(f"timing_s/{phase}"))}
            for step in timed
        ],
        "peak_memory_gb": max(memory) if memory else None,
        "folder": str(folder),
    }
    # Whether the rollout's sleep frees its share on this site (engine_options.sleep_mode), as the
    # engine's own device API saw it; and each GPU worker's CPU binding.
    engine = engine_events(folder / "engine")
    record.update(engine, sleep_freed_gb=sleep_freed_gb(engine["rollout_memory"]))
    return record
