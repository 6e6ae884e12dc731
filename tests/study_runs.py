"""Study-shaped run directories (LUMI, published selection) written and read back through the real code.

spec.json comes from `run_records.spec_document`, the selection and the indexes from the CLI's `select` and
`index`, every summary from `summarize` on the run directory: only the per-step numbers are made up
here, and they are kept (`FabricatedRun.steps`) so tests can compute the expected tables on their own.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr_scaling import cli, paths
from rlvr_scaling.analysis.per_run.results_io import StudyResults, load_results
from rlvr_scaling.execution.launchers import launcher_for
from rlvr_scaling.execution.outcome import memory_evidence
from rlvr_scaling.execution.provenance import host_facts, package_versions
from rlvr_scaling.execution.run_environment import environment_templates
from rlvr_scaling.execution.run_records import render_command, spec_document
from rlvr_scaling.inputs.container import exec_prefix
from rlvr_scaling.study.config import Study, load_study
from rlvr_scaling.study.model_shape import model_record
from rlvr_scaling.study.plan import Run, build_plan, known_runs
from rlvr_scaling.study.yaml_file import read_yaml

# The study's model's config.json as Hugging Face serves it (Qwen/Qwen3-8B): the shape MFU counts from.
QWEN3_8B_CONFIG = Path(__file__).parents[1] / "config" / "models" / "Qwen__Qwen3-8B.json"
PUBLISHED: dict[str, int] = read_yaml(paths.CONFIG_DIR / "published-selection.yaml")["selection"]
# GSM8K stays unpinned so that its sweep is in the plan and the selection is made from it; DAPO is
# pinned to its published workload, as with config/published-selection.yaml.
# The GSM8K sweep is a grid, so that every point is measured, the one that runs out of memory too (a
# sequential sweep would stop at the 150 prompts over the memory cap: tests/test_sequential_sweep.py).
STUDY_SETS = [f"selection.dapo_math={PUBLISHED['dapo_math']}", "selection_rule.sweep_order=grid"]
SITE = "lumi"

PHASE_KEYS = ("gen", "old_log_prob", "update_actor", "update_weights")
# Mean seconds per measured step of (gen, old_log_prob, update_actor, update_weights, rest), keyed by
# (dataset, nodes, prompts), shaped like the published series (docs/study.md): GSM8K weak
# 192 -> 247.6 s, strong 4 -> 16 nodes 204 -> 72 s; DAPO weak 300 -> 312.3 s, strong 309 -> 165 s.
PROFILES: dict[tuple[str, int, int], tuple[float, float, float, float, float]] = {
    # GSM8K sweep on one node (100 prompts is the 1-node weak run below); 200 prompts runs out of memory
    ("gsm8k", 1, 25): (20.0, 10.0, 22.0, 6.0, 12.0),
    ("gsm8k", 1, 50): (30.0, 20.0, 43.0, 6.0, 11.0),
    ("gsm8k", 1, 150): (70.0, 57.0, 124.0, 6.0, 18.0),
    # GSM8K weak (100 prompts per node)
    ("gsm8k", 1, 100): (48.0, 38.0, 84.0, 6.0, 16.0),
    ("gsm8k", 2, 200): (49.5, 39.0, 85.0, 6.5, 16.0),
    ("gsm8k", 4, 400): (52.0, 40.5, 88.0, 7.0, 16.5),
    ("gsm8k", 8, 800): (56.0, 43.5, 93.0, 8.0, 17.5),
    ("gsm8k", 16, 1600): (62.6, 49.0, 106.0, 10.0, 20.0),
    # GSM8K strong (400 prompts; the 4-node run is the weak one)
    ("gsm8k", 1, 400): (196.0, 160.0, 345.0, 6.0, 63.0),
    ("gsm8k", 2, 400): (100.0, 80.0, 172.0, 6.5, 37.5),
    ("gsm8k", 8, 400): (33.0, 22.0, 46.0, 8.0, 9.0),
    # 16 nodes: 72 s, of which log-probabilities and update 43 s (60%); generation 60% of the extra
    # time over ideal scaling from 4 nodes (config/references/lumi-rlvr-blog.yaml)
    ("gsm8k", 16, 400): (25.6, 14.0, 29.0, 2.0, 1.4),
    # DAPO weak (10 prompts per node)
    ("dapo_math", 1, 10): (150.0, 45.0, 85.0, 6.0, 14.0),
    ("dapo_math", 2, 20): (151.0, 45.5, 85.5, 6.2, 13.8),
    ("dapo_math", 4, 40): (155.0, 46.5, 87.0, 6.5, 14.0),
    ("dapo_math", 8, 80): (153.0, 46.0, 86.5, 6.5, 14.0),
    ("dapo_math", 16, 160): (158.0, 47.0, 87.5, 6.8, 13.0),
    # DAPO strong (40 prompts)
    ("dapo_math", 1, 40): (560.0, 182.0, 345.0, 6.0, 127.0),
    ("dapo_math", 2, 40): (290.0, 92.0, 174.0, 6.2, 52.8),
    ("dapo_math", 8, 40): (118.0, 24.0, 45.0, 7.0, 21.0),
    # 16 nodes: 165 s, log-probabilities and update 43 s (26%), generation 90% of the extra time
    ("dapo_math", 16, 40): (117.7, 13.0, 30.0, 2.0, 2.3),
}
# Peak training memory (GB per GPU); the 150-prompt sweep point is over the 0.98 x 64 GB cap.
MEMORY_GB: dict[tuple[str, int, int], float] = {
    ("gsm8k", 1, 25): 38.0,
    ("gsm8k", 1, 50): 45.0,
    ("gsm8k", 1, 150): 63.5,
}
DEFAULT_MEMORY_GB = {"gsm8k": 55.0, "dapo_math": 59.0}
FAILED_POINTS = {("gsm8k", 1, 200)}
# Per-trajectory token shape: (prompt mean, response mean, share of responses at the cap).
TOKENS = {"gsm8k": (110.0, 740.0, 0.5), "dapo_math": (180.0, 5900.0, 0.48)}
# Step 1 (warm-up: vLLM graph capture, first Megatron step) is much slower, so that counting it would
# move every mean well beyond the tests' tolerance.
WARMUP_FACTORS = (1.6, 1.3, 1.4, 1.0)
WARMUP_EXTRA_S = 25.0


@dataclass
class FabricatedRun:
    run: Run
    run_dir: Path
    summary_path: Path
    # the per-step records exactly as written to metrics.jsonl, step 1 (warm-up) included
    steps: list[dict[str, Any]] = field(default_factory=list)
    failed: bool = False

    def measured(self) -> list[dict[str, Any]]:
        return [s for s in self.steps if s["step"] > self.run.warmup_steps]


@dataclass
class FabricatedStudy:
    root: Path
    study: Study
    plan: list[Run]
    runs: dict[str, FabricatedRun]
    # the selection artifact per swept dataset (a pinned dataset has none)
    selections: dict[str, dict[str, Any]]
    index_paths: list[Path]
    results: StudyResults

    def run(self, dataset: str, series: str, nodes: int) -> FabricatedRun:
        matches = [
            r
            for r in self.runs.values()
            if r.run.dataset == dataset and series in r.run.series and r.run.nodes == nodes
        ]
        assert len(matches) == 1, (dataset, series, nodes, [r.run.run_id for r in matches])
        return matches[0]

    def sweep(self, dataset: str) -> list[FabricatedRun]:
        runs = [r for r in self.runs.values() if r.run.dataset == dataset and "sweep" in r.run.series]
        return sorted(runs, key=lambda r: r.run.prompts)


def _key(run: Run) -> tuple[str, int, int]:
    assert run.prompts is not None
    return run.dataset, run.nodes, run.prompts


def fabricate_steps(
    study: Study, run: Run, jitter: float, slower: float = 1.0, disturbed: dict[int, float] | None = None
) -> list[dict[str, Any]]:
    """verl file-logger records for `run`; each measured step varies by up to +-jitter per figure.
    `slower`: every phase of every step that many times its profile (a planted deviation).
    `disturbed`: step -> factor, those steps' phases that many times as long (a busy machine)."""
    # Seeded by what the run is, not by its id: the id's hash changes whenever the identity gains a
    # field, and the study-shaped figures below must not move with it.
    rng = random.Random("-".join(map(str, _key(run))))
    means = tuple(v * slower for v in PROFILES[_key(run)])
    prompt_mean, response_mean, clip = TOKENS[run.dataset]
    memory = MEMORY_GB.get(_key(run), DEFAULT_MEMORY_GB[run.dataset])
    trajectories = run.trajectories
    assert trajectories is not None
    n_gpus = run.nodes * run.gpus_per_node
    records = []
    for step in range(1, run.steps + 1):

        def vary(value: float) -> float:
            return round(value * (1 + jitter * rng.uniform(-1, 1)), 3)

        factor = (disturbed or {}).get(step, 1.0)
        phases = [round(vary(v) * factor, 3) for v in means[:4]]
        other = vary(means[4]) * factor
        if step <= run.warmup_steps:
            phases = [round(v * f, 3) for v, f in zip(phases, WARMUP_FACTORS, strict=True)]
            other += WARMUP_EXTRA_S
        step_s = round(sum(phases) + other, 3)
        # Whole token counts per step, so that tokens / (prompt mean + response mean) is the
        # trajectory count exactly, as the validity check expects.
        prompt_tokens = round(trajectories * prompt_mean * (1 + jitter * rng.uniform(-1, 1)))
        response_tokens = round(trajectories * response_mean * (1 + jitter * rng.uniform(-1, 1)))
        tokens = prompt_tokens + response_tokens
        data = {
            "training/global_step": step,
            **{f"timing_s/{p}": v for p, v in zip(PHASE_KEYS, phases, strict=True)},
            "timing_s/step": step_s,
            "perf/total_num_tokens": tokens,
            # verl's own figure: tokens / (step time x nnodes x gpus per node)
            "perf/throughput": tokens / (step_s * n_gpus),
            "perf/max_memory_allocated_gb": round(memory + (0.4 if step <= run.warmup_steps else vary(0.2)), 3),
            "prompt_length/mean": prompt_tokens / trajectories,
            "response_length/mean": response_tokens / trajectories,
            "response_length/max": run.max_response_length,
            "response_length/clip_ratio": round(clip * (1 + jitter * rng.uniform(-1, 1)), 4),
            "actor/lr": float(study.config.algorithm.lr),
            # verl's own MFU on LUMI: its device table has no MI250X, the peak is infinite (#33)
            "perf/mfu/actor": 0.0,
            "perf/mfu/actor_infer": 0.0,
        }
        records.append({"step": step, "data": data})
    return records


