"""The node-hour budget: the study's cost is what its finished runs measured plus the estimate of
every planned run not done; over `budget.node_hours` the workflow submits nothing and names the
runs and their cost (the real-Slurm case is in test_slurm.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rlvr_scaling import paths
from rlvr_scaling.analysis.cost.budget import Cost, check_budget, study_cost
from rlvr_scaling.errors import StudyError
from rlvr_scaling.snakemake_api import Lookup
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan, known_runs

from .study_runs import STUDY_SETS, fabricate_study
from .workflow_helpers import snakemake

PUBLISHED = ["selection.gsm8k=100", "selection.dapo_math=10"]


def _study(budget: float | None):
    return load_study(site="lumi", sets=[*PUBLISHED, f"budget.node_hours={'null' if budget is None else budget}"])


def test_the_published_study_fits_a_budget_of_its_estimate_and_not_one_below(tmp_path: Path) -> None:
    plan = build_plan(_study(None), root=tmp_path)
    total = sum(run.node_hours for run in known_runs(plan))
    # The README's figure for the 18 scaling runs, each step as published (lumi-rlvr-blog), not ideal
    # scaling (176.3 node-hours): tests/test_step_estimate.py checks each run's step against the post.
    assert total == pytest.approx(200.6, abs=0.1)
    check_budget(_study(total + 0.01), plan, tmp_path)
    costliest = max(known_runs(plan), key=lambda run: run.node_hours)
    with pytest.raises(StudyError) as error:
        check_budget(_study(100), plan, tmp_path)
    message = str(error.value)
    assert message.startswith("budget.node_hours is 100, but the study needs 200.")
    assert f"{costliest.run_id} ({costliest.nodes} nodes) {costliest.node_hours:.2f}" in message
    assert "Nothing more is submitted" in message and "and 10 more" in message


def test_a_study_that_spends_exactly_its_budget_is_within_it() -> None:
    # The budget is what the study may spend: 1.0 spent + 1.5 planned (sums exact in binary) fits 2.5.
    run = next(iter(known_runs(build_plan(_study(None), root=Path("/nonexistent")))))
    assert not Cost(budget=2.5, spent=1.0, to_run=[(run, 1.5)], basis="estimate").over
    assert Cost(budget=2.4375, spent=1.0, to_run=[(run, 1.5)], basis="estimate").over
    assert not Cost(budget=None, spent=1.0, to_run=[(run, 1.5)], basis="estimate").over


def test_a_finished_run_counts_what_it_measured_not_its_estimate(tmp_path: Path) -> None:
    study = _study(None)
    plan = build_plan(study, root=tmp_path)
    done = next(run for run in known_runs(plan) if run.nodes == 2)
    run_dir = paths.run_dir(tmp_path, done.run_id)
    run_dir.mkdir(parents=True)
    job = {"nodes": 2, "start": "2026-11-30T10:00:00+00:00", "end": "2026-11-30T10:45:00+00:00"}
    (run_dir / "job.json").write_text(json.dumps(job))
    # A failed attempt of another run was paid for too: 4 nodes for 15 minutes.
    failed = paths.results_dir(tmp_path) / "failed" / "gsm8k-n4-p400-0123456789" / "20261130T100000Z"
    failed.mkdir(parents=True)
    attempt = {"nodes": 4, "start": "2026-11-30T11:00:00+00:00", "end": "2026-11-30T11:15:00+00:00"}
    (failed / "job.json").write_text(json.dumps(attempt))
    cost = study_cost(study, plan, tmp_path)
    assert cost.spent == pytest.approx(1.5 + 1.0) and done not in [run for run, _ in cost.to_run]
    assert cost.total == pytest.approx(sum(r.node_hours for r in known_runs(plan)) - done.node_hours + 2.5)


@pytest.mark.heavy
def test_over_budget_a_dry_run_warns_and_a_real_run_starts_nothing(workdir: Path) -> None:
    over = ("--cores", "2", "--config", "budget={'node_hours': 0.001}")
    dry = snakemake(workdir, "-n", *over)
    assert "rlvr-scaling: warning: budget.node_hours is 0.001, but the study needs" in dry.stderr, dry.stderr
    real = snakemake(workdir, *over, check=False)
    assert real.returncode == 2, real.stdout + real.stderr
    assert "rlvr-scaling: error: budget.node_hours is 0.001, but the study needs" in real.stderr
    assert re.search(r"gsm8k-n1-p\d-[0-9a-f]{10} \(1 node\) 0\.04", real.stderr), real.stderr
    assert not (workdir / "results" / "runs").exists() and not (workdir / "results" / "data").exists()
    # Snakemake let go of the working directory: the next invocation meets the budget, not a lock.
    again = snakemake(workdir, *over, check=False)
    assert again.returncode == 2 and "rlvr-scaling: error: budget.node_hours" in again.stderr, again.stderr


def test_once_the_sweep_has_chosen_the_scaling_runs_must_fit_too(tmp_path: Path) -> None:
    # The fabricated LUMI study has run its GSM8K sweep and chosen 100 prompts; its runs are all done
    # there, so clear them: what is left to run is the scaling series the rules now ask for.
    made = fabricate_study(tmp_path)
    for run_dir in paths.results_dir(tmp_path).joinpath("runs").iterdir():
        if "sweep" not in json.loads((run_dir / "spec.json").read_text())["run"]["series"]:
            (run_dir / "job.json").unlink()
    sweep_cost = study_cost(made.study, build_plan(made.study, root=tmp_path), tmp_path).spent
    lookup = Lookup(load_study(site="lumi", sets=[*STUDY_SETS, f"budget.node_hours={sweep_cost + 1}"]), tmp_path)
    lookup.submitting = True  # as onstart sets it: a dry run or a report is never refused here
    with pytest.raises(StudyError, match=r"budget.node_hours is [0-9.]+, but the study needs"):
        lookup.series_run_ids("gsm8k", 100, "weak")
    generous = Lookup(load_study(site="lumi", sets=[*STUDY_SETS, "budget.node_hours=1000"]), tmp_path)
    assert len(generous.series_run_ids("gsm8k", 100, "weak")) == 5


def test_a_finished_study_over_its_budget_is_still_usable(tmp_path: Path) -> None:
    # Runs may cost more than estimated; once every run is done nothing is submitted, so no error.
    study = _study(None)
    plan = build_plan(study, root=tmp_path)
    for run in known_runs(plan):
        run_dir = paths.run_dir(tmp_path, run.run_id)
        run_dir.mkdir(parents=True)
        job = {"nodes": run.nodes, "start": "2026-11-30T10:00:00+00:00", "end": "2026-11-30T20:00:00+00:00"}
        (run_dir / "job.json").write_text(json.dumps(job))
    assert study_cost(_study(1), plan, tmp_path).over
    check_budget(_study(1), plan, tmp_path)


def test_without_a_budget_nothing_is_priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every Snakemake start checks the budget: with none set, it must not read the summaries.
    def priced(*_: object) -> None:
        raise AssertionError("the study was priced with no budget set")

    monkeypatch.setattr("rlvr_scaling.analysis.cost.budget.study_cost", priced)
    study = _study(None)
    check_budget(study, build_plan(study, root=tmp_path), tmp_path)


def _made_run(folder: Path, study_name: str, nodes: int, hours: float) -> None:
    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps({"study": {"study": {"name": study_name}}}))
    end = f"2026-12-06T{int(hours):02d}:{int(hours * 60) % 60:02d}:00+00:00"
    (folder / "job.json").write_text(json.dumps({"nodes": nodes, "start": "2026-12-06T00:00:00+00:00", "end": end}))


def test_a_studys_spending_is_its_own_runs_not_another_studys_in_the_same_results(tmp_path: Path) -> None:
    """The demo's runs in results/ counted in one's own study's Spent (0.44 against 0.164, #61)."""
    from rlvr_scaling.analysis.cost.budget import failed_attempts_cost, runs_cost

    results = paths.results_dir(tmp_path)
    _made_run(results / "runs" / "mine-a", "mine", 2, 1.5)  # 3 node-hours
    _made_run(results / "runs" / "demo-a", "demo", 4, 2.0)  # 8
    _made_run(results / "failed" / "mine-b" / "20261206T000000Z", "mine", 1, 0.5)  # 0.5
    _made_run(results / "failed" / "demo-b" / "20261206T000000Z", "demo", 1, 1.0)  # 1
    assert runs_cost(tmp_path, "mine") == pytest.approx(3.0) and runs_cost(tmp_path) == pytest.approx(11.0)
    assert failed_attempts_cost(tmp_path, "mine") == pytest.approx(0.5)
    assert failed_attempts_cost(tmp_path, "demo") == pytest.approx(1.0)
    study = load_study(site="local", sets=["study.name=mine"])
    assert study_cost(study, build_plan(study, root=tmp_path), tmp_path).spent == pytest.approx(3.5)
