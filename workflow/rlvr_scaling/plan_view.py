"""A human-readable view of the plan."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlvr_scaling import paths
from rlvr_scaling.analysis.cost.budget import measured_node_hours
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.execution.storage import results_location
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PendingRun, PlannedRun, Run, known_runs

if TYPE_CHECKING:
    from rlvr_scaling.analysis.across_runs.selection_io import SkippedPoints
    from rlvr_scaling.study.memory_budget import RunMemory

CostOf = Callable[[Run], float]


def _row(run: PlannedRun, cost_of: CostOf) -> list[str]:
    shared = [str(run.max_response_length), str(run.steps)]
    if isinstance(run, PendingRun):
        head = ["(pending)", "+".join(run.series), str(run.nodes), str(run.nodes * run.gpus_per_node), "sel x ?"]
        return [*head, "-", "-", *shared, "-", "-", "-"]
    return [
        run.run_id,
        "+".join(run.series),
        str(run.nodes),
        str(run.nodes * run.gpus_per_node),
        str(run.prompts),
        str(run.trajectories),
        f"{run.trajectories_per_engine:g}",
        *shared,
        f"{run.resources['runtime']}m",
        f"{cost_of(run):.2f}",
        f"{cost_of(run) * run.gpus_per_node:.1f}",
    ]


def series_totals(plan: list[PlannedRun], cost_of: CostOf) -> str:
    """Node-hours per series; a run in two series (the 4-node weak and strong run) counts in each."""
    runs = known_runs(plan)
    totals = {s: sum(cost_of(r) for r in runs if s in r.series) for s in ("sweep", "weak", "strong")}
    return ", ".join(f"{series} {total:.1f}" for series, total in totals.items() if total)


def plan_table(study: Study, plan: list[PlannedRun], root: Path, cost_of: CostOf | None = None, basis: str = "") -> str:
    """`cost_of`: a run's node-hours (default: the site's estimate, `Run.node_hours`); `basis` says
    what those of the runs not done (under `root`) come from."""
    cost_of = cost_of or (lambda run: run.node_hours)
    header = ["run_id", "series", "nodes", "gpus", "prompts", "traj", "traj/engine", "cap", "steps", "time", "node-h"]
    header.append("gpu-h")
    rows = [_row(run, cost_of) for run in plan]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    pending = [run for run in plan if isinstance(run, PendingRun)]
    lines = [
        f"Study {study.name} on site '{study.site_name}': {len(plan)} runs "
        f"({len(pending)} pending the sweep's selection)",
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    known = [cost_of(r) for r in known_runs(plan)]
    gpus = sum(cost_of(r) * r.gpus_per_node for r in known_runs(plan))
    done = sum(1 for r in known_runs(plan) if measured_node_hours(paths.run_dir(root, r.run_id)) is not None)
    lines.append(
        f"Total: {sum(known):.1f} node-hours ({charged_or_gpus(study, sum(known), gpus)}) over the runs whose "
        f"workload is known: the {done} done as measured, the others estimated{basis}; by series: "
        f"{series_totals(plan, cost_of) or 'none'}."
    )
    if study.config.selection_rule.sweep_order == "sequential" and any("sweep" in r.series for r in known_runs(plan)):
        lines.append(
            "The sweeps are sequential (selection_rule.sweep_order): a point runs only if the sweep reaches it, "
            "so their node-hours are at most what is shown."
        )
    if study.config.adaptive_steps.enabled:
        lines.append(
            f"The adaptive step count is on (adaptive_steps): a run may stop before its {study.config.algorithm.steps} "
            "steps, so the node-hours of runs not done are at most what is shown."
        )
    lines += [f"  pending {r.dataset} {'+'.join(r.series)} n{r.nodes}: {r.pending}" for r in pending]
    lines += site_replacements(study)
    return "\n".join(lines) + "\n"


def charged_or_gpus(study: Study, node_hours: float, gpu_hours: float) -> str:
    """Node-hours in the site's billing unit where it states one (site key `billing`), else GPU-hours."""
    billing = study.site.billing
    if not billing.unit:
        return f"{gpu_hours:.0f} GPU-hours"
    return (
        f"{billing.node_hours_in_units(node_hours):.0f} {billing.unit} as the site bills them, "
        f"{billing.per_node_hour:g} per node-hour: {billing.source}"
    )


