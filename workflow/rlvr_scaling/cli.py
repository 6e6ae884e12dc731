"""The `rlvr-scaling` command: one subcommand per pipeline step; the Snakemake rules call these."""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.fsutil import print_json, write_json, write_text_atomically


def _study_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=str(paths.DEFAULT_CONFIG), help="study file (default: %(default)s)")
    parser.add_argument("--site", default=None, help="site name in config/sites/ (default: the config's site)")
    parser.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="override a dotted config key"
    )
    parser.add_argument("--root", default=".", help="working directory holding results/ (default: .)")


def _load(args: argparse.Namespace):
    from rlvr_scaling.study.config import load_study

    return load_study(args.config, sets=args.sets, site=args.site)


# Each subcommand imports what it needs when it runs: `plan` and the rules' lookups stay fast on a login
# node, without pandas, matplotlib or anything of the engine.


def cmd_plan(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.selection_io import current_plan
    from rlvr_scaling.study.plan_view import plan_table, results_line, site_note

    study = _load(args)
    plan = current_plan(study, Path(args.root))
    if not args.json:
        sys.stdout.write(plan_table(study, plan))
        print(results_line(study, Path(args.root)))
        return 0
    print_json([run.to_dict() for run in plan], sys.stdout)
    if note := site_note(study):
        print(f"rlvr-scaling: note: {note}", file=sys.stderr)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.data import prepare_dataset

    manifest = prepare_dataset(_load(args), args.dataset, Path(args.output))
    rows = {split: f["rows"] for split, f in manifest["files"].items()}
    print(f"dataset {args.dataset} ({manifest['source']}) written to {args.output}: {rows}")
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.model import prepare_model

    manifest = prepare_model(_load(args), Path(args.output))
    print(f"model {manifest['name']} ({manifest['source']}) written to {args.output}")
    return 0


def cmd_launch(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.selection_io import current_plan
    from rlvr_scaling.execution.launch import RunFailed, launch
    from rlvr_scaling.study.plan import find_run

    study = _load(args)
    root = Path(args.root).resolve()
    run = find_run(current_plan(study, root), args.run_id)
    try:
        final = launch(study, run, root, timeout_s=args.timeout)
    except RunFailed as exc:
        print(f"rlvr-scaling: run failed: {exc}", file=sys.stderr)
        return 1
    print(f"run {run.run_id} succeeded: {final}")
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.metrics_view import describe_inspection, inspect_metrics

    found = inspect_metrics(Path(args.file), args.n_gpus, args.warmup_steps, args.steps)
    if args.json:
        print_json(found.to_dict(), sys.stdout)
    else:
        sys.stdout.write(describe_inspection(found, args.n_gpus, args.warmup_steps))
    return 1 if found.problems else 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.summary import summarize_run

    summary = summarize_run(Path(args.run_dir), args.warmup_steps)
    write_json(Path(args.output), summary.to_json())
    failed = "; ".join(c.detail for c in summary.failed_checks())
    print(f"{summary.run_id}: {'valid' if summary.valid else 'INVALID: ' + failed}")
    return 0


def cmd_select(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.selection import select_from_files

    chosen = select_from_files(_load(args), args.dataset, [Path(p) for p in args.summaries])
    write_json(Path(args.output), chosen)
    print(f"selection for {args.dataset}: {chosen['reason']}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.results_io import index_dataset

    selection = Path(args.selection) if args.selection else None
    summaries = [Path(p) for p in args.summaries]
    index_dataset(_load(args), args.dataset, selection, summaries, Path(args.root), Path(args.output))
    return 0


def _results(args: argparse.Namespace):
    from rlvr_scaling.analysis.results_io import load_results

    return load_results([Path(p) for p in args.indexes], Path(args.root))


def cmd_tables(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.tables import write_tables

    study = _load(args)
    written = write_tables(_results(args), study.config.scaling.strong_reference_nodes, Path(args.output))
    print(f"{len(written)} table files in {args.output}")
    return 0


def cmd_figures(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.figures import write_figures

    study = _load(args)
    reference = study.config.scaling.strong_reference_nodes
    written = write_figures(_results(args), reference, Path(args.output))
    print(f"{len(written)} figure files in {args.output}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.report import render_report

    study = _load(args)
    render_report(study.config, _results(args), Path(args.tables), Path(args.figures), Path(args.output))
    print(f"report: {args.output}")
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.bundle import write_bundle

    study = _load(args)
    indexes = [Path(p) for p in args.indexes]
    parts = (Path(args.report), Path(args.tables), Path(args.figures))
    count = write_bundle(Path(args.root), Path(args.output), *parts, _results(args), indexes, study.config.to_dict())
    print(f"bundle {args.output}: {count} files")
    return 0


def cmd_container_definition(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.container import render_definition

    write_text_atomically(Path(args.output), render_definition(_load(args)))
    print(f"container definition: {args.output}")
    return 0


def cmd_step_settings(args: argparse.Namespace) -> int:
    from rlvr_scaling.step_inputs import settings_path, settings_text

    study = _load(args)
    expected = Path(settings_path(study, args.step)).name
    if Path(args.output).name != expected:
        raise StudyError(f"{args.output} is not the name of the {args.step} settings of this study ({expected})")
    write_text_atomically(Path(args.output), settings_text(study, args.step))
    return 0


def cmd_container_build(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.container_build import build_image

    facts = build_image(_load(args), Path(args.definition), Path(args.image), Path(args.record))
    print(f"image: {args.image} sha256 {facts['image']['sha256']}; base sha256 {facts['base_image']['sha256']}")
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    from rlvr_scaling.execution.preflight import run_preflight

    study = _load(args)
    record, written = run_preflight(study, Path(args.root), Path(args.output))
    engine = record["engine"]
    versions = ", ".join(f"{k} {v}" for k, v in engine.get("versions", {}).items() if v)
    print(
        f"preflight on site '{study.site_name}': Python {engine.get('python')}, {versions}; "
        f"{record['runs_checked']} runs composed"
    )
    for warning in record["warnings"]:
        print(f"rlvr-scaling: warning: {warning}", file=sys.stderr)
    if not record["problems"]:
        print(f"preflight passed: {written}")
        return 0
    print(f"rlvr-scaling: preflight found {len(record['problems'])} problem(s) (record: {written}):", file=sys.stderr)
    for problem in record["problems"]:
        print(f"  - {problem}", file=sys.stderr)
    return 1


def cmd_status(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.selection_io import current_plan
    from rlvr_scaling.status import (
        render_status,
        snakemake_args,
        snakemake_summary,
        status_document,
        study_as_snakemake_reads_it,
        study_status,
    )

    root = Path(args.root)
    configfiles = [str(Path(path).resolve()) for path in args.configfile]
    study = study_as_snakemake_reads_it(configfiles, args.site)
    outputs = snakemake_summary(root, snakemake_args(configfiles, args.site))
    entries = study_status(outputs, current_plan(study, root), root)
    if args.json:
        print_json(status_document(study, entries), sys.stdout)
    else:
        sys.stdout.write(render_status(study, entries))
    return 0


def _command(sub: Any, name: str, func: Callable[[argparse.Namespace], int], text: str, study: bool = True) -> Any:
    command = sub.add_parser(name, help=text)
    if study:
        _study_args(command)
    command.set_defaults(func=func)
    return command


def _add_stage_commands(sub: Any) -> None:
    from rlvr_scaling.step_inputs import SETTINGS_STEPS

    plan = _command(sub, "plan", cmd_plan, "print every run of the study")
    plan.add_argument("--json", action="store_true", help="print the plan as a JSON list")
    data = _command(sub, "data", cmd_data, "prepare one dataset in verl's schema, with a manifest")
    data.add_argument("--dataset", required=True)
    data.add_argument("--output", required=True, help="directory for train.parquet, val.parquet, manifest.json")
    model = _command(sub, "model", cmd_model, "download the study's model, or build the tiny local one")
    model.add_argument("--output", required=True)
    definition = _command(
        sub, "container-definition", cmd_container_definition, "render the image recipe (definition or SquashFS script)"
    )
    definition.add_argument("--output", required=True)
    build = _command(
        sub, "container-build", cmd_container_build, "build the site's image and record its digests and packages"
    )
    build.add_argument("--definition", required=True)
    build.add_argument("--image", required=True)
    build.add_argument("--record", required=True, help="JSON: image and base sha256, labels, in-image packages")
    settings = _command(sub, "step-settings", cmd_step_settings, "write the study's settings a step reads")
    settings.add_argument("--step", required=True, choices=SETTINGS_STEPS)
    settings.add_argument("--output", required=True, help="results/steps/<step>-<digest>.json")
    preflight = _command(sub, "preflight", cmd_preflight, "check the engine stack on the site before any run")
    preflight.add_argument("--output", required=True, help="results/preflight/<site>.json")
    launch = _command(sub, "launch", cmd_launch, "run one run of the plan into results/runs/<run_id>")
    launch.add_argument("run_id")
    launch.add_argument("--timeout", type=float, default=None, help="seconds before the run is stopped")


def _add_analysis_commands(sub: Any) -> None:
    metrics = _command(
        sub, "metrics", cmd_metrics, "per-step metrics and their summary from a JSONL or console log", study=False
    )
    metrics.add_argument("file")
    metrics.add_argument("--n-gpus", type=int, default=1, help="GPUs of the run (throughput is per GPU)")
    metrics.add_argument("--warmup-steps", type=int, default=1, help="leading steps left out of the summary")
    metrics.add_argument(
        "--steps", type=int, default=None, help="steps the run was configured for (default: the last one logged)"
    )
    metrics.add_argument("--json", action="store_true")
    summarize = _command(sub, "summarize", cmd_summarize, "a run's summary with its validity checks", study=False)
    summarize.add_argument("run_dir")
    summarize.add_argument("--warmup-steps", type=int, help="leading steps left out (default: the run's spec)")
    summarize.add_argument("--output", required=True)
    selection = _command(sub, "select", cmd_select, "choose the one-node workload from the sweep summaries")
    selection.add_argument("--dataset", required=True)
    selection.add_argument("--output", required=True)
    selection.add_argument("summaries", nargs="+")
    index = _command(sub, "index", cmd_index, "list a dataset's runs and summaries for the analysis")
    index.add_argument("--dataset", required=True)
    index.add_argument("--selection", default=None)
    index.add_argument("--output", required=True)
    index.add_argument("summaries", nargs="*")
    for name, func, text in (("tables", cmd_tables, "the study's tables"), ("figures", cmd_figures, "the figures")):
        command = _command(sub, name, func, f"write {text} from the dataset indexes")
        command.add_argument("--output", required=True)
        command.add_argument("indexes", nargs="+")
    report = _command(sub, "report", cmd_report, "write the study report")
    for option in ("--tables", "--figures", "--output"):
        report.add_argument(option, required=True)
    report.add_argument("indexes", nargs="+")
    bundle = _command(sub, "bundle", cmd_bundle, "pack the publication bundle")
    for option in ("--output", "--report", "--tables", "--figures"):
        bundle.add_argument(option, required=True)
    bundle.add_argument("indexes", nargs="+")
    status = _command(
        sub, "status", cmd_status, "every run and output: complete, stale, failed, missing, pending", False
    )
    status.add_argument("--configfile", nargs="*", default=[], help="as given to snakemake, merged over the config")
    status.add_argument("--site", default=None, help="as snakemake --config site=... (default: the config's site)")
    status.add_argument("--root", default=".", help="the workflow's working directory (default: .)")
    status.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr-scaling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_stage_commands(sub)
    _add_analysis_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except StudyError as exc:
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `rlvr-scaling plan --json | head`: the reader of our output has gone, which is not an error of
        # ours. Any other broken pipe (a socket, a child process) is.
        if not _stdout_reader_gone():
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 128 + signal.SIGPIPE


def _stdout_reader_gone() -> bool:
    """A pipe whose reading end is closed polls as an error for its writer."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _fd, event in poller.poll(0))
    except (OSError, ValueError):
        return False


if __name__ == "__main__":
    sys.exit(main())