def _job(study: Study, run: Run, root: Path, status: str, exit_status: int) -> dict[str, Any]:
    """job.json with the keys run_records.job_record and the launch write for a Slurm (ray-srun) run."""
    container = exec_prefix(study, root)
    nodes = [f"nid{5000 + i:06d}" for i in range(run.nodes)]
    return {
        "run_id": run.run_id,
        "start": "2025-11-29T21:00:00+00:00",
        "nodes": run.nodes,
        "workers": run.nodes * run.gpus_per_node,
        "launcher": study.site.launch.kind,
        "container": {"image": container[-1], "command": container} if container else None,
        "environment": environment_templates(study),
        "slurm_job_id": str(10_000_000 + run.nodes * 1000 + (run.prompts or 0)),
        **host_facts(),
        "versions": package_versions(),
        "node_list": nodes,
        "ray_head": f"{nodes[0]}:{study.site.launch.ray_port}",
        "end": "2025-11-29T22:10:00+00:00",
        "seconds": 4200.0,
        "exit_status": exit_status,
        "status": status,
        "problems": [],
        # as run_records.job_record reads it from the study's model folder (fabricate_study puts
        # Qwen3-8B's config.json there)
        "model": model_record(paths.model_dir(root, study.site_name) / "config.json"),
    }


