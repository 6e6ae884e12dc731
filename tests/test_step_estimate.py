"""Each run's predicted step, and so its time limit and the hang guard's bounds: from the published
study where the reference covers the run (study.step_estimate), from what the site measured once runs
are measured (analysis.cost.run_estimates), and said where each comes from."""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from rlvr_scaling import paths
from rlvr_scaling.analysis.cost.run_estimates import RunEstimates
from rlvr_scaling.execution.stall_guard import StallBound, run_stall_bound
from rlvr_scaling.execution.step_clock import StepClock
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import Run, build_plan, known_runs

from .study_runs import STUDY_SETS, fabricate_study, study_args

PUBLISHED = ["selection.gsm8k=100", "selection.dapo_math=10"]


def _lumi_runs(sets: list[str] = PUBLISHED) -> dict[tuple[str, str, int], Run]:
    study = load_study(site="lumi", sets=sets)
    return {(r.dataset, s, r.nodes): r for r in known_runs(build_plan(study, root=Path("/s"))) for s in r.series}


def _published_step(dataset: str, series: str, nodes: int) -> float:
    """The step the post gives or implies, by hand from its sentences (config/references/lumi-rlvr-blog.yaml):
    one-node weak steps of 192 s (GSM8K) and 300 s (DAPO: the site's 0.24 and 3.75 s per trajectory),
    growing linearly by 55.6 s and 12.3 s to 16 nodes; strong 204 -> 72 s and 309 -> 165 s from 4 to 16
    nodes, proportional below 4, and at 8 nodes the ideal step times the published-over-ideal factor
    halfway (in log2 nodes) between 4 and 16."""
    one, growth = {"gsm8k": (192.0, 55.6), "dapo_math": (300.0, 12.3)}[dataset]
    if series == "weak":
        return one + growth * (nodes - 1) / 15
    at4, at16 = {"gsm8k": (204.0, 72.0), "dapo_math": (309.0, 165.0)}[dataset]
    if nodes <= 4:
        return at4 * 4 / nodes
    if nodes == 16:
        return at16
    ideal4, ideal16 = one, one / 4  # a strong step of 4 x the one-node workload: 4 nodes do one node's work
    return (one / 2) * (at4 / ideal4 + at16 / ideal16) / 2


@pytest.mark.parametrize("dataset", ["gsm8k", "dapo_math"])
def test_each_lumi_scaling_runs_step_is_the_published_one(dataset: str) -> None:
    runs = _lumi_runs()
    for series in ("weak", "strong"):
        for nodes in (1, 2, 4, 8, 16):
            run = runs[(dataset, series, nodes)]
            expected = _published_step(dataset, series, nodes)
            if nodes == 4:  # the weak and strong run at 4 nodes are one run: the longer of the two
                expected = max(_published_step(dataset, "weak", 4), _published_step(dataset, "strong", 4))
            assert run.estimate["step_seconds"] == pytest.approx(expected, abs=0.01), (series, nodes)
            assert run.estimate["step_source"].startswith("lumi-rlvr-blog: "), (series, nodes)
            limit = math.ceil(3 * (run.estimate["startup_minutes"] + 20 * expected / 60))
            assert run.resources["runtime"] == limit


def test_a_sweep_point_and_a_study_the_reference_does_not_cover_keep_ideal_scaling() -> None:
    runs = _lumi_runs(["selection.dapo_math=10"])
    sweep = runs[("gsm8k", "sweep", 1)]
    assert sweep.estimate["step_seconds"] == pytest.approx(0.24 * sweep.trajectories)
    assert sweep.estimate["step_source"].startswith("site estimate, ideal: 0.24 s x")
    # Another response cap: the published timings say nothing of these runs.
    other = _lumi_runs([*PUBLISHED, "datasets.dapo_math.max_response_length=4096"])
    strong16 = other[("dapo_math", "strong", 16)]
    assert strong16.estimate["step_seconds"] == pytest.approx(3.75 * 320 / 16)
    assert strong16.estimate["step_source"].startswith("site estimate, ideal")
    local = known_runs(build_plan(load_study(site="local"), {"gsm8k": 2}, Path("/s")))
    assert all(r.estimate["step_source"].startswith("site estimate, ideal") for r in local)


