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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr-scaling", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="print every run of the study")
    _study_args(plan)
    plan.add_argument("--json", action="store_true", help="print the plan as a JSON list")
    plan.set_defaults(func=cmd_plan)
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