def run_cli(argv: list[str]) -> None:
    """The CLI step the Snakemake rule runs, in this process; its one-line report is not wanted here."""
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv)
    assert code == 0, argv


def write_run(
    study: Study, run: Run, root: Path, jitter: float, slower: float = 1.0, disturbed: dict[int, float] | None = None
) -> FabricatedRun:
    run_dir = paths.run_dir(root, run.run_id)
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps(spec_document(study, run), indent=1, default=str) + "\n")
    # command.sh as the launcher writes it (verify recomputes it from the bundled config)
    (run_dir / "command.sh").write_text(render_command(study, run, root, launcher_for(study, root).verl_args()))
    failed = _key(run) in FAILED_POINTS
    steps: list[dict[str, Any]] = []
    if failed:
        # launch keeps a sweep point that ran out of memory as a failed point, with its console log.
        job = _job(study, run, root, "failed", 1)
        console = run_dir / "console.log"
        console.write_text("(WorkerDict pid=4802) torch.OutOfMemoryError: HIP out of memory.\n")
        job["memory_evidence"] = memory_evidence(console)  # as launch records it
    else:
        job = _job(study, run, root, "succeeded", 0)
        records = fabricate_steps(study, run, jitter, slower, disturbed)
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        steps = [{"step": r["step"], **r["data"]} for r in records]
    (run_dir / "job.json").write_text(json.dumps(job, indent=1, default=str) + "\n")
    summary_path = paths.results_dir(root) / "summaries" / f"{run.run_id}.json"
    # failed points go through summarize_run too, which hands them to summary.failed_summary
    run_cli(["summarize", str(run_dir), "--output", str(summary_path)])
    return FabricatedRun(run, run_dir, summary_path, steps, failed)


