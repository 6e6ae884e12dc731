"""The commands that drive a stage before the analysis: plan, inputs (data, model, the container), step settings,
the preflight, launching a run, and status."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlvr_scaling.commands.common import add_command, load_study_of
from rlvr_scaling.errors import StudyError
from rlvr_scaling.fsutil import print_json, write_text_atomically

if TYPE_CHECKING:
    from rlvr_scaling.study.config import Study
    from rlvr_scaling.study.plan import PlannedRun


def cmd_plan(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection_io import current_plan
    from rlvr_scaling.analysis.cost.run_estimates import priced_plan
    from rlvr_scaling.inputs.data_check import check_inputs
    from rlvr_scaling.inputs.step_size import check_step_sizes
    from rlvr_scaling.plan_view import plan_records, site_note

    study = load_study_of(args)
    check_inputs(study)
    if args.nodes:
        from rlvr_scaling.analysis.cost.prediction_view import parse_nodes, prediction_text

        sys.stdout.write(prediction_text(study, Path(args.root), parse_nodes(args.nodes)))
        return 0
    root = Path(args.root)
    plan = current_plan(study, root)
    check_step_sizes(study, plan, root)
    if not args.json:
        _print_plan(study, plan, root)
        return 0
    # Each run's estimate, time limit and guard bounds from what is measured so far (none: the plan's).
    print_json(plan_records(study, priced_plan(study, plan, root), root), sys.stdout)
    if note := site_note(study):
        print(f"rlvr-scaling: note: {note}", file=sys.stderr)
    return 0


def _print_plan(study: Study, plan: list[PlannedRun], root: Path) -> None:
    """`plan`'s text: the runs priced from what is measured so far (analysis.cost.run_estimates), the
    budget, memory, the jobs before the runs, each run's hang guard bounds, the preflight, where."""
    from rlvr_scaling.analysis.across_runs.selection_io import skipped_sweep_points
    from rlvr_scaling.analysis.cost.budget import budget_line, cost_function, study_cost
    from rlvr_scaling.analysis.cost.run_estimates import priced_plan
    from rlvr_scaling.guard_view import guard_line, guard_table
    from rlvr_scaling.plan_view import (
        build_line,
        datasets_line,
        fabric_line,
        jobs_line,
        lock_line,
        memory_table,
        plan_table,
        preflight_line,
        release_line,
        results_line,
        sweep_savings,
    )

    cost_of, basis = cost_function(study, plan, root)
    priced = priced_plan(study, plan, root)
    sys.stdout.write(plan_table(study, priced, root, cost_of, basis))
    for line in sweep_savings(skipped_sweep_points(study, root), cost_of):
        print(line)
    print(datasets_line(study))
    print(budget_line(study_cost(study, plan, root)))
    for line in memory_table(study, priced, root):
        print(line)
    notes = (jobs_line(study), release_line(study), build_line(study), fabric_line(study, priced))
    for note in [*notes, guard_line(study, priced)]:
        if note:
            print(note)
    for line in guard_table(study, priced):
        print(f"  {line}")
    print(preflight_line(study, priced, root, cost_of))
    print(results_line(study, root))
    if lock := lock_line(study):
        print(lock)


