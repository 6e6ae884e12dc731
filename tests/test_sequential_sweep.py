"""The sweep as the study ran it: points in increasing order, each after the one before, stopping at
the first over the memory cap or more than the tolerance below the best so far. Through Snakemake:
the run directories of the points it must not reach are absent, so a sweep that did not stop fails."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rlvr_scaling import cli, paths
from rlvr_scaling.analysis.across_runs.selection import SelectionError, select
from rlvr_scaling.analysis.across_runs.selection_io import current_plan, skipped_sweep_points, sweep_runs
from rlvr_scaling.analysis.across_runs.sweep_order import GRID, SEQUENTIAL, sweep_stop
from rlvr_scaling.analysis.cost.budget import measured_node_hours, study_cost
from rlvr_scaling.analysis.cost.sweep_savings import sweep_findings
from rlvr_scaling.execution.storage import link_results
from rlvr_scaling.study.config import Study, load_study
from rlvr_scaling.study.plan import known_runs

from . import published_timings, study_runs
from .conftest import link_workflow
from .study_runs import write_run
from .workflow_helpers import snakemake

TOLERANCE = 0.02


def _point(prompts: int, throughput: float | None, over_cap: bool = False, eligible: bool = True) -> dict[str, Any]:
    return {"prompts": prompts, "throughput_per_gpu": throughput, "over_cap": over_cap, "eligible": eligible}


def test_the_sweep_stops_at_the_first_fall_below_the_best_so_far() -> None:
    points = [_point(25, 100.0), _point(50, 120.0), _point(100, 110.0), _point(150, 130.0)]
    stop = sweep_stop(points, TOLERANCE)
    assert stop is not None and stop.after_prompts == 100
    assert "fell more than 2% below the best so far (120 at 50 prompts)" in stop.reason


def test_a_plateau_within_the_tolerance_goes_on_and_a_point_over_the_cap_stops() -> None:
    # 119 is within 2% of 120: a tie, not a fall.
    assert sweep_stop([_point(25, 120.0), _point(50, 119.0), _point(100, 125.0)], TOLERANCE) is None
    stop = sweep_stop([_point(25, 100.0), _point(50, None, over_cap=True)], TOLERANCE)
    assert stop is not None and stop.after_prompts == 50 and "over the memory cap" in stop.reason
    # A point that is no measurement of throughput says nothing of the trend.
    assert sweep_stop([_point(25, 100.0), _point(50, 10.0, eligible=False), _point(100, 101.0)], TOLERANCE) is None


def _study(root: Path, order: str = SEQUENTIAL) -> Study:
    return load_study(site="lumi", sets=[f"selection_rule.sweep_order={order}"])


def _sweep(study: Study, root: Path, points: list[int]) -> list[study_runs.FabricatedRun]:
    runs = {r.prompts: r for r in sweep_runs(study, "gsm8k", root)}
    return [write_run(study, runs[p], root, 0.01) for p in points]


def _summaries(made: list[study_runs.FabricatedRun]):
    from rlvr_scaling.measured.models import RunSummary

    return [RunSummary.from_json(json.loads(r.summary_path.read_text())) for r in made]


def test_on_the_published_grid_the_sweep_skips_the_point_past_the_memory_cap(tmp_path: Path) -> None:
    # 150 prompts are over the cap (63.5 GB of 62.7): 200, the costliest point, never runs.
    study = _study(tmp_path)
    made = _sweep(study, tmp_path, [25, 50, 100, 150])
    selection = select("gsm8k", _summaries(made), 0.98, TOLERANCE, [25, 50, 100, 150, 200], SEQUENTIAL)
    assert selection["selected"]["prompts"] == 100
    assert [p["prompts"] for p in selection["skipped"]] == [200]
    assert selection["skipped"][0]["skipped_because"] == (
        "the sweep stopped after 150 prompts: 150 prompts are over the memory cap"
    )
    assert "the sweep of gsm8k stopped after 150 prompts" in selection["reason"]
    # The plan, the budget and `launch` no longer know the skipped point.
    skipped = skipped_sweep_points(study, tmp_path)
    assert [(s.dataset, [r.prompts for r in s.runs]) for s in skipped] == [("gsm8k", [200])]
    planned = {r.run_id for r in known_runs(current_plan(study, tmp_path))}
    assert skipped[0].runs[0].run_id not in planned and made[-1].run.run_id in planned
    # A grid sweep skips nothing.
    assert skipped_sweep_points(_study(tmp_path, GRID), tmp_path) == []


def test_a_sweep_whose_first_point_is_over_the_cap_stops_with_a_clear_message(tmp_path: Path) -> None:
    study = load_study(site="lumi", sets=["datasets.gsm8k.sweep=[150,200,250]"])
    made = _sweep(study, tmp_path, [150])
    with pytest.raises(SelectionError) as error:
        select("gsm8k", _summaries(made), 0.98, TOLERANCE, [150, 200, 250], SEQUENTIAL)
    message = str(error.value)
    assert message.startswith("no valid sweep point for gsm8k, so no scaling run can start.")
    assert "GB over the cap 62.72 GB" in message
    assert "stopped after 150 prompts (150 prompts are over the memory cap), so 200 and 250 prompts did not" in message
    assert message.endswith("Add smaller prompt counts to datasets.gsm8k.sweep")


@pytest.fixture
def lumi_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workdir on the LUMI site whose results/ links to a scratch of its own, as on LUMI."""
    workdir = link_workflow(tmp_path)
    monkeypatch.setenv("RLVR_RESULTS_ROOT", str(tmp_path / "scratch"))
    monkeypatch.setenv("RLVR_SLURM_ACCOUNT", "project_465000000")
    link_results(_study(workdir), workdir)
    return workdir


