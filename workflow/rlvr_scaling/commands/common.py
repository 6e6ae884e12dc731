"""What the commands share: the study of the command line, and paths under --root."""

from __future__ import annotations

import argparse
from pathlib import Path


def load_study_of(args: argparse.Namespace):
    from rlvr_scaling.study.config import load_study

    return load_study(args.config, sets=args.sets, site=args.site)


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