def _mean_step(record: list[dict]) -> float:
    return statistics.fmean(s["timing_s/step"] for s in record if s["step"] > 1)


def test_what_the_site_measured_prices_the_runs_not_yet_made(tmp_path: Path) -> None:
    """With the sweep and the weak runs up to 8 nodes measured, the 16-node weak GSM8K run is priced by
    the sweep's line x the published shape, times what the 8-node run measured over its own such
    prediction; its time limit and the guard's first wait follow."""
    made = fabricate_study(tmp_path)
    study = made.study
    target = made.run("gsm8k", "weak", 16)
    for gone in [target, *(made.run("gsm8k", "strong", n) for n in (8, 16))]:
        (paths.results_dir(tmp_path) / "summaries" / f"{gone.run.run_id}.json").unlink()
    plan = build_plan(study, {"gsm8k": 100}, tmp_path)
    estimates = RunEstimates.of(study, plan, tmp_path)
    # By hand: the valid sweep points' least-squares line of step time on trajectories per engine...
    points = [r for r in made.sweep("gsm8k") if not r.failed]
    slope, intercept = np.polyfit(
        [r.run.trajectories_per_engine for r in points], [_mean_step(r.steps) for r in points], 1
    )
    weak8 = made.run("gsm8k", "weak", 8)

    def shaped(run: Run, nodes: int) -> float:  # ...times the published weak growth at its nodes
        return (intercept + slope * run.trajectories_per_engine) * (1 + 55.6 / 192 * (nodes - 1) / 15)

    ratio = _mean_step(weak8.steps) / shaped(weak8.run, 8)
    expected = shaped(target.run, 16) * ratio
    priced = estimates.run(next(r for r in known_runs(plan) if r.run_id == target.run.run_id))
    assert priced.estimate["step_seconds"] == pytest.approx(expected, abs=0.01)
    assert f"as {weak8.run.run_id} measured" in priced.estimate["step_source"]
    assert "sweep point(s) measured" in priced.estimate["step_source"]
    startup = priced.estimate["startup_minutes"]
    assert priced.node_hours == pytest.approx(16 * (startup + 20 * expected / 60) / 60, abs=0.01)
    # The bounds never fall under the plan's: a time limit or a first wait too short stops a healthy run.
    planned = next(r for r in known_runs(plan) if r.run_id == target.run.run_id)
    limit = max(math.ceil(3 * (startup + 20 * expected / 60)), planned.resources["runtime"])
    assert priced.resources["runtime"] == limit
    bound_step = max(expected, planned.estimate["step_seconds"])
    bound_startup = max(startup, planned.estimate["startup_minutes"])
    first = run_stall_bound(study, priced).first_step_s
    assert first == pytest.approx(2 * (bound_startup * 60 + bound_step), abs=1)
    assert first >= run_stall_bound(study, planned).first_step_s - 1
    # Priced twice, the same: the estimate starts from the plan's run, not from a priced one.
    assert estimates.run(priced).estimate == priced.estimate
    # A run measured keeps the plan's estimate (it is done).
    done = next(r for r in known_runs(plan) if r.run_id == weak8.run.run_id)
    assert estimates.run(done) is done


