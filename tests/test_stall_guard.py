"""The hang guard (execution.stall_guard): a run that logs no step within its bound is stopped and filed
as failed with why, the node-hours it saved and its logs' last lines; a slow run that keeps logging is
not. The bound's arithmetic is checked by hand against the plan's figures.

The runs here are the stand-in trainer (tests/standin_trainer.py) frozen after a step, alive and
silent as a hung collective is; what is tested is the launcher's clock and stop, not verl. Production's
runs go through the same launch(), with verl (tests/test_local_study.py: none of its runs is stopped)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from rlvr_scaling import paths
from rlvr_scaling.execution.launch import RunFailed, launch
from rlvr_scaling.execution.stall_guard import run_stall_bound, stall_bound
from rlvr_scaling.inputs.data import prepare_dataset
from rlvr_scaling.inputs.model import prepare_model
from rlvr_scaling.study.config import Study, load_study
from rlvr_scaling.study.plan import build_plan, known_runs

from .workflow_helpers import STANDIN, assert_no_run_processes


def test_the_bound_is_the_start_up_and_first_step_then_what_was_measured_never_below_the_floor() -> None:
    lumi = load_study(site="lumi")
    estimate = lumi.config.estimate
    # 16 nodes: (15 + 3 x log2 16) minutes of start-up and the first step, times the factor 2.
    bound = stall_bound(lumi, 16, predicted_step_s=300.0)
    assert bound.first_step_s == 2 * ((estimate.startup_minutes + 4 * estimate.startup_minutes_per_doubling) * 60 + 300)
    assert bound.first_step_s == 2 * (27 * 60 + 300) == bound.limit_s(False)
    # After a step: 2 x the longest step time or interval measured, the prediction only while nothing is...
    assert bound.limit_s(True, 400.0) == 800.0
    assert bound.limit_s(True, 750.0) == 1500.0  # steps 2.5 x the prediction: followed, not stopped
    assert bound.limit_s(True, None) == 600.0  # 2 x the predicted 300 s
    assert bound.limit_s(True, 100.0) == 600.0  # the floor, not 2 x 100 s
    # ...never below the site's floor (10 min).
    small = stall_bound(lumi, 1, predicted_step_s=5.0)
    assert small.limit_s(True, 30.0) == 600.0 and small.floor_s == 600.0
    assert small.first_step_s == 2 * (15 * 60 + 5.0)


def test_the_strong_series_one_node_dapo_run_gets_its_start_up_and_first_step() -> None:
    """The run the old bound (2 x start-up = 30 min) stopped every time: 15 min of start-up and a
    first step of about 20 min (published: 309 s at 4 nodes, proportional below) need 35 min."""
    lumi = load_study(site="lumi", sets=["selection.gsm8k=100", "selection.dapo_math=10"])
    run = next(r for r in known_runs(build_plan(lumi, root=Path("/s"))) if r.run_id.startswith("dapo_math-n1-p40-"))
    bound = run_stall_bound(lumi, run)
    healthy_first_step_s = 15 * 60 + 309 * 4
    assert bound.predicted_step_s == pytest.approx(309 * 4, abs=0.5)
    assert bound.first_step_s == pytest.approx(2 * healthy_first_step_s, abs=1)
    assert bound.first_step_s > healthy_first_step_s * 1.9


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Study]:
    """The local study's inputs once, for the stand-in's runs, with a floor of 3 s (the local site's 2
    min would make each test wait that long)."""
    root = tmp_path_factory.mktemp("stall")
    sets = ["algorithm.steps=8", "selection.gsm8k=2"]
    study = load_study(sets=sets)
    launch_section = dataclasses.replace(study.site.launch, stall_floor_minutes=0.05)
    study = dataclasses.replace(study, site=dataclasses.replace(study.site, launch=launch_section))
    prepare_dataset(study, "gsm8k", paths.dataset_dir(root, study.site_name, "gsm8k"))
    prepare_model(study, paths.model_dir(root, study.site_name, study.model_folder))
    return root, study


def _run(prepared: tuple[Path, Study], monkeypatch: pytest.MonkeyPatch, **env: str):
    root, study = prepared
    for name, value in {**STANDIN, **env}.items():
        monkeypatch.setenv(name, value)
    run = next(r for r in known_runs(build_plan(study, root=root)) if r.dataset == "gsm8k" and r.nodes == 1)
    return root, study, run


@pytest.mark.standin
def test_a_run_frozen_after_step_2_is_stopped_within_its_bound_and_filed(
    prepared: tuple[Path, Study], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, study, run = _run(prepared, monkeypatch, RLVR_STANDIN_FREEZE_AFTER="2", RLVR_STANDIN_STEP_SECONDS="0.3")
    with pytest.raises(RunFailed) as failed:
        launch(study, run, root)
    message = str(failed.value)
    assert f"run {run.run_id} stalled (no step for " in message and "after step 2 (the bound: " in message
    assert "node-hours of its time limit saved" in message
    [folder] = (root / "results" / "failed" / run.run_id).iterdir()
    job = json.loads((folder / "job.json").read_text())
    stall = job["stall"]
    assert job["status"] == "stalled" and stall["last_step"] == 2
    # The bound after step 2: the floor (3 s), as 3 x the slowest interval (about 0.3 s) and 3 x the
    # predicted step are shorter; it fired after the bound and within a few looks of the clock.
    # It followed what was measured: the longest of the steps' logged times and the intervals.
    expected = max(3.0, 3.0 * stall["longest_measured_seconds"])
    assert 0.25 <= stall["longest_measured_seconds"] < 3.0
    assert math.isclose(stall["bound_seconds"], round(expected, 1), abs_tol=0.1)
    assert stall["bound_seconds"] < stall["waited_seconds"] <= stall["bound_seconds"] + 3.0
    # What the run would still have held: its time limit less what it ran, on its one node.
    assert 0 < stall["node_hours_saved"] <= run.estimate["time_limit_minutes"] / 60
    assert any("frozen after step 2" in line for line in stall["log_tails"]["console"])
    assert "stalled" in (folder / "FAILED.txt").read_text()
    assert not (root / "results" / "runs" / run.run_id).exists()
    assert_no_run_processes()


@pytest.mark.standin
def test_a_slow_run_that_keeps_logging_steps_is_not_stopped(
    prepared: tuple[Path, Study], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Steps of 2 s: each longer than the floor's 3 s / 3, so the bound follows them (3 x 2 s = 6 s).
    root, study, run = _run(prepared, monkeypatch, RLVR_STANDIN_STEP_SECONDS="2")
    run_dir = launch(study, run, root)
    job = json.loads((run_dir / "job.json").read_text())
    assert job["status"] == "succeeded" and "stall" not in job
    assert job["stall_bound"]["floor_s"] == 3.0
    assert_no_run_processes()


def test_plan_prints_each_runs_bounds_and_where_its_estimate_comes_from() -> None:
    import subprocess
    import sys

    shown = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling", "plan", "--site", "lumi", "--set", "selection.gsm8k=100"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    [line] = [line for line in shown.splitlines() if line.startswith("Hang guard:")]
    assert "2 x (the predicted start-up + the predicted first step)" in line and "never under 10 min" in line
    rows = {row.split()[0]: row.split(maxsplit=6) for row in shown.splitlines() if row.startswith("  gsm8k-n16-p400-")}
    [(run_id, row)] = rows.items()
    # 16 nodes: 27 min of start-up; the published 72 s step (not the ideal 48 s); 2 x (27 min + 72 s).
    assert row[1:6] == ["27.0m", "72s", f"{2 * (27 * 60 + 72) / 60:.1f}m", "10.0m", f"{math.ceil(3 * (27 + 24))}m"]
    assert row[6].startswith("lumi-rlvr-blog: strong step 204 s at 4, 72 s at 16 nodes")