def _counts(values: list[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def sweep_savings(skipped: list[SkippedPoints], cost_of: CostOf) -> list[str]:
    """What each sequential sweep that stopped saved: the points it skipped, priced as runs not done."""
    lines = []
    for points in skipped:
        line = f"Sweep {points.dataset} stopped after {points.stop.after_prompts} prompts ({points.stop.reason})"
        if points.runs:
            saved = sum(cost_of(run) for run in points.runs)
            # Past the memory cap, a point would likely fail before its last step: at most this.
            bound = "at most " if points.stop.over_cap else ""
            line += (
                f": skipped {_counts([r.prompts for r in points.runs])} prompts: saved {bound}{saved:.2f} "
                f"node-hours ({saved * points.runs[0].gpus_per_node:.1f} GPU-hours)"
            )
        if points.measured:
            line += f"; {_counts([r.prompts for r in points.measured])} prompts, measured before, are past it: not used"
        lines.append(line + ".")
    return lines


def site_note(study: Study) -> str | None:
    """One line saying that the site changed the user's config, or None."""
    if not study.site_replaced:
        return None
    return (
        f"site '{study.site_name}' replaced {len(study.site_replaced)} value(s) of your config with its "
        "study_overrides; `rlvr-scaling plan` lists them"
    )


def site_replacements(study: Study) -> list[str]:
    """The values of the user's config the site replaced, and how to keep one's own."""
    if not study.site_replaced:
        return []
    width = max(len(r.key) for r in study.site_replaced)
    lines = [
        f"Site '{study.site_name}' replaced these values of your config with its study_overrides "
        "(in its site file, or one it inherits). To keep yours, set them with --set key=value, or "
        "under `overrides:` in an extra --configfile; those win over the site:",
    ]
    lines += [f"  {r.key.ljust(width)}  {r.yours!r} -> {r.site!r}" for r in study.site_replaced]
    return lines


def results_line(study: Study, root: Path) -> str:
    """Where this study's results are (or will be) written."""
    link = paths.results_dir(root)
    try:
        wanted = results_location(study)
    except ConfigError as exc:
        return f"Results: not yet known ({exc.expected})"
    if wanted is not None:
        if link.is_dir() and not link.is_symlink() and any(link.iterdir()):
            return f"Results: {wanted[0]} ({wanted[1]}), but {link.resolve()} holds results: move them there first"
        return f"Results: {wanted[0]} ({wanted[1]}; {link} links there)"
    if link.is_symlink():
        return f"Results: {link.resolve()} ({link} links there)"
    return f"Results: {link.resolve()}"


def lock_line(study: Study) -> str | None:
    """Which hub inputs are not locked yet (inputs/input_lock), or None when all are."""
    from rlvr_scaling.inputs.input_lock import LOCK_FILE, unlocked_inputs

    unlocked = unlocked_inputs(study)
    if not unlocked:
        return None
    return (
        f"Inputs not locked yet: {', '.join(unlocked)}. Their first download locks the commit and the "
        f"files' digests in {LOCK_FILE}; commit that file to freeze the study's inputs."
    )


def _memory_row(run: Run, memory: RunMemory) -> list[str]:
    return [
        run.run_id,
        f"{memory.rollout_share_gb:g}",
        f"{memory.rollout_in_training_gb:g}",
        f"{memory.megatron_state_gb:.2f}",
        f"{memory.activations_gb:g}",
        f"{memory.logits_gb:g}",
        f"{memory.generation_peak_gb:g}",
        f"{memory.training_peak_gb:g}",
        f"{memory.kv_cache_tokens // 1000}k/{memory.kv_tokens_needed // 1000}k",
        "yes" if memory.fits else "NO",
    ]


def memory_table(study: Study, plan: list[PlannedRun], root: Path) -> list[str]:
    """Each known run's memory per GPU (study.memory_budget), on a GPU site whose model shape is known."""
    from rlvr_scaling.study.memory_budget import memory_of, shape_for, sleep_mode_available

    memories = [
        (run, memory_of(study, run.dataset, run.nodes, run.trajectories_per_engine, root)) for run in known_runs(plan)
    ]
    budgets = [(run, memory) for run, memory in memories if memory is not None]
    if not budgets:
        if study.site.cpu_engine or not known_runs(plan):
            return []
        _, why = shape_for(study.config.model, root, study.site_name)
        return [f"Memory per GPU: not computed, {why}: a run over a GPU's memory is not refused before it starts."]
    rows = [_memory_row(run, memory) for run, memory in budgets]
    header = ["run_id", "vllm", "held", "megatron", "activ", "logits", "gen_peak", "train_peak", "kv/need", "fits"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    _, source = shape_for(study.config.model, root, study.site_name)
    sleep = "frees" if sleep_mode_available(study.site) else "keeps"
    # Every run of a study has one GPU and one cap: the first budget's.
    first = budgets[0][1]
    lines = [
        f"Memory per GPU in GB of 1e9 bytes (a GPU of {first.device_text()}; cap {first.cap_fraction:g} x "
        f"{first.gpu_gb:g} = {first.cap_gb:g} GB; vLLM's share is its gpu_memory_utilization of the GPU's "
        f"bytes; vLLM {sleep} its share while Megatron trains; the model's shape from {source}; "
        "study.memory_budget says how each part is counted):",
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
    ]
    return lines + ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]


def memory_record(study: Study, run: PlannedRun, root: Path) -> dict[str, Any]:
    """A run's memory per GPU for `plan --json`: the figures memory_table prints (memory_of's), with
    computed true; computed false and why where it has none."""
    from rlvr_scaling.study.memory_budget import memory_or_reason

    if isinstance(run, PendingRun):
        return {"computed": False, "reason": f"the run waits for the sweep's selection ({run.pending})"}
    memory, why = memory_or_reason(study, run.dataset, run.nodes, run.trajectories_per_engine, root)
    if memory is None:
        return {"computed": False, "reason": why}
    return {"computed": True, **memory.to_dict()}


def plan_records(study: Study, plan: list[PlannedRun], root: Path) -> list[dict[str, Any]]:
    """`plan --json`: each run as the plan holds it, with its memory budget beside its memory settings
    (`memory`, which job.json records too) and the hang guard's bounds (`stall_bound`: first_step_s,
    the wait from the launch to the first step; predicted_step_s, factor, floor_s; null while pending)."""
    from rlvr_scaling.execution.stall_guard import run_stall_bound

    return [
        {
            **run.to_dict(),
            "memory_budget": memory_record(study, run, root),
            "stall_bound": run_stall_bound(study, run).to_dict() if isinstance(run, Run) else None,
        }
        for run in plan
    ]


def release_line(study: Study) -> str | None:
    """The image's base release (its file's name) and what is known to go wrong with it."""
    container = study.site.container
    if container is None or not container.base_image:
        return None
    release = Path(container.base_image).name.removesuffix(".sif")
    known = f"; known issues: {container.known_issues}" if container.known_issues else ""
    if container.base_packages is None:
        return (
            f"Image base: {release}{known}. Its package list is unknown (container.base_packages: null), so the "
            f"resolve check cannot judge it: the image must bring {ENGINE_NEEDS}. The build adds verl and its "
            "light dependencies only; the preflight, after the build, fails on a missing engine."
        )
    return f"Image base: {release}{known}."


# What the image brings for verl 0.9.1's vLLM generation and Megatron training: its `vllm` and
# `megatron` extras (verl-0.9.1.dist-info/METADATA), which the build never installs over a base's.
ENGINE_NEEDS = (
    "vLLM 0.24.0 (verl 0.9.1's vllm extra pins it), Megatron-Core, TransformerEngine and mbridge (its "
    "megatron extra, unpinned), transformers 5.9.0 and a GPU build of torch (the extras pin 2.11.0)"
)


def fabric_line(study: Study, plan: list[PlannedRun]) -> str | None:
    """How the multi-node runs' collectives must travel and what the preflight proves of it."""
    if not any(run.nodes > 1 for run in plan):
        return None
    fabric = study.site.fabric
    how = "every node's Ray in one job step" if study.site.launch.kind == "ray-srun" else "one host"
    return (
        f"Collectives across nodes: {fabric.library} over {fabric.transport} ({how}); each run records its "
        f"transport per node, a run over another is invalid for scaling. The preflight's collective across "
        f"{fabric.collective_nodes} nodes ({fabric.collective_new_groups} new process groups in a row, each with "
        f"its first all-reduce, then {fabric.collective_iterations} timed all-reduces of "
        f"{fabric.collective_megabytes:g} MB) must show {fabric.transport} and a bus bandwidth of at least "
        f"{fabric.floor_text()}, within {fabric.collective_timeout_seconds:g} s."
    )


def build_line(study: Study) -> str | None:
    """The image build job as sbatch gets it (study.plan.build_resources), or None without one."""
    from rlvr_scaling.study.billing import build_charge
    from rlvr_scaling.study.plan import build_resources

    if not study.site.container or study.site.scheduler != "slurm":
        return None
    job = build_resources(study)
    slurm = study.site.slurm
    memory = "measured" if slurm.build_mem_measured else "an estimate until measured: docs/lumi.md"
    # No account: sbatch gets none (the site's default, where it has one), so the line shows none.
    account = f" --account={job['slurm_account']}" if job["slurm_account"] else ""
    base = study.site.container.base_image
    where = (
        f"its base {base} is here"
        if Path(base).is_file()
        else f"its base {base} is NOT on this machine: pull or copy it there before the build "
        "(docs/own-study.md, 'The base image')"
    )
    charge = build_charge(study.site.billing, job["cpus_per_task"], job["mem_mb"], job["runtime"])
    billed = (
        "" if charge is None else f"; billed at most {charge:.0f} {study.site.billing.build_unit} at its time limit"
    )
    return (
        f"Image build, before the preflight: sbatch --partition={job['slurm_partition']}{account} "
        f"--nodes=1 --ntasks=1 --cpus-per-task={job['cpus_per_task']} --mem={job['mem_mb']}M "
        f"--time={job['runtime']} (no GPU; memory {memory}{billed}); {where}."
    )


def preflight_line(study: Study, plan: list[PlannedRun], root: Path, cost_of: CostOf | None = None) -> str:
    """What the preflight job costs before any run: its nodes and time limit, and its engine smoke
    (which run, why, and its estimated node-hours beside the study's; `cost_of` as plan_table's)."""
    from rlvr_scaling.analysis.across_runs.selection_io import read_selections
    from rlvr_scaling.execution.preflight.checks import preflight_nodes, runs_to_check, smoke_minutes_at_least
    from rlvr_scaling.execution.preflight.engine_smoke import smoke_run

    nodes = preflight_nodes(study, plan)
    slurm = study.site.slurm
    where = f" on {slurm.preflight_partition or slurm.partition}" if study.site.scheduler == "slurm" else ""
    steps = study.config.preflight.engine_smoke_steps
    limit = (
        f"up to {slurm.preflight_minutes} min{where} (at most {nodes * slurm.preflight_minutes / 60:.2f} node-hours)"
    )
    head = f"Preflight, before any run: {nodes} node(s), {limit}"
    if not study.site.engine_smoke:
        return f"{head}, with no engine smoke (site '{study.site_name}' runs none: its first run proves as much)."
    # The runs the preflight itself checks and smokes (every selection the sweep may make), not only
    # the plan's: before the sweep the plan's scaling runs are pending.
    runs, _ = runs_to_check(study, root, read_selections(root, study))
    smoke = smoke_run(study, runs, steps, root, max_nodes=nodes)
    if smoke is None:
        why = "preflight.engine_smoke_steps is 0" if steps <= 0 else "no run to take"
        return f"{head}, with no engine smoke ({why})."
    cost_of = cost_of or (lambda run: run.node_hours)
    study_hours = sum(cost_of(run) for run in known_runs(plan))
    line = (
        f"{head}, with an engine smoke of {steps} steps of {smoke.of_run} on {smoke.run.nodes} node(s) "
        f"({smoke.because}): about {smoke.minutes:.0f} min, {nodes * smoke.minutes / 60:.2f} node-hours of its "
        f"{nodes} node(s), beside the study's {study_hours:.1f}."
    )
    left = smoke_minutes_at_least(study)
    if study.site.scheduler == "slurm" and smoke.minutes > left:
        line += (
            f" The smoke's estimate is over the {left:.0f} min the time limit leaves it should the checks before it "
            "take their longest: raise slurm.preflight_minutes."
        )
    return line


def _dataset_label(study: Study, name: str) -> str:
    data = study.dataset(name)
    where = data.source if data.revision is None else f"{data.source}@{data.revision}"
    reward = f"reward {data.reward.file}:{data.reward.function}" if data.reward.custom else data.data_source(name)
    return f"{name} ({where}, {reward})"


def datasets_line(study: Study) -> str:
    """The study's datasets: where each comes from and what scores it."""
    return "Datasets: " + ", ".join(_dataset_label(study, name) for name in study.datasets)


def jobs_line(study: Study) -> str | None:
    """Which jobs a Slurm site's workflow submits and which it runs where Snakemake runs."""
    if study.site.scheduler != "slurm":
        return None
    return (
        "Jobs: the data, the model and every analysis step run where Snakemake runs (the login node; the "
        "Snakefile's localrules), the image build, the preflight and the runs as Slurm jobs."
    )


def study_line(study: Study, plan: list[PlannedRun]) -> str:
    """What Snakemake says when it starts, as `plan` does: the study's run count and datasets, so a
    study file read two ways would show at once."""
    pending = sum(isinstance(run, PendingRun) for run in plan)
    return (
        f"Study {study.name} on site '{study.site_name}': {len(plan)} runs "
        f"({pending} pending the sweep's selection). {datasets_line(study)}"
    )
