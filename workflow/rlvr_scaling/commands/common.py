"""What the commands share: declaring a subcommand and the study's options, the study of the command line, and
paths under --root."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr_scaling import paths


def load_study_of(args: argparse.Namespace):
    from rlvr_scaling.study.config import load_study

    return load_study(args.config or [paths.DEFAULT_CONFIG], sets=args.sets, site=args.site)


def at_root(args: argparse.Namespace, value: str) -> Path:
    """A path of the analysis commands' command line: a relative one is under --root, as the paths
    inside the records are, so the commands work on a study from any directory."""
    path = Path(value)
    return path if path.is_absolute() else Path(args.root) / path


def all_at_root(args: argparse.Namespace, values: list[str]) -> list[Path]:
    return [at_root(args, value) for value in values]


def results_of(args: argparse.Namespace):
    from rlvr_scaling.analysis.per_run.results_io import load_results

    return load_results(all_at_root(args, args.indexes), Path(args.root))


def study_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        action="append",
        default=None,
        help=f"study file; several are read in order, as snakemake --configfile A B reads them (default: "
        f"{paths.DEFAULT_CONFIG})",
    )
    parser.add_argument("--site", default=None, help="site name in config/sites/ (default: the config's site)")
    parser.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="override a dotted config key"
    )
    parser.add_argument("--root", default=".", help="working directory holding results/ (default: .)")


def peak_tflops(text: str) -> float | str | None:
    """A site's BF16 peak per GPU in TFLOP/s; `none`; `spec`: the run's spec.json's."""
    if text in ("none", "spec"):
        return None if text == "none" else text
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive finite number, none or spec")
    return value


def add_command(sub: Any, name: str, func: Callable[[argparse.Namespace], int], text: str, study: bool = True) -> Any:
    command = sub.add_parser(name, help=text)
    if study:
        study_args(command)
    command.set_defaults(func=func)
    return command
