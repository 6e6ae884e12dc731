"""The plan: a pure function of study + site + selection listing every run of the study."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from rlvr_scaling.errors import ConfigError
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.identity import make_run_id
from rlvr_scaling.study.image_identity import image_identity
from rlvr_scaling.study.memory_budget import check_run_memory
from rlvr_scaling.study.step_estimate import PublishedShape, ideal_step_s, published_shapes
from rlvr_scaling.study.verl_args import build_verl_args

SERIES_ORDER = ("sweep", "weak", "strong")


@dataclass
class Run:
    """A run of the plan: everything about it is known, its id names it."""

    run_id: str
    series: list[str]
    dataset: str
    nodes: int
    gpus_per_node: int
    prompts: int
    responses_per_prompt: int
    trajectories: int
    max_prompt_length: int
    max_response_length: int
    steps: int
    warmup_steps: int
    concurrency: int
    trajectories_per_engine: float
    memory: dict[str, Any]
    verl_args: list[str]
    resources: dict[str, Any]  # sbatch resources, in Snakemake's names
    node_hours: float
    estimate: dict[str, Any]  # startup_minutes, step_seconds, runtime_minutes, time_limit_minutes, step_source
    identity: dict[str, Any]
    # The adaptive step count's rule (measured.adaptive_steps), None when the run takes all its steps.
    adaptive_steps: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "pending": None}


@dataclass
class PendingRun:
    """A scaling run that waits for the sweep's selection: until then its prompt count, and with it
    its id, arguments and cost, are unknown."""

    series: list[str]
    dataset: str
    nodes: int
    gpus_per_node: int
    responses_per_prompt: int
    max_prompt_length: int
    max_response_length: int
    steps: int
    warmup_steps: int
    memory: dict[str, Any]
    pending: str  # what it waits for
    factor: int = 1  # its prompts per step: the selection times this (weak: its nodes; strong: the reference's)

    def to_dict(self) -> dict[str, Any]:
        """One shape for every entry of `plan --json`: what a pending run does not know yet is null."""
        known = asdict(self)
        return {name: known.get(name) for name in [*(f.name for f in fields(Run)), "pending"]}


PlannedRun = Run | PendingRun


def engines_per_node(study: Study) -> int:
    return study.site.hardware.gpus_per_node // study.config.parallel.rollout.tensor_parallel


def concurrency_for(study: Study, one_node_prompts: int) -> int:
    """vLLM max_num_seqs per engine: all trajectories of the one-node workload generated at once."""
    trajectories = one_node_prompts * study.config.algorithm.responses_per_prompt
    return math.ceil(trajectories / engines_per_node(study))


def _identity(study: Study, dataset: str, nodes: int, prompts: int, concurrency: int) -> dict[str, Any]:
    cfg = study.config
    data = cfg.datasets[dataset]
    container = study.site.container
    algorithm = cfg.algorithm
    # Sections enter as the config wrote them (to_dict): an unset optional key stays absent, so adding
    # one to the schema leaves earlier run ids as they were.
    engine_options = study.site.engine_options.to_dict()
    # Why an option is set is prose (its source, its reason): a reworded reason measures the same.
    engine_options = {k: v for k, v in engine_options.items() if k not in ("reasons", "enforce_eager_reason")}
    return {
        **({"engine_options": engine_options} if engine_options else {}),
        # The variables every run gets (NCCL, HSA, OMP threads...) change what it measures. As the
        # site writes them: ${SLURM_JOB_ID} stays a reference. Where and how a job starts (partition,
        # account, launch.*, storage) does not enter: docs/study.md, "What defines a run".
        "environment": dict(study.site.environment),
        "site": study.site_name,
        "engine": study.site.engine,
        "gpus_per_node": study.site.hardware.gpus_per_node,
        "container_base": container.base_image if container else None,
        # Added only where there is an image: runs without one keep the ids they had.
        **({"container_image": image_identity(study)} if container else {}),
        "verl": cfg.software.verl,
        # max_context sizes the tiny model; a downloaded one has its own.
        # Another local folder or another chat template is another model under the same name (added
        # only when set: every other study keeps its run ids).
        "model": {
            **{k: getattr(cfg.model, k) for k in ("name", "source", "revision", "max_context")},
            **({"path": str(cfg.model.path)} if cfg.model.source == "local" else {}),
            **({"chat_template": cfg.model.chat_template} if cfg.model.chat_template else {}),
        },
        # What builds its rows (source, revision, fields, answer rule, prompt, reward with its file's
        # sha256) and the caps and memory settings of its runs.
        "dataset": {
            "name": dataset,
            **data.build_settings(),
            "max_prompt_length": data.max_prompt_length,
            "max_response_length": data.max_response_length,
            "memory": data.memory.to_dict(),
        },
        "algorithm": {
            "name": algorithm.name,
            "responses_per_prompt": algorithm.responses_per_prompt,
            "lr": algorithm.lr,
            "steps": algorithm.steps,
        },
        "parallel": cfg.parallel.to_dict(),
        # A run that may stop early measures fewer steps: another run. Its warm-up enters too, as the
        # rule counts measured steps after it: a run stopped after 3 measured steps of warm-up 1 has
        # none with warm-up 5. Off, runs keep their ids and the warm-up stays the analysis's choice.
        **(
            {"adaptive_steps": {**(cfg.adaptive_steps.rule() or {}), "warmup_steps": algorithm.warmup_steps}}
            if cfg.adaptive_steps.enabled
            else {}
        ),
        "nodes": nodes,
        "prompts": prompts,
        "concurrency": concurrency,
    }


def startup_minutes(study: Study, nodes: int) -> float:
    """A run's estimated start-up. It grows with the node count (image start and model load on every
    node, Ray joining, engines initialising): a fixed part plus a part per doubling of nodes."""
    estimate = study.config.estimate
    return estimate.startup_minutes + estimate.startup_minutes_per_doubling * math.log2(nodes)


def estimate_for(
    study: Study,
    dataset: str,
    nodes: int,
    step_s: float,
    source: str,
    startup_min: float | None = None,
    startup_source: str = "the site's estimate",
) -> dict[str, Any]:
    """A run's estimate from its predicted step (and start-up: the site's unless given): runtime, time
    limit, and where the step and start-up came from. Refused when the limit is over the site's
    longest job."""
    estimate = study.config.estimate
    startup = startup_minutes(study, nodes) if startup_min is None else startup_min
    runtime_min = startup + study.config.algorithm.steps * step_s / 60
    limit = math.ceil(max(estimate.min_time_limit_minutes, runtime_min * estimate.time_limit_factor))
    longest = study.site.slurm.max_walltime_minutes
    if limit > longest:
        raise ConfigError(
            f"datasets.{dataset}.estimate.seconds_per_trajectory",
            study.config.datasets[dataset].estimate.seconds_per_trajectory,
            f"the {nodes}-node run is estimated at {runtime_min:.0f} min ({source}), a time limit of {limit} min "
            f"with estimate.time_limit_factor, over site '{study.site_name}''s longest job of {longest} min "
            "(slurm.max_walltime_minutes): run fewer steps, or check the estimate",
        )
    return {
        "startup_minutes": round(startup, 2),
        "step_seconds": round(step_s, 2),
        "runtime_minutes": round(runtime_min, 2),
        "time_limit_minutes": limit,
        "step_source": source,
        "startup_source": startup_source,
    }


def _estimate(
    study: Study, dataset: str, nodes: int, trajectories: int, series: list[str], shape: PublishedShape | None
) -> dict[str, Any]:
    """Ideal scaling from the site's seconds_per_trajectory, times the published shape where the
    study's reference covers the run (study.step_estimate)."""
    per_trajectory = study.config.datasets[dataset].estimate.seconds_per_trajectory
    step_s = ideal_step_s(study, dataset, nodes, trajectories)
    node_word = "node" if nodes == 1 else "nodes"
    source = f"site estimate, ideal: {per_trajectory:g} s x {trajectories} trajectories / {nodes} {node_word}"
    published = shape.shape(series, nodes) if shape is not None else None
    if published is not None:
        source = f"{published.source}; {published.factor:.3g} x ideal {step_s:.4g} s"
        step_s *= published.factor
    return estimate_for(study, dataset, nodes, step_s, source)


