"""The `rlvr-scaling` command: one subcommand per pipeline step; the Snakemake rules call these."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import paths
from .errors import StudyError


def _study_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=str(paths.DEFAULT_CONFIG), help="study file (default: %(default)s)")
    parser.add_argument("--site", default=None, help="site name in config/sites/ (default: the config's site)")
    parser.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="override a dotted config key"
    )
    parser.add_argument("--root", default=".", help="working directory holding results/ (default: .)")


def _load(args: argparse.Namespace):
    from .config import load_study

    return load_study(args.config, sets=args.sets, site=args.site)


def cmd_plan(args: argparse.Namespace) -> int:
    from .plan import build_plan
    from .plan_view import plan_table
    from .selection_io import read_selections

    study = _load(args)
    root = Path(args.root)
    plan = build_plan(study, read_selections(root, study.datasets), root)
    if args.json:
        json.dump([run.to_dict() for run in plan], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(plan_table(study, plan))
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from .data import prepare_dataset

    study = _load(args)
    if args.dataset not in study.datasets:
        raise StudyError(f"unknown dataset {args.dataset!r}: the study has {', '.join(study.datasets)}")
    manifest = prepare_dataset(study, args.dataset, Path(args.output))
    rows = {split: f["rows"] for split, f in manifest["files"].items()}
    print(f"dataset {args.dataset} ({manifest['source']}) written to {args.output}: {rows}")
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from .model import prepare_model

    manifest = prepare_model(_load(args), Path(args.output))
    print(f"model {manifest['name']} ({manifest['source']}) written to {args.output}")
    return 0


def cmd_launch(args: argparse.Namespace) -> int:
    from .launch import RunFailed, launch
    from .plan import find_run

    study = _load(args)
    root = Path(args.root).resolve()
    from .plan import build_plan
    from .selection_io import read_selections

    run = find_run(build_plan(study, read_selections(root, study.datasets), root), args.run_id)
    try:
        final = launch(study, run, root, timeout_s=args.timeout)
    except RunFailed as exc:
        print(f"rlvr-scaling: run failed: {exc}", file=sys.stderr)
        return 1
    print(f"run {run.run_id} succeeded: {final}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr-scaling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="print every run of the study")
    _study_args(plan)
    plan.add_argument("--json", action="store_true", help="print the plan as a JSON list")
    plan.set_defaults(func=cmd_plan)

    data = sub.add_parser("data", help="prepare one dataset in verl's schema, with a manifest")
    _study_args(data)
    data.add_argument("--dataset", required=True)
    data.add_argument("--output", required=True, help="directory for train.parquet, val.parquet, manifest.json")
    data.set_defaults(func=cmd_data)

    model = sub.add_parser("model", help="download the study's model, or build the tiny local one")
    _study_args(model)
    model.add_argument("--output", required=True)
    model.set_defaults(func=cmd_model)

    launch = sub.add_parser("launch", help="run one run of the plan into results/runs/<run_id>")
    _study_args(launch)
    launch.add_argument("run_id")
    launch.add_argument("--timeout", type=float, default=None, help="seconds before the run is stopped")
    launch.set_defaults(func=cmd_launch)
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


if __name__ == "__main__":
    sys.exit(main())
