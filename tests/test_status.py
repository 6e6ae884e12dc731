"""`rlvr-scaling status` from Snakemake's summary and the results (the real Snakemake: test_local_study)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rlvr_scaling.errors import StudyError
from rlvr_scaling.status import (
    SUMMARY_HEADER,
    counts_by_stage,
    parse_summary,
    render_status,
    snakemake_args,
    study_as_snakemake_reads_it,
    study_status,
)
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan

from .conftest import REPO


def _summary(*rows: tuple[str, str, str, str]) -> str:
    lines = [f"{path}\tMon Nov 30 10:00:00 2026\t{rule}\t-\t{status}\t{plan}" for path, rule, status, plan in rows]
    return "\n".join(["Building DAG of jobs...", SUMMARY_HEADER, *lines, ""])


def test_each_run_and_output_gets_its_state_and_why(tmp_path: Path) -> None:
    note = tmp_path / "results" / "failed" / "gsm8k-n1-p4-b" / "20260101T000000Z" / "FAILED.txt"
    note.parent.mkdir(parents=True)
    note.write_text("run gsm8k-n1-p4-b was killed (SIGKILL)\nmore\n")
    text = text_of_summary = _summary(
        ("results/runs/gsm8k-n1-p2-a", "run", "ok", "no update"),
        ("results/runs/gsm8k-n1-p4-b", "run", "missing", "update pending"),
        ("results/runs/gsm8k-n1-p8-c", "run", "missing", "update pending"),
        ("results/runs/gsm8k-n2-p4-d", "run", "set of input files changed", "update pending"),
        ("results/summaries/gsm8k-n1-p2-a.json", "summary", "ok", "update pending"),
        ("results/steps/tables-0123456789ab.json", "step_settings", "missing", "update pending"),
        ("results/tables", "tables", "ok", "no update"),
    )
    plan = build_plan(load_study(), root=tmp_path)  # before the sweep: its scaling runs are pending
    entries = study_status(parse_summary(text), plan, tmp_path)
    runs = {e.name: e for e in entries if e.stage == "runs"}
    assert runs["gsm8k-n1-p2-a"].state == "complete"
    assert runs["gsm8k-n1-p4-b"].state == "failed" and runs["gsm8k-n1-p4-b"].why.startswith(
        "run gsm8k-n1-p4-b was killed (SIGKILL) (failed/gsm8k-n1-p4-b/20260101T000000Z)"
    )
    assert runs["gsm8k-n1-p8-c"].state == "missing" and runs["gsm8k-n2-p4-d"].why == "set of input files changed"
    waiting = [e for e in runs.values() if e.name.endswith("node(s)")]
    assert waiting and all(e.state == "pending" and "waits for the one-node sweep" in e.why for e in waiting)
    # The plan's runs Snakemake did not name: sweep points wait for the sequential sweep to reach them,
    # scaling runs for a selection made again first.
    unnamed = {run.run_id for run in plan if hasattr(run, "run_id")}
    assert unnamed and all(runs[r].state == "pending" and "sequential sweep" in runs[r].why for r in unnamed)
    selected = study_status(parse_summary(text), build_plan(load_study(), {"gsm8k": 2}, tmp_path), tmp_path)
    scaling = [e for e in selected if e.stage == "runs" and "-n2-" in e.name and e.state == "pending"]
    assert scaling and all("selection of gsm8k, which is made again first" in e.why for e in scaling)
    summary = next(e for e in entries if e.stage == "summaries")
    assert summary.state == "stale" and "input it depends on" in summary.why
    assert not any(e.name.startswith("results/steps/") for e in entries)  # wiring, not a stage
    counts = counts_by_stage(entries)
    assert counts["runs"]["complete"] == 1 and counts["runs"]["failed"] == 1 and counts["tables"]["complete"] == 1
    text = render_status(load_study(), entries)
    assert "gsm8k-n1-p4-b" in text and "failed" in text and "Other outputs not complete:" in text
    # A run going on now (its staging folder, its job alive) is running, not missing nor failed.
    going_on = {"gsm8k-n1-p8-c": "step 3 of 10, Slurm job 77", "gsm8k-n1-p4-b": "step 0 of 10"}
    live = {e.name: e for e in study_status(parse_summary(text_of_summary), plan, tmp_path, going_on)}
    assert (live["gsm8k-n1-p8-c"].state, live["gsm8k-n1-p8-c"].why) == ("running", "step 3 of 10, Slurm job 77")
    assert live["gsm8k-n1-p4-b"].state == "running" and live["gsm8k-n1-p2-a"].state == "complete"


def test_no_summary_is_an_error_with_snakemakes_words() -> None:
    with pytest.raises(StudyError, match="printed no summary"):
        parse_summary("WorkflowError: something")


def test_the_study_is_the_one_snakemake_reads() -> None:
    reduced = str(REPO / "tests" / "data" / "reduced.yaml")
    study = study_as_snakemake_reads_it([reduced], "ci-slurm")
    assert study.site_name == "ci-slurm" and study.config.datasets["gsm8k"].sweep == [2, 4]
    assert study.config.algorithm.steps == 6 and study.datasets == ["gsm8k"]
    assert snakemake_args([reduced], "ci-slurm") == ["--configfile", reduced, "--config", "site=ci-slurm"]
    assert snakemake_args([], None) == []
