"""What each `rlvr-scaling` subcommand does: it reads its arguments and calls the package (cli.py
declares the arguments). Each imports what it needs when it runs: `plan` and the rules' lookups stay
fast on a login node, without pandas, matplotlib or anything of the engine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlvr_scaling.errors import StudyError
from rlvr_scaling.fsutil import print_json, write_json, write_text_atomically


def _load(args: argparse.Namespace):
    from rlvr_scaling.study.config import load_study

    return load_study(args.config, sets=args.sets, site=args.site)


def _at_root(args: argparse.Namespace, value: str) -> Path:
    """A path of the analysis commands' command line: a relative one is under --root, as the paths
    inside the records are, so the commands work on a study from any directory."""
    path = Path(value)
    return path if path.is_absolute() else Path(args.root) / path


def _all_at_root(args: argparse.Namespace, values: list[str]) -> list[Path]:
    return [_at_root(args, value) for value in values]


def cmd_plan(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection_io import current_plan, skipped_sweep_points
    from rlvr_scaling.analysis.cost.budget import budget_line, cost_function, study_cost
    from rlvr_scaling.inputs.data_check import check_inputs
    from rlvr_scaling.plan_view import (
        build_line,
        datasets_line,
        lock_line,
        memory_table,
        plan_table,
        preflight_line,
        results_line,
        site_note,
        sweep_savings,
    )

    study = _load(args)
    check_inputs(study)
    if args.nodes:
        from rlvr_scaling.analysis.cost.prediction_view import parse_nodes, prediction_text

        sys.stdout.write(prediction_text(study, Path(args.root), parse_nodes(args.nodes)))
        return 0
    root = Path(args.root)
    plan = current_plan(study, root)
    if not args.json:
        cost_of, basis = cost_function(study, plan, root)
        sys.stdout.write(plan_table(study, plan, root, cost_of, basis))
        for line in sweep_savings(skipped_sweep_points(study, root), cost_of):
            print(line)
        print(datasets_line(study))
        print(budget_line(study_cost(study, plan, root)))
        for line in memory_table(study, plan, root):
            print(line)
        if line := build_line(study):
            print(line)
        print(preflight_line(study, plan))
        print(results_line(study, Path(args.root)))
        if line := lock_line(study):
            print(line)
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
    from rlvr_scaling.analysis.across_runs.selection_io import current_plan
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

    chosen = select_from_files(_load(args), args.dataset, _all_at_root(args, args.summaries))
    write_json(_at_root(args, args.output), chosen)
    print(f"selection for {args.dataset}: {chosen['reason']}")
    return 0


def cmd_sweep_step(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection import sweep_step_from_files

    step = sweep_step_from_files(_load(args), args.dataset, _all_at_root(args, args.summaries))
    write_json(_at_root(args, args.output), step)
    print(f"sweep of {args.dataset}: {step['reason']}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.per_run.results_io import index_dataset

    selection = _at_root(args, args.selection) if args.selection else None
    summaries = _all_at_root(args, args.summaries)
    index_dataset(_load(args), args.dataset, selection, summaries, Path(args.root), _at_root(args, args.output))
    return 0


def _results(args: argparse.Namespace):
    from rlvr_scaling.analysis.per_run.results_io import load_results

    return load_results(_all_at_root(args, args.indexes), Path(args.root))


def cmd_tables(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.shown.table_files import write_tables
    from rlvr_scaling.analysis.verdict.reproduction import reproduction_rows

    study, results = _load(args), _results(args)
    verdicts = reproduction_rows(results, study.config, study.reference())
    reference_nodes = study.config.scaling.strong_reference_nodes
    written = write_tables(results, reference_nodes, _at_root(args, args.output), verdicts)
    print(f"{len(written)} table files in {args.output}")
    return 0


def cmd_figures(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.shown.figures import write_figures

    study = _load(args)
    reference = study.config.scaling.strong_reference_nodes
    written = write_figures(_results(args), reference, _at_root(args, args.output))
    print(f"{len(written)} figure files in {args.output}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.report import render_report

    study = _load(args)
    parts = _all_at_root(args, [args.tables, args.figures, args.output])
    render_report(study.config, _results(args), *parts, reference=study.reference())
    print(f"report: {args.output}")
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.bundle import write_bundle
    from rlvr_scaling.publish.history import history_path

    study = _load(args)
    indexes = _all_at_root(args, args.indexes)
    report, tables, figures = _all_at_root(args, [args.report, args.tables, args.figures])
    results = _results(args)
    archive = write_bundle(
        study, Path(args.root), _at_root(args, args.output), (report, tables, figures), results, indexes
    )
    print(f"bundle: {archive}")
    if args.sign:
        from rlvr_scaling.publish.signing import sign_bundle

        print(f"signature: {sign_bundle(archive, Path(args.sign))}")
    try:
        key = record_in_history(study, Path(args.root), results, archive)
    except StudyError as error:  # the bundle stands; the store can be filled by packing it again
        print(f"rlvr-scaling: warning: not recorded in the results store: {error}", file=sys.stderr)
        return 0
    print(f"results store: {history_path(Path(args.root))} (study {key[:12]})")
    return 0


def record_in_history(study, root: Path, results, archive: Path) -> str:
    """The finished study (its bundle) appended to the results store, with its verdicts."""
    import datetime as dt

    from rlvr_scaling.analysis.verdict.reproduction import reproduction_rows
    from rlvr_scaling.execution.provenance import git_commit
    from rlvr_scaling.publish.bundle import provenance_record
    from rlvr_scaling.publish.history import history_path, record_study

    reference = study.reference()
    rules = {}
    if reference is not None:
        default = reference["default_tolerance"]
        rules = {e["id"]: e.get("tolerance", default) for e in [*reference["numbers"], *reference.get("relations", [])]}
    verdicts = reproduction_rows(results, study.config, reference)
    provenance = provenance_record(study, results, git_commit())
    recorded = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return record_study(history_path(root), root, results, archive, provenance, verdicts, rules, recorded)


def cmd_history(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.history import history_path, study_history

    listed = study_history(history_path(Path(args.root)))
    if args.json:
        print_json(listed, sys.stdout)
        return 0
    if not listed:
        print(f"no study in {history_path(Path(args.root))} yet: a finished study's bundle step records it")
        return 0
    for entry in listed:
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(entry["verdicts"].items())) or "no reference"
        print(
            f"{entry['recorded']}  {entry['key'][:12]}  {entry['name']} on {entry['site']}  verl {entry['verl']}  "
            f"{entry['runs']} scaling points  {verdicts}"
        )
        if entry["recorded_again"]:
            print(f"    recorded again unchanged, last {entry['recorded_again']} ({entry['bundle']})")
        if entry["changes"] is not None:
            print("    changed since the last entry of this study:")
            print(
                "".join(f"      {line}\n" for line in entry["changes"] or ["(nothing in its runs or settings)"]), end=""
            )
        if entry["since"] is None:
            print("    first study of its settings")
        elif entry["moved"]:
            print(f"    moved beyond its tolerance since {entry['since'][:12]}:")
            print("".join(f"      {line}\n" for line in entry["moved"]), end="")
        else:
            print(f"    nothing moved beyond its tolerance since {entry['since'][:12]}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    import tempfile

    from rlvr_scaling.publish.study_comparison import compare_studies

    with tempfile.TemporaryDirectory(prefix="rlvr-compare-") as scratch:
        output = Path(args.output) if args.output else None
        found = compare_studies(Path(args.a), Path(args.b), output, args.force, Path(scratch), args.margin)
    if args.json:
        print_json(found, sys.stdout)
        return 0
    for row in found["rows"]:
        ratio = f"{row['ratio']:.3f} [{row['ratio_ci_low']:.3f}, {row['ratio_ci_high']:.3f}]" if row["ratio"] else "-"
        where = f"{row['dataset']:<10} {row['series']:<6} {row['nodes']:>3} node(s)"
        notes = []
        if row["verdict"] == "inconclusive":
            notes.append(f"could detect +-{row['detectable_change']:.1%}")
        if row["disturbed"]:
            notes.append(f"disturbed run in {row['disturbed']}")
        note = f" ({'; '.join(notes)})" if notes else ""
        print(f"{where}  B/A step time {ratio:<26} {row['verdict']}{note}")
    print()
    print(found["summary"])
    for path in found["written"]:
        print(f"wrote {path}")
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.signing import sign_bundle

    print(f"signature: {sign_bundle(Path(args.bundle), Path(args.key))}")
    return 0


def cmd_time_spent(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.time_spent import read_timeline, time_spent_lines

    print("\n".join(time_spent_lines(Path(args.root), read_timeline(Path(args.timeline)))))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.signing import check_signature, signature_path
    from rlvr_scaling.publish.verify import verify_bundle

    bundle = Path(args.bundle)
    if not bundle.is_file():
        raise StudyError(f"verify: {bundle} is not a file")
    result = verify_bundle(bundle)
    signer = None
    if args.allowed_signers:
        signer, problem = check_signature(bundle, Path(args.allowed_signers))
        if problem:
            result.problems.insert(0, problem)
    for problem in result.problems:
        print(f"MISMATCH {problem}")
    counts = ", ".join(f"{count} {what}" for what, count in result.checked.items())
    if not result.problems:
        if signer:
            signed = f", signed by {signer}"
        elif signature_path(bundle).is_file():
            signed = f"; {signature_path(bundle).name} not checked (give --allowed-signers)"
        else:
            signed = ", unsigned"
        print(f"verified {bundle.name}: {counts}, all as recomputed{signed}")
        evidence = ", ".join(f"{kind} x{count}" for kind, count in result.evidence.items())
        print(f"checked by checksum only (evidence, not recomputed): {evidence}")
        return 0
    print(
        f"rlvr-scaling: {bundle.name} does not verify: {len(result.problems)} problem(s) ({counts} checked)",
        file=sys.stderr,
    )
    return 1


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
    run_dir, summary = import_run(_load(args), Path(args.log), shape, Path(args.root), model_config)
    print(f"imported {args.log} as {run_dir}; summary {summary}")
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


def cmd_resolve_check(args: argparse.Namespace) -> int:
    from rlvr_scaling.inputs.resolve_check import resolve_check, verdict_text

    verdict = resolve_check(_load(args), Path(args.base_packages) if args.base_packages else None)
    if args.json:
        print_json(verdict.to_json(), sys.stdout)
    else:
        sys.stdout.write(verdict_text(verdict))
    return 0 if verdict.ok else 1


def cmd_preflight(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection_io import read_selections
    from rlvr_scaling.execution.preflight import run_preflight

    study = _load(args)
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


def cmd_status(args: argparse.Namespace) -> int:
    from rlvr_scaling.analysis.across_runs.selection_io import current_plan
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
