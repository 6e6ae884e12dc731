"""Study-shaped run directories (LUMI, published selection) written and read back through the real code.

spec.json comes from `run_records.spec_document`, the selection and the indexes from the CLI's `select` and
`index`, every summary from `summarize` on the run directory: only the per-step numbers are made up
here, and they are kept (`FabricatedRun.steps`) so tests can compute the expected tables on their own.
"""

from __future__ import annotations

import contextlib
import io
import json
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

from .published_timings import (
    FAILED_POINTS,
    step_records,
)

# The study's model's config.json as Hugging Face serves it (Qwen/Qwen3-8B): the shape MFU counts from.
QWEN3_8B_CONFIG = Path(__file__).parents[1] / "config" / "models" / "Qwen__Qwen3-8B.json"
PUBLISHED: dict[str, int] = read_yaml(paths.CONFIG_DIR / "published-selection.yaml")["selection"]
# GSM8K stays unpinned so that its sweep is in the plan and the selection is made from it; DAPO is
# pinned to its published workload, as with config/published-selection.yaml.
# The GSM8K sweep is a grid, so that every point is measured, the one that runs out of memory too (a
# sequential sweep would stop at the 150 prompts over the memory cap: tests/test_sequential_sweep.py).
STUDY_SETS = [f"selection.dapo_math={PUBLISHED['dapo_math']}", "selection_rule.sweep_order=grid"]
SITE = "lumi"


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
    """verl file-logger records for `run` (published_timings.step_records): each measured step varies
    by up to +-jitter per figure; `slower`: every phase that many times its profile (a planted
    deviation); `disturbed`: step -> factor, those steps' phases that many times as long."""
    assert run.trajectories is not None
    return step_records(
        _key(run),
        run.steps,
        run.warmup_steps,
        run.trajectories,
        run.nodes * run.gpus_per_node,
        run.max_response_length,
        float(study.config.algorithm.lr),
        jitter,
        slower,
        disturbed,
    )


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
        "model": model_record(paths.model_dir(root, study.site_name, study.model_folder) / "config.json"),
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
    model = paths.model_dir(root, study.site_name, study.model_folder)
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
    model = paths.model_dir(root, study.site_name, study.model_folder)
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