# Only the steps after the runs: a run the sweep reached is a directory made here, and one it must
# not reach does not exist, so Snakemake would stop on its missing input.
AFTER_RUNS = ["--allowed-rules", "step_settings", "summary", "sweep_step", "selection", "--config", "site=lumi"]


@pytest.mark.heavy
def test_a_sweep_whose_third_point_falls_off_runs_three_points_through_snakemake(
    lumi_results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slower at 100 prompts: its throughput falls well below 50 prompts' (336 s for twice 110 s of work).
    monkeypatch.setitem(published_timings.PROFILES, ("gsm8k", 1, 100), (90.0, 70.0, 150.0, 6.0, 20.0))
    study = _study(lumi_results)
    made = _sweep(study, lumi_results, [25, 50, 100])
    shutil.rmtree(paths.results_dir(lumi_results) / "summaries")  # made by the workflow, in order
    target = "results/selection/gsm8k.json"
    snakemake(lumi_results, target, "--cores", "1", *AFTER_RUNS)
    selection = json.loads((lumi_results / target).read_text())
    assert [p["prompts"] for p in selection["points"]] == [25, 50, 100]
    assert [p["prompts"] for p in selection["skipped"]] == [150, 200]
    assert selection["selected"]["prompts"] == 50 and selection["rule"]["sweep_order"] == SEQUENTIAL
    steps = {r.run.prompts: paths.results_dir(lumi_results) / "sweep" / "gsm8k" / f"{r.run.run_id}.json" for r in made}
    assert [json.loads(steps[p].read_text())["goes_on"] for p in (25, 50, 100)] == [True, True, False]
    summaries = sorted(p.name for p in (paths.results_dir(lumi_results) / "summaries").iterdir())
    assert summaries == sorted(f"{r.run.run_id}.json" for r in made)
    # `plan` prices what the stop saved.
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", "--site", "lumi", "--root", str(lumi_results)]) == 0
    assert "Sweep gsm8k stopped after 100 prompts" in out.getvalue()
    assert "skipped 150 and 200 prompts: saved" in out.getvalue()


def test_the_report_prices_the_points_the_sweep_skipped(tmp_path: Path) -> None:
    made = study_runs.fabricate_study(tmp_path, sets=["selection_rule.sweep_order=sequential"])
    measured = [r for r in made.sweep("gsm8k") if r.run.prompts <= 150]
    # By hand: step time on trajectories per engine through the valid points measured; 11 steps of 200
    # prompts' 400 trajectories per engine, one node, no start-up recorded.
    x = [r.run.trajectories_per_engine for r in measured]
    y = [statistics.fmean(s["timing_s/step"] for s in r.steps if s["step"] > 1) for r in measured]
    slope, intercept = np.polyfit(x, y, 1)
    run_200 = made.sweep("gsm8k")[-1].run
    expected = run_200.steps * (intercept + slope * run_200.trajectories_per_engine) / 3600
    finding = next(f for f in sweep_findings(made.results) if "gsm8k" in f)
    assert finding.startswith(
        "The sequential sweep of gsm8k ran 4 of its 5 points: it stopped after 150 prompts (150 prompts "
        "are over the memory cap); 200 prompts did not run, saving at most about "
    )
    assert f"saving at most about {expected:.3g} node-hours" in finding


def test_a_point_measured_past_the_stop_is_not_used_but_still_paid_for(tmp_path: Path) -> None:
    # A grid sweep measured every point; the study's sequential sweep stops at 150 prompts.
    study = _study(tmp_path)
    made = _sweep(study, tmp_path, [25, 50, 100, 150, 200])
    [past] = skipped_sweep_points(study, tmp_path)
    assert past.runs == [] and [r.prompts for r in past.measured] == [200]
    assert made[-1].run.run_id not in {r.run_id for r in known_runs(current_plan(study, tmp_path))}
    cost = study_cost(study, current_plan(study, tmp_path), tmp_path)
    assert cost.spent == pytest.approx(sum(measured_node_hours(r.run_dir) for r in made))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", "--site", "lumi", "--root", str(tmp_path)]) == 0
    assert "Sweep gsm8k stopped after 150 prompts (150 prompts are over the memory cap); 200 prompts, " in (
        out.getvalue()
    )
    assert "measured before, are past it: not used." in out.getvalue() and "saved" not in out.getvalue()