def test_the_launch_command_and_snakemakes_time_limit_use_the_priced_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test double stands in for launch() here (production's launch is the real one; the stand-in
    trainer's tests run it): what matters is the run the command hands it."""
    from rlvr_scaling import cli
    from rlvr_scaling.execution import launch as launch_module
    from rlvr_scaling.snakemake_api import Lookup

    made = fabricate_study(tmp_path)
    target = made.run("dapo_math", "strong", 16)
    (paths.results_dir(tmp_path) / "summaries" / f"{target.run.run_id}.json").unlink()
    handed: list[Run] = []
    monkeypatch.setattr(launch_module, "launch", lambda study, run, root, timeout_s=None: handed.append(run) or root)
    assert cli.main(["launch", *study_args(STUDY_SETS, tmp_path), target.run.run_id]) == 0
    plan = build_plan(made.study, {"gsm8k": 100}, tmp_path)
    expected = RunEstimates.of(made.study, plan, tmp_path).run(target.run)
    assert handed[0].estimate == expected.estimate and handed[0].estimate != target.run.estimate
    assert "measured" in handed[0].estimate["step_source"]  # the nearest strong run measured scales it
    monkeypatch.chdir(tmp_path)
    lookup = Lookup(made.study, tmp_path)
    runtime = lookup.run_resources()["runtime"](SimpleNamespace(run_id=target.run.run_id))
    assert runtime == expected.resources["runtime"] == expected.estimate["time_limit_minutes"]


def test_the_guard_follows_the_step_time_verl_logs(tmp_path: Path) -> None:
    """A first step of 500 s, logged as it ended: the wait for step 2 is 2 x 500 s, not 2 x the
    predicted 100 s (where a run whose steps are slower than predicted used to be stopped)."""
    metrics = tmp_path / "metrics.jsonl"
    bound = StallBound(first_step_s=3000.0, factor=2.0, predicted_step_s=100.0, floor_s=60.0)
    clock = StepClock(metrics, bound=bound)
    clock.last_progress = time.monotonic() - 2999
    assert clock.stalled() is None  # 2999 s before the first step: within 3000 s
    clock.last_progress = time.monotonic() - 3001
    assert clock.stalled() is not None
    metrics.write_text(json.dumps({"step": 1, "data": {"timing_s/step": 500.0}}) + "\n")
    clock.poll()
    assert clock.longest_measured() == 500.0
    clock.last_progress = time.monotonic() - 999
    assert clock.stalled() is None
    clock.last_progress = time.monotonic() - 1001
    assert clock.stalled() is not None
    # A step logged without its time, and no interval yet: the prediction serves (2 x 100 s).
    bare = StepClock(tmp_path / "bare.jsonl", bound=bound)
    (tmp_path / "bare.jsonl").write_text(json.dumps({"step": 1, "data": {}}) + "\n")
    bare.poll()
    assert bare.longest_measured() is None
    bare.last_progress = time.monotonic() - 199
    assert bare.stalled() is None
    bare.last_progress = time.monotonic() - 201
    assert bare.stalled() is not None


def test_a_start_up_measured_on_fewer_nodes_never_shortens_a_larger_runs_wait() -> None:
    """One-node runs measured 1 min of start-up: a one-node run is priced at that, a 16-node run at no
    less than the site's own 27 min (the hang guard's first wait rests on it; a start-up extrapolated
    from smaller runs could stop a healthy larger one)."""
    from rlvr_scaling.analysis.cost.calibration import Calibration

    study = load_study(site="lumi", sets=["selection.dapo_math=10"])
    plan = known_runs(build_plan(study, root=Path("/s")))
    sweep = next(r for r in plan if r.dataset == "gsm8k" and r.series == ["sweep"])
    one = next(r for r in plan if r.dataset == "dapo_math" and r.nodes == 1 and "weak" in r.series)
    sixteen = next(r for r in plan if r.dataset == "dapo_math" and r.nodes == 16 and "weak" in r.series)
    # A stand-in for the measured summary: only its presence is read for a run of another series.
    measured: dict = {sweep.run_id: object()}
    estimates = RunEstimates(study, {r.run_id: r for r in plan}, Calibration({}, {}, 60.0), {}, measured)
    assert estimates.startup_minutes(one) == (1.0 + 0 * 3, "measured, its growth per doubling estimated")
    minutes, source = estimates.startup_minutes(sixteen)
    assert minutes == 27.0 and source.startswith("the site's estimate (measured up to 1 node(s): 13 min)")
    assert run_stall_bound(study, estimates.run(sixteen)).predicted_startup_s == 27 * 60
