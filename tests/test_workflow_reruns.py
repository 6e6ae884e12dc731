"""What a changed result makes the workflow redo, on a small finished study. What is tested is
Snakemake's and the selection's part (which runs a changed sweep result redoes, and that no other run
is touched), not verl: the runs are the stand-in trainer's (tests/standin_trainer.py), a study in
about a minute instead of verl's minute per run. The real trainer's study is checked in
tests/test_local_study.py. Marker `verl`: the workflow's preflight composes verl's configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rlvr_scaling.leftover_jobs import leftover_counts

from .conftest import REPO
from .test_local_study import check_run_directory, read_csv
from .workflow_helpers import STANDIN, assert_no_run_processes, private_clone, snakemake

# One worker for the module: its tests share one stand-in study.
pytestmark = [pytest.mark.verl, pytest.mark.standin, pytest.mark.xdist_group("standin-reruns")]
# One dataset, a two-point sweep, weak and strong scaling over 1 and 2 nodes, 6 steps.
REDUCED = str(REPO / "tests" / "data" / "reduced.yaml")
STEPS = 6


@pytest.fixture(scope="module")
def standin_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished study for the module's tests, each of which leaves it finished (made again where it
    changed it). Its own copy of the package: a test edits a module (see private_clone)."""
    workdir = private_clone(tmp_path_factory.mktemp("standin-reruns"))
    snakemake(workdir, "--cores", "2", "--configfile", REDUCED, env=STANDIN)
    return workdir


def planned(workdir: Path) -> dict[str, int]:
    """The jobs, per rule, a call of the finished study would do now (its dry run's job table)."""
    output = snakemake(workdir, "-n", "--cores", "2", "--configfile", REDUCED, env=STANDIN).stdout
    counts = leftover_counts(output)
    assert counts or "Nothing to be done" in output, output[-3000:]
    return counts


def test_a_changed_sweep_result_reruns_the_selection_and_only_the_affected_scaling_runs(standin_study: Path) -> None:
    workdir = standin_study
    results = workdir / "results"
    runs_before = {p.name: (p / "job.json").stat().st_mtime_ns for p in (results / "runs").iterdir()}
    selection = json.loads((results / "selection" / "gsm8k.json").read_text())
    first = selection["selected"]["prompts"]
    other = next(p for p in selection["points"] if p["prompts"] != first)
    assert other["eligible"], other

    # The unselected point now measures ten times the best throughput: a changed sweep result.
    summary_path = results / "summaries" / f"{other['run_id']}.json"
    summary = json.loads(summary_path.read_text())
    summary["summary"]["throughput_per_gpu"]["mean"] = 10 * selection["selected"]["throughput_per_gpu"]
    summary_path.write_text(json.dumps(summary))

    rerun = snakemake(workdir, "--cores", "2", "--configfile", REDUCED, env=STANDIN)
    log = rerun.stdout + rerun.stderr
    assert json.loads((results / "selection" / "gsm8k.json").read_text())["selected"]["prompts"] == other["prompts"]
    # New: the new workload's 2-node weak run (also the strong reference) and its 1-node strong run (never
    # a sweep point: it keeps the reference's concurrency per engine). Nothing else runs.
    runs_after = {p.name: p for p in (results / "runs").iterdir()}
    new = sorted(set(runs_after) - set(runs_before))
    assert log.count("rule run:") == 2, log[-3000:]
    shapes = set()
    for name in new:
        spec = json.loads((runs_after[name] / "spec.json").read_text())["run"]
        shapes.add((spec["nodes"], spec["prompts"], tuple(sorted(spec["series"]))))
    assert shapes == {(2, 2 * other["prompts"], ("strong", "weak")), (1, 2 * other["prompts"], ("strong",))}, shapes
    for name in new:
        check_run_directory(runs_after[name], steps=STEPS)
    for name, mtime in runs_before.items():  # the earlier runs are kept untouched
        assert (results / "runs" / name / "job.json").stat().st_mtime_ns == mtime, name
    weak_runs = {row["run_id"] for row in read_csv(results / "tables" / "weak_scaling.csv")}
    n2 = next(n for n in runs_after if n.startswith(f"gsm8k-n2-p{2 * other['prompts']}-"))
    assert weak_runs == {other["run_id"], n2}, weak_runs
    assert_no_run_processes()


def test_an_edited_module_reruns_the_steps_that_run_it_and_nothing_before(standin_study: Path) -> None:
    """The figures' module: the figures and what holds them, not the tables, a summary or a run."""
    workdir = standin_study
    results = workdir / "results"
    figures = workdir / "workflow" / "rlvr_scaling" / "analysis" / "shown" / "figures.py"
    original = figures.read_bytes()
    assert planned(workdir) == {}
    figures.write_bytes(original + b"\n# an edit\n")
    assert planned(workdir) == {"figures": 1, "report": 1, "bundle": 1}
    # Back as it was, with a newer time stamp: Snakemake compares contents and redoes nothing.
    figures.write_bytes(original)
    assert planned(workdir) == {}
    # One real rerun of an edit: the figures, the report and the bundle, and no run, summary or table.
    runs_before = {p.name: (p / "job.json").stat().st_mtime_ns for p in (results / "runs").iterdir()}
    tables_before = (results / "tables").stat().st_mtime_ns
    figures_before = (results / "figures" / ".snakemake_timestamp").stat().st_mtime_ns
    figures.write_bytes(original + b"\n# another edit\n")
    rerun = snakemake(workdir, "--cores", "2", "--configfile", REDUCED, env=STANDIN)
    log = rerun.stdout + rerun.stderr
    assert "rule figures:" in log and "rule report:" in log and "rule bundle:" in log, log[-3000:]
    assert "rule run:" not in log and "rule summary:" not in log and "rule tables:" not in log
    assert {p.name: (p / "job.json").stat().st_mtime_ns for p in (results / "runs").iterdir()} == runs_before
    assert (results / "tables").stat().st_mtime_ns == tables_before
    assert (results / "figures" / ".snakemake_timestamp").stat().st_mtime_ns > figures_before
    assert planned(workdir) == {}