# The resources a Slurm job of the study asks for (sbatch_resources' keys): the rules' `resources`.
RESOURCE_NAMES = (
    "nodes",
    "tasks_per_node",
    "cpus_per_task",
    "mem_mb",
    "runtime",
    "slurm_partition",
    "slurm_account",
    "slurm_extra",
)


def sbatch_resources(study: Study, nodes: int, minutes: int, partition: str | None = None) -> dict[str, Any]:
    """A job's sbatch resources, in the names Snakemake and its Slurm executor read."""
    slurm, hardware = study.site.slurm, study.site.hardware
    return {
        "nodes": nodes,
        "tasks_per_node": slurm.ntasks_per_node,
        "cpus_per_task": max(1, hardware.cpus_per_node // slurm.ntasks_per_node),
        "mem_mb": hardware.memory_mb_per_node,
        "runtime": minutes,
        "slurm_partition": partition or slurm.partition,
        "slurm_account": study.slurm_account() or "",
        "slurm_extra": f"--gpus-per-node={hardware.gpus_per_node}",
    }


def build_resources(study: Study) -> dict[str, Any]:
    """The image build job's sbatch resources: one task on the site's build partition (a CPU one
    where the site has it), with the account every job of the study carries."""
    slurm = study.site.slurm
    return {
        "nodes": 1,
        "tasks_per_node": 1,
        "cpus_per_task": slurm.build_cpus,
        "mem_mb": slurm.build_mem_mb,
        "runtime": slurm.build_minutes,
        "slurm_partition": slurm.build_partition or slurm.partition,
        "slurm_account": study.slurm_account() or "",
        # No GPU: the build only unpacks the base, installs with pip and packs the image.
        "slurm_extra": "",
    }


def make_run(
    study: Study,
    dataset: str,
    nodes: int,
    prompts: int,
    one_node_prompts: int,
    series: list[str],
    root: Path,
    shape: PublishedShape | None = None,
) -> Run:
    cfg = study.config
    n = cfg.algorithm.responses_per_prompt
    data = cfg.datasets[dataset]
    gpus = study.site.hardware.gpus_per_node
    trajectories = prompts * n
    data_parallel = cfg.parallel.training.data_parallel(nodes * gpus)
    if trajectories % data_parallel:
        raise ConfigError(
            f"datasets.{dataset}",
            {"nodes": nodes, "prompts": prompts},
            f"{trajectories} trajectories must split evenly over the {data_parallel} training data-parallel ranks",
        )
    concurrency = concurrency_for(study, one_node_prompts)
    identity = _identity(study, dataset, nodes, prompts, concurrency)
    run_id = make_run_id(dataset, nodes, prompts, identity)
    estimate = _estimate(study, dataset, nodes, trajectories, series, shape)
    per_engine = trajectories / (nodes * engines_per_node(study))
    # Before any job: a run over a GPU's memory is refused, naming what does not fit and what would.
    check_run_memory(study, dataset, nodes, trajectories, per_engine, root)
    return Run(
        run_id=run_id,
        series=list(series),
        dataset=dataset,
        nodes=nodes,
        gpus_per_node=gpus,
        prompts=prompts,
        responses_per_prompt=n,
        trajectories=trajectories,
        max_prompt_length=data.max_prompt_length,
        max_response_length=data.max_response_length,
        steps=cfg.algorithm.steps,
        warmup_steps=cfg.algorithm.warmup_steps,
        concurrency=concurrency,
        trajectories_per_engine=per_engine,
        memory=data.memory.to_dict(),
        verl_args=build_verl_args(cfg, study.site, dataset, nodes, prompts, concurrency, run_id, root),
        resources=sbatch_resources(study, nodes, int(estimate["time_limit_minutes"])),
        node_hours=round(nodes * estimate["runtime_minutes"] / 60, 3),
        estimate=estimate,
        identity=identity,
        adaptive_steps=cfg.adaptive_steps.rule(),
    )


def _pending_run(study: Study, dataset: str, nodes: int, factor: int, series: str) -> PendingRun:
    cfg = study.config
    data = cfg.datasets[dataset]
    return PendingRun(
        series=[series],
        dataset=dataset,
        nodes=nodes,
        gpus_per_node=study.site.hardware.gpus_per_node,
        responses_per_prompt=cfg.algorithm.responses_per_prompt,
        max_prompt_length=data.max_prompt_length,
        max_response_length=data.max_response_length,
        steps=cfg.algorithm.steps,
        warmup_steps=cfg.algorithm.warmup_steps,
        memory=data.memory.to_dict(),
        pending=f"prompts = selection.{dataset} x {factor}; waits for the one-node sweep of {dataset}",
        factor=factor,
    )


def dataset_runs(study: Study, dataset: str, selected: int | None, root: Path) -> list[PlannedRun]:
    """Every run of one dataset; the scaling runs are pending while `selected` is None. A run in two
    series (the selected sweep point is the one-node weak run; the reference-node weak run is the
    strong one) is one run, estimated over both."""
    cfg = study.config
    scaling = cfg.scaling
    # (nodes, prompts, one-node prompts): its series, in the order first met
    points: dict[tuple[int, int, int], list[str]] = {}
    pending: dict[tuple[int, int], PendingRun] = {}
    if cfg.selection.get(dataset) is None:
        for prompts in cfg.datasets[dataset].sweep:
            points.setdefault((1, prompts, prompts), []).append("sweep")
    series_points = [("weak", nodes, nodes) for nodes in scaling.weak_nodes]
    ref = scaling.strong_reference_nodes
    series_points += [("strong", nodes, ref) for nodes in scaling.strong_nodes]
    for series, nodes, factor in series_points:
        if selected is None:
            waiting = pending.setdefault((nodes, factor), _pending_run(study, dataset, nodes, factor, series))
            if series not in waiting.series:
                waiting.series.append(series)
        elif series not in (named := points.setdefault((nodes, selected * factor, selected), [])):
            named.append(series)
    shape = published_shapes(study).get(dataset) if points else None
    runs: list[PlannedRun] = [
        make_run(study, dataset, nodes, prompts, one_node, series, root, shape)
        for (nodes, prompts, one_node), series in points.items()
    ]
    runs += list(pending.values())
    return sorted(
        runs, key=lambda r: (SERIES_ORDER.index(r.series[0]), r.nodes, r.prompts if isinstance(r, Run) else 0)
    )


def build_plan(
    study: Study, selection: dict[str, int | None] | None = None, root: Path | None = None
) -> list[PlannedRun]:
    """All runs of the study. `selection` holds the sweep's outcome per dataset; pinned values win."""
    root = (root or Path.cwd()).resolve()
    selection = selection or {}
    runs: list[PlannedRun] = []
    for dataset in study.datasets:
        selected = study.config.selection.get(dataset) or selection.get(dataset)
        runs += dataset_runs(study, dataset, selected, root)
    return runs


def known_runs(plan: list[PlannedRun]) -> list[Run]:
    """The runs of the plan that can start (not pending a selection)."""
    return [run for run in plan if isinstance(run, Run)]


def find_run(plan: list[PlannedRun], run_id: str) -> Run:
    for run in known_runs(plan):
        if run.run_id == run_id:
            return run
    known = ", ".join(r.run_id for r in known_runs(plan))
    raise ConfigError("run_id", run_id, f"it must be a run of the current plan (known: {known})", "request")