def lumi_run_folder(root: Path, pick: Callable[[Run], bool]) -> Path:
    """One LUMI run's folder as the launcher leaves it (spec.json, job.json, metrics.jsonl), the first
    planned run `pick` takes, under `root` with the model's config.json in place."""
    study = load_study(paths.DEFAULT_CONFIG, sets=STUDY_SETS, site=SITE)
    model = paths.model_dir(root, study.site_name)
    model.mkdir(parents=True)
    (model / "config.json").write_bytes(QWEN3_8B_CONFIG.read_bytes())
    run = next(r for r in known_runs(build_plan(study, root=root)) if pick(r))
    return write_run(study, run, root, jitter=0.0).run_dir


def study_args(sets: Sequence[str], root: Path) -> list[str]:
    return ["--site", SITE, *[f"--set={s}" for s in sets], "--root", str(root)]


def fabricate_study(
    root: Path,
    jitter: float = 0.03,
    sets: Sequence[str] = (),
    slower: dict[tuple[str, int, int], float] | None = None,
    jitter_of: dict[tuple[str, int, int], float] | None = None,
    disturbed: dict[tuple[str, int, int], dict[int, float]] | None = None,
) -> FabricatedStudy:
    """Every run of the LUMI study under root/results: sweep, selection, scaling runs, indexes.
    `slower`: (dataset, nodes, prompts) -> factor for the points made slower than their profile;
    `jitter_of`: the same key -> the jitter of those points (noisier than the rest);
    `disturbed`: the same key -> {step: factor} for the steps of those points a busy machine slowed."""
    slower, jitter_of, disturbed = slower or {}, jitter_of or {}, disturbed or {}

    def write(run: Run) -> FabricatedRun:
        key = _key(run)
        return write_run(study, run, root, jitter_of.get(key, jitter), slower.get(key, 1.0), disturbed.get(key))

    sets = [*STUDY_SETS, *sets]
    study = load_study(paths.DEFAULT_CONFIG, sets=sets, site=SITE)
    model = paths.model_dir(root, study.site_name)
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_bytes(QWEN3_8B_CONFIG.read_bytes())
    runs: dict[str, FabricatedRun] = {}
    for run in known_runs(build_plan(study, root=root)):
        runs[run.run_id] = write(run)

    selections: dict[str, dict[str, Any]] = {}
    chosen: dict[str, int] = {}
    for dataset in study.datasets:
        if study.config.selection.get(dataset) is not None:
            continue
        sweep = [r for r in runs.values() if r.run.dataset == dataset and r.run.series == ["sweep"]]
        output = paths.selection_file(root, dataset)
        argv = ["select", *study_args(sets, root), "--dataset", dataset, "--output", str(output)]
        run_cli([*argv, *[str(r.summary_path) for r in sweep]])
        selections[dataset] = json.loads(output.read_text())
        chosen[dataset] = selections[dataset]["selected"]["prompts"]

    plan = build_plan(study, selection=chosen, root=root)
    for run in plan:
        assert isinstance(run, Run)
        if run.run_id in runs:
            # the selected sweep point is also the 1-node weak run
            runs[run.run_id].run = run
        else:
            runs[run.run_id] = write(run)

    index_paths = []
    for dataset in study.datasets:
        output = paths.results_dir(root) / "index" / f"{dataset}.json"
        argv = ["index", *study_args(sets, root), "--dataset", dataset, "--output", str(output)]
        if dataset in selections:
            argv += ["--selection", str(paths.selection_file(root, dataset))]
        summaries = [str(r.summary_path) for r in runs.values() if r.run.dataset == dataset]
        run_cli([*argv, *summaries])
        index_paths.append(output)
    return FabricatedStudy(
        root=root,
        study=study,
        plan=plan,
        runs=runs,
        selections=selections,
        index_paths=index_paths,
        results=load_results(index_paths, root),
    )


