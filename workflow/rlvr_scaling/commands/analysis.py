"""The analysis commands: one metrics file, a run's summary, the sweep's selection and next step, the per-dataset
index, tables, figures, and importing a run made elsewhere."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rlvr_scaling.commands.common import add_command, all_at_root, at_root, load_study_of, peak_tflops, results_of
from rlvr_scaling.fsutil import print_json, write_json


def cmd_metrics(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.per_run.metrics_view import describe_inspection, inspect_metrics

    found = inspect_metrics(Path(args.file), args.n_gpus, args.warmup_steps, args.steps)
    if args.json:
        print_json(found.to_dict(), sys.stdout)
    else:
        sys.stdout.write(describe_inspection(found, args.n_gpus, args.warmup_steps))
    return 1 if found.problems else 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.per_run.summary import summarize_run

    summary = summarize_run(Path(args.run_dir), args.warmup_steps, args.peak_tflops_bf16)
    write_json(Path(args.output), summary.to_json())
    failed = "; ".join(c.detail for c in summary.failed_checks())
    print(f"{summary.run_id}: {'valid' if summary.valid else 'INVALID: ' + failed}")
    return 0


def cmd_select(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection import select_from_files

    chosen = select_from_files(load_study_of(args), args.dataset, all_at_root(args, args.summaries))
    write_json(at_root(args, args.output), chosen)
    print(f"selection for {args.dataset}: {chosen['reason']}")
    return 0


def cmd_sweep_step(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection import sweep_step_from_files

    step = sweep_step_from_files(load_study_of(args), args.dataset, all_at_root(args, args.summaries))
    write_json(at_root(args, args.output), step)
    print(f"sweep of {args.dataset}: {step['reason']}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.per_run.results_io import index_dataset

    selection = at_root(args, args.selection) if args.selection else None
    summaries = all_at_root(args, args.summaries)
    index_dataset(load_study_of(args), args.dataset, selection, summaries, Path(args.root), at_root(args, args.output))
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.shown.table_files import write_tables
    from rlvr_scaling.analysis.verdict.reproduction import reproduction_rows

    study, results = load_study_of(args), results_of(args)
    verdicts = reproduction_rows(results, study.config, study.reference())
    reference_nodes = study.config.scaling.strong_reference_nodes
    written = write_tables(results, reference_nodes, at_root(args, args.output), verdicts)
    print(f"{len(written)} table files in {args.output}")
    return 0


def cmd_figures(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.shown.figures import write_figures

    study = load_study_of(args)
    reference = study.config.scaling.strong_reference_nodes
    written = write_figures(results_of(args), reference, at_root(args, args.output))
    print(f"{len(written)} figure files in {args.output}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.per_run.imported_run import ImportedShape, import_run

    shape = ImportedShape(
        dataset=args.dataset,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        prompts=args.prompts,
        max_response_length=args.max_response_length,
        series=args.series or ["imported"],
        steps=args.steps,
        site_name=args.site_name,
        gpu_memory_gb=args.gpu_memory_gb,
        rollout_tensor_parallel=args.rollout_tensor_parallel,
        concurrency=args.concurrency,
    )
    model_config = Path(args.model_config) if args.model_config else None
    run_dir, summary = import_run(load_study_of(args), Path(args.log), shape, Path(args.root), model_config)
    print(f"imported {args.log} as {run_dir}; summary {summary}")
    return 0


def add_commands(sub: Any) -> None:
    """Declare these commands' arguments on the `rlvr-scaling` parser's subcommands."""
    metrics = add_command(
        sub,
        "metrics",
        cmd_metrics,
        "per-step metrics and their summary from a JSONL or console log",
        study=False,
    )
    metrics.add_argument("file")
    metrics.add_argument("--n-gpus", type=int, default=1, help="GPUs of the run (throughput is per GPU)")
    metrics.add_argument("--warmup-steps", type=int, default=1, help="leading steps left out of the summary")
    metrics.add_argument(
        "--steps", type=int, default=None, help="steps the run was configured for (default: the last one logged)"
    )
    metrics.add_argument("--json", action="store_true")
    summarize = add_command(sub, "summarize", cmd_summarize, "a run's summary with its validity checks", study=False)
    summarize.add_argument("run_dir")
    summarize.add_argument("--warmup-steps", type=int, help="leading steps left out (default: the run's spec)")
    summarize.add_argument(
        "--peak-tflops-bf16",
        type=peak_tflops,
        default="spec",
        help="the site's, for MFU; none: no MFU (default: the run's spec)",
    )
    summarize.add_argument("--output", required=True)
    selection = add_command(sub, "select", cmd_select, "choose the one-node workload from the sweep summaries")
    selection.add_argument("--dataset", required=True)
    selection.add_argument("--output", required=True)
    selection.add_argument("summaries", nargs="+")
    step = add_command(
        sub,
        "sweep-step",
        cmd_sweep_step,
        "whether a sequential sweep goes on after the points measured",
    )
    step.add_argument("--dataset", required=True)
    step.add_argument("--output", required=True)
    step.add_argument("summaries", nargs="+")
    index = add_command(sub, "index", cmd_index, "list a dataset's runs and summaries for the analysis")
    index.add_argument("--dataset", required=True)
    index.add_argument("--selection", default=None)
    index.add_argument("--output", required=True)
    index.add_argument("summaries", nargs="*")
    for name, func, text in (
        ("tables", cmd_tables, "the study's tables"),
        ("figures", cmd_figures, "the figures"),
    ):
        command = add_command(sub, name, func, f"write {text} from the dataset indexes")
        command.add_argument("--output", required=True)
        command.add_argument("indexes", nargs="+")
    _add_import_command(sub)


def _add_import_command(sub: Any) -> None:
    """`import`: the shape of a run made elsewhere, which its log does not say."""
    imported = add_command(sub, "import", cmd_import, "a verl run made elsewhere as a run directory")
    imported.add_argument("log", help="the run's console log or file-logger JSONL")
    imported.add_argument("--dataset", required=True)
    for option in ("--nodes", "--gpus-per-node", "--prompts", "--max-response-length"):
        imported.add_argument(option, type=int, required=True)
    imported.add_argument("--steps", type=int, default=None, help="steps the run was set to (default: the study's)")
    imported.add_argument("--series", action="append", choices=["sweep", "weak", "strong"], help="repeatable")
    imported.add_argument("--site-name", default="imported", help="where it ran (default: %(default)s)")
    imported.add_argument("--gpu-memory-gb", type=float, default=None, help="default: the --site's")
    imported.add_argument("--rollout-tensor-parallel", type=int, default=None, help="default: the study's")
    imported.add_argument("--concurrency", type=int, default=None, help="vLLM max_num_seqs per engine")
    imported.add_argument(
        "--model-config", default=None, help="the trained model's config.json, for MFU (default: the study's model's)"
    )
