"""Prints, for every run of a finished study, the node-hours the site's estimate gave it, what the
calibration from the other runs gives it, and what it measured (launcher start to end x nodes); and
the error of each in total: the report's cost table and sentence (analysis.cost.cost_check), from the
study's indexes. Target: the calibrated total within 20%.

    .venv/bin/python benchmarks/cost_prediction.py WORKDIR

WORKDIR: a working directory whose study has finished (after `make demo`: the repository; after the
tests: the kept local-study folder, e.g. /tmp/keep/local-study0 with --basetemp=/tmp/keep). A run is
priced from the other runs only: its dataset's other sweep points for the step time, the other runs'
start-up and tear-down.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rlvr_scaling.analysis.cost.cost_check import cost_finding, cost_rows
from rlvr_scaling.analysis.per_run.results_io import load_results


def _cell(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workdir", type=Path)
    args = parser.parse_args()
    indexes = sorted((args.workdir / "results" / "index").glob("*.json"))
    rows = cost_rows(load_results(indexes, args.workdir))
    print(f"{'run':<28}{'nodes':>6}{'estimate':>10}{'calibrated':>12}{'measured':>10}")
    for r in rows:
        print(
            f"{r['run_id']:<28}{r['nodes']:>6}{_cell(r['estimated_node_hours']):>10}"
            f"{_cell(r['calibrated_node_hours']):>12}{_cell(r['measured_node_hours']):>10}"
        )
    print(cost_finding(rows))


if __name__ == "__main__":
    main()
