"""Prints, for every run of a finished study, the node-hours the site's estimate gave it, what the
calibration from the measured sweep points and start-up gives it, and what it measured (job.json
start to end x nodes); and the error of each in total. Target: the calibrated total within 20%.

    .venv/bin/python benchmarks/cost_prediction.py WORKDIR [--config results/.study/config-*.json]

WORKDIR: a working directory whose study has finished (after `make demo`: the repository; after the
tests: pytest's kept local-study folder, /tmp/pytest-of-$USER/pytest-N/local-study0). A sweep point
is priced from the other sweep points only, so no run predicts itself.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rlvr_scaling.analysis.calibration import calibrate
from rlvr_scaling.analysis.selection_io import current_plan
from rlvr_scaling.study.budget import measured_node_hours
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import known_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--config", type=Path, default=None)
    args = parser.parse_args()
    config = args.config or next((args.workdir / "results" / ".study").glob("config-*.json"))
    study = load_study(config)
    plan = current_plan(study, args.workdir)
    full = calibrate(study, plan, args.workdir)
    totals = {"estimate": 0.0, "calibrated": 0.0, "measured": 0.0}
    print(f"{'run':<28}{'nodes':>6}{'estimate':>10}{'calibrated':>12}{'measured':>10}")
    for run in known_runs(plan):
        measured = measured_node_hours(args.workdir / "results" / "runs" / run.run_id)
        if measured is None:
            continue
        calibration = full
        if "sweep" in run.series:  # priced from the other sweep points
            others = [r for r in plan if getattr(r, "run_id", None) != run.run_id]
            calibration = calibrate(study, others, args.workdir)
            calibration = dataclasses.replace(calibration, startup_s=full.startup_s)
        calibrated = calibration.node_hours(study, run)
        calibrated = run.node_hours if calibrated is None else calibrated
        for key, value in (("estimate", run.node_hours), ("calibrated", calibrated), ("measured", measured)):
            totals[key] += value
        print(f"{run.run_id:<28}{run.nodes:>6}{run.node_hours:>10.4f}{calibrated:>12.4f}{measured:>10.4f}")
    for key in ("estimate", "calibrated"):
        error = (totals[key] - totals["measured"]) / totals["measured"]
        print(f"total {key}: {totals[key]:.4f} node-hours against {totals['measured']:.4f} measured ({error:+.0%})")


if __name__ == "__main__":
    main()