def cmd_data(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.data import prepare_dataset
    from rlvr_scaling.inputs.self_check import summary_line

    manifest = prepare_dataset(load_study_of(args), args.dataset, Path(args.output))
    rows = {split: f["rows"] for split, f in manifest["files"].items()}
    print(f"dataset {args.dataset} ({manifest['source']}) written to {args.output}: {rows}")
    print(summary_line(args.dataset, manifest["self_check"]))
    for warning in manifest["self_check"]["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_data_preview(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.preview import preview

    study = load_study_of(args)
    names = [args.dataset] if args.dataset else study.datasets
    if args.dataset and args.dataset not in study.datasets:
        raise StudyError(f"--dataset {args.dataset!r}: the study has {', '.join(study.datasets)}")
    print("\n".join(preview(study, names, args.rows, Path(args.root))))
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.model import prepare_model

    manifest = prepare_model(load_study_of(args), Path(args.output))
    print(f"model {manifest['name']} ({manifest['source']}) written to {args.output}")
    return 0


def cmd_launch(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection_io import current_plan
    from rlvr_scaling.analysis.cost.run_estimates import RunEstimates
    from rlvr_scaling.execution.launch import RunFailed, launch
    from rlvr_scaling.study.plan import find_run

    study = load_study_of(args)
    root = Path(args.root).resolve()
    plan = current_plan(study, root)
    # Its estimate (the hang guard's bounds, job.json's time limit) from every run measured before it.
    run = RunEstimates.of(study, plan, root).run(find_run(plan, args.run_id))
    try:
        final = launch(study, run, root, timeout_s=args.timeout)
    except RunFailed as exc:
        print(f"rlvr-scaling: run failed: {exc}", file=sys.stderr)
        return 1
    print(f"run {run.run_id} succeeded: {final}")
    return 0


def cmd_container_definition(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.container import render_definition

    write_text_atomically(Path(args.output), render_definition(load_study_of(args)))
    print(f"container definition: {args.output}")
    return 0


def cmd_step_settings(args: argparse.Namespace) -> int:
    from rlvr_scaling.step_inputs import settings_path, settings_text

    study = load_study_of(args)
    expected = Path(settings_path(study, args.step)).name
    if Path(args.output).name != expected:
        raise StudyError(f"{args.output} is not the name of the {args.step} settings of this study ({expected})")
    write_text_atomically(Path(args.output), settings_text(study, args.step))
    return 0


def cmd_container_build(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.container_build import build_image

    facts = build_image(load_study_of(args), Path(args.definition), Path(args.image), Path(args.record))
    print(f"image: {args.image} sha256 {facts['image']['sha256']}; base sha256 {facts['base_image']['sha256']}")
    return 0


def cmd_resolve_check(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.kept_requirements import write_requires
    from rlvr_scaling.inputs.resolve_check import resolve_check, verdict_text

    base_file = Path(args.base_packages) if args.base_packages else None
    if args.write_requires:
        print(f"wrote {write_requires(load_study_of(args), base_file)}")
        return 0
    verdict = resolve_check(load_study_of(args), base_file)
    if args.json:
        print_json(verdict.to_json(), sys.stdout)
    else:
        sys.stdout.write(verdict_text(verdict))
    return 0 if verdict.ok else 1


def cmd_preflight(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection_io import read_selections
    from rlvr_scaling.execution.preflight.checks import run_preflight

    study = load_study_of(args)
    root = Path(args.root)
    record, written = run_preflight(study, root, Path(args.output), read_selections(root, study))
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


def positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"--watch has value {text!r}: expected a number of seconds above 0")
    return seconds


def cmd_status(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection_io import current_plan
    from rlvr_scaling.live_view import live_document, live_view, render_live, watch, where_it_stands
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
    plan = current_plan(study, root)
    if args.watch is not None:
        return watch(lambda: render_live(study, *live_view(study, plan, root)), args.watch)
    running, money, now = live_view(study, plan, root)
    if args.running:
        document, text = live_document(running, money), render_live(study, running, money, now)
    else:
        # Snakemake's summary only after the runs' own state: that was read from the results and Slurm.
        going_on = {run.run_id: where_it_stands(run) for run in running if run.alive}
        entries = study_status(snakemake_summary(root, snakemake_args(configfiles, args.site)), plan, root, going_on)
        document = {**status_document(study, entries), **live_document(running, money)}
        text = render_status(study, entries) + "\n" + render_live(study, running, money, now)
    if args.json:
        print_json(document, sys.stdout)
    else:
        sys.stdout.write(text)
    return 0


def add_commands(sub: Any) -> None:
    """Declare these commands' arguments on the `rlvr-scaling` parser's subcommands. Over 60 lines because
    each of the seven subcommands' arguments stand here one after another, beside the functions that read them."""
    plan = add_command(sub, "plan", cmd_plan, "print every run of the study")
    plan.add_argument("--json", action="store_true", help="print the plan as a JSON list")
    plan.add_argument(
        "--nodes",
        default=None,
        help="e.g. 32,64: predict step time, efficiency and cost there from the measured series",
    )
    data = add_command(sub, "data", cmd_data, "prepare one dataset in verl's schema, with a manifest")
    data.add_argument("--dataset", required=True)
    data.add_argument("--output", required=True, help="directory for train.parquet, val.parquet, manifest.json")
    data_preview = add_command(
        sub, "data-preview", cmd_data_preview, "show prepared rows as the model sees them, and the reward's self-check"
    )
    data_preview.add_argument("--dataset", default=None, help="one dataset (default: every dataset of the study)")
    data_preview.add_argument("--rows", type=int, default=2, help="training rows shown per dataset (default: 2)")
    model = add_command(sub, "model", cmd_model, "download the study's model, or build the tiny local one")
    model.add_argument("--output", required=True)
    definition = add_command(
        sub,
        "container-definition",
        cmd_container_definition,
        "render the image recipe (definition or SquashFS script)",
    )
    definition.add_argument("--output", required=True)
    build = add_command(
        sub,
        "container-build",
        cmd_container_build,
        "build the site's image and record its digests and packages",
    )
    resolve = add_command(
        sub,
        "resolve-check",
        cmd_resolve_check,
        "resolve the image's install against the base's package set, without building (network: PyPI)",
    )
    resolve.add_argument(
        "--base-packages", default=None, help="the base's `pip list --format=freeze` (default: the site's)"
    )
    resolve.add_argument("--json", action="store_true", help="print the verdict as JSON")
    resolve.add_argument(
        "--write-requires",
        action="store_true",
        help="write the kept packages' published requirements next to the base list (<base>.requires.json)",
    )
    build.add_argument("--definition", required=True)
    build.add_argument("--image", required=True)
    build.add_argument("--record", required=True, help="JSON: image and base sha256, labels, in-image packages")
    settings = add_command(sub, "step-settings", cmd_step_settings, "write the study's settings a step reads")
    settings.add_argument("--step", required=True, help="preflight, summary, ..., dataset@<name>")
    settings.add_argument("--output", required=True, help="results/steps/<step>-<digest>.json")
    preflight = add_command(sub, "preflight", cmd_preflight, "check the engine stack on the site before any run")
    preflight.add_argument("--output", required=True, help="results/preflight/<site>.json")
    launch = add_command(sub, "launch", cmd_launch, "run one run of the plan into results/runs/<run_id>")
    launch.add_argument("run_id")
    launch.add_argument("--timeout", type=float, default=None, help="seconds before the run is stopped")
    status = add_command(
        sub,
        "status",
        cmd_status,
        "every run and output: complete, stale, failed, missing, pending",
        False,
    )
    status.add_argument("--configfile", nargs="*", default=[], help="as given to snakemake, merged over the config")
    status.add_argument("--site", default=None, help="as snakemake --config site=... (default: the config's site)")
    status.add_argument("--root", default=".", help="the workflow's working directory (default: .)")
    status.add_argument("--json", action="store_true")
    status.add_argument(
        "--running",
        action="store_true",
        help="only the runs going on and the node-hours spent: read from the results and Slurm, not Snakemake",
    )
    status.add_argument(
        "--watch", type=positive_seconds, default=None, metavar="SECONDS", help="redraw the runs going on every SECONDS"
    )
