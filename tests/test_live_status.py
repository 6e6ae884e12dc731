"""`rlvr-scaling status`'s live part (execution/live_runs.py, live_view.py): a run going on, read from
its staging folder and Slurm's word on its job, and the node-hours spent against the plan and the
budget. The real cluster's answer is checked in tests/test_slurm_restart.py, with no controller running."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

from rlvr_scaling.execution.live_runs import live_runs
from rlvr_scaling.live_view import Spent, render_live, spent_line
from rlvr_scaling.study.config import load_study

from .conftest import PYTHON, REPO

NOW = dt.datetime(2026, 12, 5, 12, 0, 0, tzinfo=dt.UTC)


def _staging(root: Path, run_id: str, start: str, steps: list[float], planned: int, job_id: str | None) -> Path:
    folder = root / "results" / "runs" / f".staging-{run_id}-20261205T100000Z-1234"
    folder.mkdir(parents=True)
    job = {"run_id": run_id, "start": start, "nodes": 2, "node_list": ["n1", "n2"], "slurm_job_id": job_id}
    (folder / "job.json").write_text(json.dumps(job))
    (folder / "spec.json").write_text(json.dumps({"run": {"steps": planned}}))
    rows = [{"step": i + 1, "data": {"timing_s/step": t}} for i, t in enumerate(steps)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def _slurm(squeue: str, sacct: str = ""):
    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        out = squeue if command[0] == "squeue" else sacct
        return subprocess.CompletedProcess(command, 0, out, "")

    return run


def test_a_running_run_shows_its_step_its_times_and_when_it_should_end(tmp_path: Path) -> None:
    _staging(tmp_path, "gsm8k-n2-p4-abc", "2026-12-05T11:00:00+00:00", [30.0, 10.0, 20.0], 10, "77")
    [run] = live_runs(tmp_path, NOW, _slurm("77|RUNNING|None\n"))
    assert (run.run_id, run.slurm_job_id, run.state, run.alive) == ("gsm8k-n2-p4-abc", "77", "RUNNING", True)
    assert (run.steps_done, run.steps_planned, run.last_step_s, run.mean_step_s) == (3, 10, 20.0, 20.0)
    # 7 steps left at the mean of 20 s: 140 s from now.
    assert run.expected_end == "2026-12-05T12:02:20+00:00"
    assert run.node_hours == 2.0  # two nodes for the hour since its start
    text = render_live(load_study(), [run], Spent(1.0, 0.5, 2.0, 10.0, 20.0), NOW)
    assert "gsm8k-n2-p4-abc  77         RUNNING  n1,n2  3/10  20.0 s  20.0 s  2026-12-05 12:02 UTC (in 2.3 min)" in text


def test_a_run_whose_job_ended_is_shown_as_left_behind_with_slurms_word(tmp_path: Path) -> None:
    _staging(tmp_path, "gsm8k-n1-p2-def", "2026-12-05T11:30:00+00:00", [], 10, "78")
    [run] = live_runs(tmp_path, NOW, _slurm("", "78|CANCELLED by 1000|0:0|None\n"))
    assert (run.state, run.alive, run.expected_end, run.steps_done) == ("CANCELLED", False, None, 0)
    text = render_live(load_study(), [run], Spent(0.0, 0.0, 0.0, 1.0, None), NOW)
    assert "Running now (0)" in text
    assert "its job is CANCELLED: the next launch of the run files it" in text


def test_spent_against_the_plan_and_the_budget_in_the_sites_unit() -> None:
    lumi = load_study(sets=["slurm_account=p"], site="lumi")
    line = spent_line(lumi, Spent(done=10.0, failed=2.5, running=0.5, plan_total=190.0, budget=200.0))
    assert line == (
        "Spent: 13.00 node-hours (52.0 GPU-hours) (runs done 10.00, failed attempts 2.50, running now 0.50); "
        "the plan in all 190.00; budget 200 node-hours, 6.5% of it spent."
    )


def test_a_folder_being_filed_or_holding_odd_records_is_skipped_not_a_crash(tmp_path: Path) -> None:
    good = _staging(tmp_path, "gsm8k-n1-p2-ok", "2026-12-05T11:00:00+00:00", [1.0], 5, "79")
    odd = _staging(tmp_path, "gsm8k-n1-p2-odd", "2026-12-05T11:00:00+00:00", [1.0], 5, "80")
    (odd / "job.json").write_text(json.dumps({"run_id": "x", "start": "not a time", "nodes": None}))
    empty = tmp_path / "results" / "runs" / ".staging-gsm8k-n1-p2-new-20261205T110000Z-9"
    empty.mkdir()  # its launcher has not written job.json yet
    (tmp_path / "results" / "runs" / ".staging-a-file").write_text("")
    runs = live_runs(tmp_path, NOW, _slurm("79|RUNNING|None\n80|RUNNING|None\n"))
    assert [run.run_id for run in runs] == ["gsm8k-n1-p2-ok"] and good.exists()


def test_watch_takes_only_a_positive_number_of_seconds() -> None:
    for value in ("0", "-5", "soon"):
        result = subprocess.run(
            [PYTHON, "-m", "rlvr_scaling", "status", "--watch", value], capture_output=True, text=True, cwd=REPO
        )
        assert result.returncode == 2
        assert f"--watch has value '{value}': expected a number of seconds above 0" in result.stderr
