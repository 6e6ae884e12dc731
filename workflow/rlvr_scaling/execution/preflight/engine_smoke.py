"""The preflight's engine smoke: the site's real trainer configuration, run for a few steps before
any run is submitted, so that the engines the study measures (vLLM generation and Megatron training on
LUMI, the CPU engine locally) are known to start, generate, train and sync weights inside the image,
and a failure costs minutes of the preflight's nodes instead of the study's first jobs.

Which run it takes: the study's hardest that the preflight's nodes hold. Among the planned runs of at
most the preflight's nodes (two where the study has multi-node runs on a Slurm site), those whose
trainer has a data-parallel size above one first (Megatron's distributed optimizer and gradient
all-reduce, which a one-replica run never starts), then the highest memory peak per GPU of the plan's
memory budget (study.memory_budget: the larger of the generation and training peaks), then the
cheapest smoke, then the run id. On LUMI that is a two-node DAPO run: 8192-token responses, vLLM's
0.6 share held while Megatron trains with offload and recompute, Megatron DP 2. A site without a
memory budget (the CPU engine, or no model shape) takes the plan's smallest one-node run (shortest
responses, fewest prompts; a study of multi-node runs only: its smallest run on the preflight's
nodes), as its runs' memory cannot rank them. The record's `chosen_because` says which rule chose.

The run's own engines, parallelism, model and data, for `preflight.engine_smoke_steps` steps, through
the same launcher and command.sh as a run, in results/preflight/<site>-engine-smoke/ (replaced by the
next preflight). Not a tiny random model of the study's architecture: the study's own model, so what
is proven is exactly what the runs will load (on LUMI: Qwen3-8B).
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
from rlvr_scaling.execution.fabric_record import fabric_environment, transport_record
from rlvr_scaling.execution.launchers import Started, launcher_for
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, new_token
from rlvr_scaling.execution.run_records import render_command, trainer_module
from rlvr_scaling.execution.watchdog import Guard
from rlvr_scaling.measured.metrics import MEMORY_KEYS, PHASES, read_steps
from rlvr_scaling.measured.metrics_file import is_positive_finite
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.memory_budget import RunMemory, memory_or_reason
from rlvr_scaling.study.plan import Run, startup_minutes

STEP_ARGS = ("trainer.total_training_steps=", "trainer.total_epochs=", "trainer.experiment_name=")
ERROR_LINE = re.compile(r"\b\w*(Error|Exception)\b.*")


@dataclasses.dataclass(frozen=True)
class Smoke:
    """The run the smoke takes, cut to its steps (named <run_id>-engine-smoke), and why that one."""

    run: Run
    because: str

    @property
    def of_run(self) -> str:
        return self.run.run_id.removesuffix("-engine-smoke")

    @property
    def minutes(self) -> float:
        """Its estimate: the run's start-up and its steps at the run's estimated step time."""
        return self.run.estimate["runtime_minutes"]


def data_parallel(study: Study, run: Run) -> int:
    return study.config.parallel.training.data_parallel(run.nodes * run.gpus_per_node)


def peak_gb(memory: RunMemory) -> float:
    """A run's memory peak per GPU: the larger of its generation and training peaks."""
    return max(memory.generation_peak_gb, memory.training_peak_gb)


def smoke_run(study: Study, plan: list[Run], steps: int, root: Path, max_nodes: int = 1) -> Smoke | None:
    """The run the engine smoke takes (the module's docstring says which), cut to `steps` steps, on at
    most `max_nodes` nodes (the preflight's); None if there is no run it can take."""
    runs = [run for run in plan if run.verl_args and run.nodes <= max_nodes]
    if not runs or steps <= 0:
        return None
    chosen = _hardest(study, runs, root, max_nodes)
    run, because = chosen or _smallest(study, runs, root)
    name = f"{run.run_id}-engine-smoke"
    args = [arg for arg in run.verl_args if not arg.startswith(STEP_ARGS)]
    args += [
        f"trainer.total_training_steps={steps}",
        f"trainer.total_epochs={steps}",
        f"trainer.experiment_name={name}",
    ]
    minutes = round(startup_minutes(study, run.nodes) + steps * run.estimate["step_seconds"] / 60, 2)
    cut = dataclasses.replace(
        run,
        run_id=name,
        steps=steps,
        warmup_steps=0,
        verl_args=args,
        adaptive_steps=None,
        estimate={**run.estimate, "runtime_minutes": minutes},
        node_hours=round(run.nodes * minutes / 60, 3),
    )
    return Smoke(cut, because)


