"""The cost of the runs not yet made, calibrated by the sweep points measured: the line of step
time on trajectories per engine, the measured start-up, and what plan and the budget then say."""

from __future__ import annotations

import contextlib
import io
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from rlvr_scaling import cli, paths
from rlvr_scaling.analysis.cost.budget import cost_function
from rlvr_scaling.analysis.cost.calibration import calibrate
from rlvr_scaling.analysis.cost.cost_check import cost_finding, cost_rows
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan, known_runs

from .study_runs import STUDY_SETS, fabricate_study, study_args


def test_before_any_sweep_point_the_site_estimate_stands(tmp_path: Path) -> None:
    study = load_study(site="lumi", sets=STUDY_SETS)
    plan = build_plan(study, root=tmp_path)
    cost_of, basis = cost_function(study, plan, tmp_path)
    assert all(cost_of(run) == run.node_hours for run in known_runs(plan))
    assert "the site's estimate" in basis


def test_measured_sweep_points_price_the_runs_by_their_line(tmp_path: Path) -> None:
    made = fabricate_study(tmp_path)
    study, plan = made.study, build_plan(made.study, {"gsm8k": 100}, tmp_path)
    # By hand: the valid GSM8K sweep points (200 prompts ran out of memory), step time on
    # trajectories per engine, least squares.
    points = [r for r in made.sweep("gsm8k") if not r.failed]
    x = [r.run.trajectories_per_engine for r in points]
    y = [statistics.fmean(s["timing_s/step"] for s in r.steps if s["step"] > 1) for r in points]
    slope, intercept = np.polyfit(x, y, 1)
    calibration = calibrate(study, plan, tmp_path)
    assert calibration.step_lines["gsm8k"] == pytest.approx((intercept, slope))
    assert calibration.points == {"gsm8k": len(points)} and calibration.startup_s is None
    run = next(r for r in known_runs(plan) if r.dataset == "gsm8k" and r.nodes == 8 and "weak" in r.series)
    estimate = study.config.estimate
    startup = 60 * (estimate.startup_minutes + estimate.startup_minutes_per_doubling * math.log2(8))
    expected = 8 * (startup + run.steps * (intercept + slope * run.trajectories_per_engine)) / 3600
    assert calibration.node_hours(study, run) == pytest.approx(expected)
    # DAPO is pinned: no sweep point, so the site's estimate stands for its runs.
    dapo = next(r for r in known_runs(plan) if r.dataset == "dapo_math")
    assert calibration.node_hours(study, dapo) is None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", *study_args(STUDY_SETS, tmp_path)]) == 0
    assert "calibrated by the sweep points measured: gsm8k 4; start-up estimated" in out.getvalue()
    assert "gpu-h" in out.getvalue().splitlines()[1]


def test_plan_shows_what_a_run_done_measured(tmp_path: Path) -> None:
    study = load_study(site="lumi", sets=STUDY_SETS)
    done = next(r for r in known_runs(build_plan(study, root=tmp_path)) if r.nodes == 2)
    run_dir = paths.run_dir(tmp_path, done.run_id)
    run_dir.mkdir(parents=True)
    job = {"nodes": 2, "start": "2026-11-30T10:00:00+00:00", "end": "2026-11-30T10:06:00+00:00"}
    (run_dir / "job.json").write_text(json.dumps(job))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", *study_args(STUDY_SETS, tmp_path)]) == 0
    row = next(line.split() for line in out.getvalue().splitlines() if line.startswith(done.run_id))
    assert row[-2:] == ["0.20", f"{0.2 * done.gpus_per_node:.1f}"]  # 2 nodes for 6 minutes
    assert "the 1 done as measured" in out.getvalue()


def test_the_cost_table_prices_every_run_from_the_other_runs(tmp_path: Path) -> None:
    made = fabricate_study(tmp_path)
    results = made.results
    # Every run recorded 100 s of start-up and 10 s of tear-down, and ran 50 s more than its steps.
    for summary in results.summaries.values():
        steps_s = sum(s["timing_s/step"] for s in summary.steps)
        summary.overhead = {"startup_s": 100.0, "teardown_s": 10.0, "wall_s": steps_s + 160.0}
    rows = {r["run_id"]: r for r in cost_rows(results)}
    point = next(r for r in made.sweep("gsm8k") if r.run.prompts == 50)
    # By hand: the line through the other valid GSM8K sweep points (200 prompts ran out of memory).
    others = [r for r in made.sweep("gsm8k") if not r.failed and r.run.prompts != 50]
    x = [r.run.trajectories_per_engine for r in others]
    y = [statistics.fmean(s["timing_s/step"] for s in r.steps if s["step"] > 1) for r in others]
    slope, intercept = np.polyfit(x, y, 1)
    expected = (110.0 + len(point.steps) * (intercept + slope * point.run.trajectories_per_engine)) / 3600
    row = rows[point.run.run_id]
    assert row["calibrated_node_hours"] == pytest.approx(expected)
    measured = (sum(s["timing_s/step"] for s in point.steps) + 160.0) / 3600
    assert row["measured_node_hours"] == pytest.approx(measured)
    assert row["estimated_node_hours"] == pytest.approx(point.run.node_hours)
    assert row["calibrated_error"] == pytest.approx((expected - measured) / measured)
    # A run the adaptive step count stopped paid for the steps verl logged after the stop as well.
    summary = results.summaries[point.run.run_id]
    summary.adaptive_stop = {"step": len(point.steps), "steps_logged_after": 2}
    paid = [r for r in cost_rows(results) if r["run_id"] == point.run.run_id][0]
    step_time = intercept + slope * point.run.trajectories_per_engine
    assert paid["calibrated_node_hours"] == pytest.approx(expected + 2 * step_time / 3600)
    assert paid["stopped_after_step"] == len(point.steps)
    summary.adaptive_stop = None
    # Every valid run has a row; the report states the totals.
    assert len(rows) == len([s for s in results.summaries.values() if s.valid])
    finding = cost_finding(list(rows.values()))
    assert finding.startswith(f"Over the {len(rows)} runs that recorded their times, the site's estimate predicted ")
    assert all(r["stopped_after_step"] is None for r in rows.values()) and "stopped early" not in finding
    # A run the adaptive step count stopped: the site's estimate is said to be an upper bound for it.
    row["stopped_after_step"] = 4
    assert cost_finding(list(rows.values())).endswith(
        " Of these runs, 1 was stopped early by the adaptive step count: the site's estimate priced every "
        "configured step, the calibration only the steps paid for."
    )
