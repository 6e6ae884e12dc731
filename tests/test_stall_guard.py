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
from rlvr_scaling.execution.stall_guard import stall_bound
from rlvr_scaling.inputs.data import prepare_dataset
from rlvr_scaling.inputs.model import prepare_model
from rlvr_scaling.study.config import Study, load_study
from rlvr_scaling.study.plan import build_plan, known_runs

from .workflow_helpers import STANDIN, assert_no_run_processes


def test_the_bound_is_the_plans_start_up_then_the_slowest_step_never_below_the_floor() -> None:
    lumi = load_study(site="lumi")
    estimate = lumi.config.estimate
    # 16 nodes: (15 + 3 x log2 16) minutes of start-up, times the time limit factor 2.
    bound = stall_bound(lumi, 16, predicted_step_s=300.0)
    assert bound.first_step_s == (estimate.startup_minutes + 4 * estimate.startup_minutes_per_doubling) * 60 * 2
    assert bound.first_step_s == 54 * 60
    assert bound.limit_s(None) == 54 * 60
    # After a step: 2 x the slowest interval seen, or of the predicted step when that is longer...
    assert bound.limit_s(400.0) == 800.0
    assert bound.limit_s(100.0) == 600.0
    # ...never below the site's floor (10 min).
    small = stall_bound(lumi, 1, predicted_step_s=5.0)
    assert small.limit_s(30.0) == 600.0 and small.floor_s == 600.0
    assert small.first_step_s == max(600.0, 2 * 15 * 60)


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
    prepare_model(study, paths.model_dir(root, study.site_name))
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
    expected = max(3.0, 3.0 * max(stall["slowest_interval_seconds"], run.estimate["step_seconds"]))
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


def test_plan_prints_the_guards_bounds() -> None:
    import subprocess
    import sys

    shown = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling", "plan", "--site", "lumi"], capture_output=True, text=True, check=True
    ).stdout
    [line] = [line for line in shown.splitlines() if line.startswith("Hang guard:")]
    # 1 node: 2 x 15 min; 16 nodes: 2 x (15 + 4 x 3) min; the floor, 10 min.
    assert "30 min (1 node) to 54 min (16 nodes) before the first step" in line
    assert "2 x the slowest interval between steps" in line and "never under 10 min" in line