def _hardest(study: Study, runs: list[Run], root: Path, max_nodes: int) -> tuple[Run, str] | None:
    """The run of the highest memory peak per GPU, those of data-parallel size above one first; None
    where the site has no memory budget."""
    found = {
        run.run_id: memory_or_reason(study, run.dataset, run.nodes, run.trajectories_per_engine, root)[0]
        for run in runs
    }
    memories = {run_id: memory for run_id, memory in found.items() if memory is not None}
    if len(memories) < len(runs):
        return None

    def peak(run: Run) -> float:
        return peak_gb(memories[run.run_id])

    # Data-parallel size above one first: only such a run starts the distributed optimizer's sharding
    # and the gradients' all-reduce across replicas, so it goes first even where a one-replica run
    # peaks higher (LUMI: the two-node DAPO run, DP 2, before the one-node one, DP 1, whose optimizer
    # is unsharded). Then the highest peak; of equal peaks, the cheapest smoke: fewest nodes, shortest step.
    run = min(
        runs, key=lambda r: (data_parallel(study, r) <= 1, -peak(r), r.nodes, r.estimate["step_seconds"], r.run_id)
    )
    memory = memories[run.run_id]
    which = "training" if memory.training_peak_gb >= memory.generation_peak_gb else "generation"
    engine = study.config.parallel.training.engine
    engine = {"megatron": "Megatron", "fsdp": "FSDP"}.get(engine, engine)
    dp = data_parallel(study, run)
    among = f"the runs of at most {max_nodes} node(s)" + (f" with {engine} DP above 1" if dp > 1 else "")
    because = f"highest {which} peak {peak(run):g} GB of the cap {memory.cap_gb:g} GB among {among}; {engine} DP {dp}"
    higher = min(runs, key=lambda r: (-peak(r), r.run_id))
    if peak(higher) > peak(run):
        because += f"; {higher.run_id} peaks higher, {peak(higher):g} GB, at DP {data_parallel(study, higher)}"
    elif dp <= 1:
        because += f"; no run of at most {max_nodes} node(s) has DP above 1"
    return run, because


def _smallest(study: Study, runs: list[Run], root: Path) -> tuple[Run, str]:
    """Without a memory budget: the smallest one-node run, else the smallest run."""
    one_node = [run for run in runs if run.nodes == 1]
    run = min(one_node or runs, key=lambda r: (r.nodes, r.max_response_length, r.prompts, r.run_id))
    _, why = memory_or_reason(study, run.dataset, run.nodes, run.trajectories_per_engine, root)
    which = "one-node run" if one_node else "run"
    return (
        run,
        f"the smallest {which} (shortest responses, fewest prompts): no memory budget to rank the runs by ({why})",
    )


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
    smoke = smoke_run(study, plan, steps_wanted, root, max_nodes)
    if smoke is None:
        reason = (
            "preflight.engine_smoke_steps is 0"
            if steps_wanted <= 0
            else f"the plan has no run of at most {max_nodes} node(s), the preflight's"
        )
        return {"ran": False, "reason": reason}, []
    run = smoke.run
    folder = folder_of(study, root)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # Ray ports of its own in the job: the preflight's two-node check has just used the first two.
    launcher = launcher_for(study, root, port_offset=2)
    command = folder / "command.sh"
    command.write_text(render_command(study, run, root, launcher.verl_args()))
    token = new_token()
    smoke_env = {**env, TOKEN_VAR: token, RECORD_DIR_VAR: str(folder / "engine")}
    smoke_env.update(fabric_environment(study, folder / "engine"))  # the transport, recorded as a run's
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
    record = _smoke_record(study, smoke, folder, steps_wanted, status, code, time.monotonic() - began)
    # The trainer's own collectives, judged as a run's: a multi-node smoke over another transport fails.
    record["fabric"] = transport_record(study, run.nodes, folder / "engine", job.get("node_list"))
    timed = record["step_seconds"]
    if code == 0 and len(timed) >= steps_wanted:
        fabric = record["fabric"]
        return record, [] if fabric["valid_for_scaling"] else [f"the engine smoke's collectives: {fabric['detail']}"]
    record["error"] = _error_of(folder / "console.log")
    return record, [
        f"the engine smoke ({engines_of(study)}, {run.dataset} on {run.nodes} node(s)) failed: {status}, "
        f"exit {code}, "
        f"{len(timed)} of {steps_wanted} steps; {record['error']} (log: {folder / 'console.log'})"
    ]


def _smoke_record(
    study: Study, smoke: Smoke, folder: Path, steps_wanted: int, status: str, code: int | None, seconds: float
) -> dict[str, Any]:
    """What the smoke measured: its steps' and phases' times, peak memory, and the engine's own records
    (whether the rollout's sleep freed its share, each GPU worker's CPU binding); and which run it took, why."""
    run = smoke.run
    metrics = folder / "metrics.jsonl"
    measured = read_steps(metrics)[0] if metrics.exists() else []
    timed = [step for step in measured if is_positive_finite(step.get("timing_s/step"))]
    memory = [float(step[key]) for step in measured for key in MEMORY_KEYS if is_positive_finite(step.get(key))]
    record = {
        "ran": True,
        "of_run": smoke.of_run,
        "chosen_because": smoke.because,
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