@dataclass
class PublishedStudy:
    """A fabricated study with its tables, figures and report, made as the rules make them."""

    study: FabricatedStudy
    tables: Path
    figures: Path
    report: Path


def publish_study(
    root: Path,
    slower: dict[tuple[str, int, int], float] | None = None,
    disturbed: dict[tuple[str, int, int], dict[int, float]] | None = None,
    figure_formats: tuple[str, ...] | None = None,
) -> PublishedStudy:
    """`figure_formats=()`: the figures' captions and data without their PNG and PDF files, for tests
    that read neither (drawing them is most of the time here). The figures rule always saves both;
    test_publish and test_bundle publish the study that way, as test_local_study runs the rule."""
    from rlvr_scaling.analysis.shown.figure_data import FORMATS
    from rlvr_scaling.analysis.shown.figures import write_figures
    from rlvr_scaling.analysis.shown.table_files import write_tables
    from rlvr_scaling.analysis.verdict.reproduction import reproduction_rows
    from rlvr_scaling.publish.report import render_report

    study = fabricate_study(root, slower=slower, disturbed=disturbed)
    reference = study.study.config.scaling.strong_reference_nodes
    published = study.study.reference()
    tables, figures, report = Path("results/tables"), Path("results/figures"), Path("results/report/study.md")
    # As the rules run them: from the study's root, with relative paths.
    with contextlib.chdir(root):
        write_tables(study.results, reference, tables, reproduction_rows(study.results, study.study.config, published))
        write_figures(study.results, reference, figures, FORMATS if figure_formats is None else figure_formats)
        render_report(study.study.config, study.results, tables, figures, report, published)
    return PublishedStudy(study, root / tables, root / figures, root / report)
