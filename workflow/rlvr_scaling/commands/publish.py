"""The publishing commands: the report, the bundle and the study history, compare, sign, verify, and where the
demo's time went."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rlvr_scaling.commands.common import add_command, all_at_root, at_root, load_study_of, results_of
from rlvr_scaling.errors import StudyError
from rlvr_scaling.fsutil import print_json


def cmd_report(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.report import render_report

    study = load_study_of(args)
    tables, figures, output = all_at_root(args, [args.tables, args.figures, args.output])
    render_report(study.config, results_of(args), tables, figures, output, reference=study.reference())
    print(f"report: {args.output}")
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    from rlvr_scaling.publish.bundle import write_bundle
    from rlvr_scaling.publish.history import history_path

    study = load_study_of(args)
    indexes = all_at_root(args, args.indexes)
    report, tables, figures = all_at_root(args, [args.report, args.tables, args.figures])
    results = results_of(args)
    archive = write_bundle(
        study, Path(args.root), at_root(args, args.output), (report, tables, figures), results, indexes
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


def add_commands(sub: Any) -> None:
    """Declare these commands' arguments on the `rlvr-scaling` parser's subcommands."""
    report = add_command(sub, "report", cmd_report, "write the study report")
    for option in ("--tables", "--figures", "--output"):
        report.add_argument(option, required=True)
    report.add_argument("indexes", nargs="+")
    bundle = add_command(sub, "bundle", cmd_bundle, "pack the publication bundle")
    bundle.add_argument("--output", required=True, help="directory for <study>-<site>-<date>.tar.gz")
    for option in ("--report", "--tables", "--figures"):
        bundle.add_argument(option, required=True)
    bundle.add_argument("indexes", nargs="+")
    bundle.add_argument("--sign", default=None, help="an SSH private key: writes <bundle>.sig (ssh-keygen -Y sign)")
    sign = add_command(sub, "sign", cmd_sign, "sign a bundle with an SSH key: <bundle>.sig", False)
    sign.add_argument("bundle", help="<study>-<site>-<date>.tar.gz")
    sign.add_argument("--key", required=True, help="the SSH private key to sign with")
    compare = add_command(sub, "compare", cmd_compare, "two studies side by side, a verdict per point", False)
    compare.add_argument("a", help="study A: a bundle (.tar.gz) or a study folder (holding results/index/)")
    compare.add_argument("b", help="study B, compared with A")
    compare.add_argument("--output", default=None, help="folder for compare.csv/.md/.tex, compare.png, compare.txt")
    compare.add_argument("--force", action="store_true", help="compare studies of another model or workload too")
    compare.add_argument(
        "--margin",
        type=float,
        default=0.05,
        help="equivalence margin: 'same' only when B/A's whole interval lies within 1 +- this (default 0.05)",
    )
    compare.add_argument("--json", action="store_true", help="print rows, differences and summary as JSON")
    history = add_command(sub, "history", cmd_history, "the finished studies, and what moved between them", False)
    history.add_argument("--root", default=".", help="the workflow's working directory (default: .)")
    history.add_argument("--json", action="store_true")
    spent = add_command(sub, "time-spent", cmd_time_spent, "where a study's time went (make demo prints it)", False)
    spent.add_argument("timeline", help="'<phase> <epoch seconds>' lines, in order (make demo writes them)")
    spent.add_argument("--root", default=".", help="the workflow's working directory (default: .)")
    verify = add_command(sub, "verify", cmd_verify, "check a bundle offline: checksums, then every number", False)
    verify.add_argument("bundle", help="<study>-<site>-<date>.tar.gz")
    verify.add_argument(
        "--allowed-signers", default=None, help="OpenSSH allowed_signers file: <bundle>.sig must be by one of them"
    )
