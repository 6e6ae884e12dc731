"""Start-up and tear-down, measured: the launcher notes when the first and last step were logged
(StepClock, while it waits for verl), and the summary turns the job record into seconds outside the
steps (the real local runs are checked in test_local_study.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rlvr_scaling.analysis.per_run.overhead import overhead_finding, overhead_rows, run_overhead
from rlvr_scaling.execution.launch import wait_watching
from rlvr_scaling.execution.step_clock import StepClock


def test_the_clock_stamps_complete_step_lines_only(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    clock = StepClock(metrics)
    clock.poll()  # no file yet
    assert clock.record() == {}
    metrics.write_text('{"step": 1, "data": {}}\n{"step": 2, "da')  # the second line is still being written
    clock.poll()
    assert clock.record()["first_step"] == 1 and clock.record()["last_step"] == 1
    with open(metrics, "a") as handle:
        handle.write('ta": {}}\nnot json\n{"step": 3, "data": {}}\n')
    clock.poll()
    record = clock.record()
    assert (record["first_step"], record["last_step"]) == (1, 3)


def test_a_look_that_fails_is_skipped_and_never_stops_the_run(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").mkdir()  # reading it fails (IsADirectoryError), as a stale NFS handle would
    clock = StepClock(tmp_path / "metrics.jsonl")
    clock.poll()
    assert clock.record() == {}


@pytest.mark.heavy
def test_the_launcher_watches_the_steps_while_it_waits_and_still_times_out(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    script = (
        "import json, time\n"
        f"for step in (1, 2):\n    open({str(metrics)!r}, 'a').write(json.dumps({{'step': step}}) + '\\n')\n"
        "    time.sleep(1.5)\n"
    )
    clock = StepClock(metrics)
    process = subprocess.Popen([sys.executable, "-c", script])
    assert wait_watching(process, 30, clock) == 0
    clock.poll()
    assert (clock.record()["first_step"], clock.record()["last_step"]) == (1, 2)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_watching(sleeper, 1.5, None)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_start_up_and_tear_down_from_the_job_record() -> None:
    job = {
        "start": "2026-11-30T10:00:00+00:00",
        "end": "2026-11-30T10:05:30+00:00",
        "step_clock": {
            "first_step": 1,
            "first_step_logged": "2026-11-30T10:01:40+00:00",
            "last_step": 3,
            "last_step_logged": "2026-11-30T10:05:00+00:00",
        },
    }
    steps = [{"step": 1, "timing_s/step": 20.0}, {"step": 2, "timing_s/step": 60.0}, {"step": 3, "timing_s/step": 60.0}]
    # 100 s to the first step's log line, of which 20 s were the step itself; 30 s after the last.
    assert run_overhead(job, steps) == {
        "wall_s": 330.0,
        "steps_s": 140.0,
        "startup_s": 80.0,
        "teardown_s": 30.0,
        "startup_share": pytest.approx(80 / 330),
        "teardown_share": pytest.approx(30 / 330),
        "outside_steps_share": pytest.approx(190 / 330),
    }
    assert run_overhead({**job, "step_clock": {}}, steps) is None  # a record from before the clock


def test_the_report_sentence_adds_up_the_rows() -> None:
    rows = [
        {"nodes": 2, "startup_s": 900.0, "teardown_s": 90.0, "node_hours": 2.0, "outside_steps_node_hours": 0.6},
        {"nodes": 1, "startup_s": 720.0, "teardown_s": 36.0, "node_hours": 1.0, "outside_steps_node_hours": 0.3},
    ]
    # start-up: (900 x 2 + 720) / 3600 = 0.7 node-hours; tear-down: (90 x 2 + 36) / 3600 = 0.06
    assert overhead_finding(rows, 2) == (
        "Outside their steps the 2 runs spent 0.9 of their 3 node-hours (30%): start-up 0.7 node-hours, "
        "tear-down 0.06, the rest between steps."
    )
    assert overhead_finding(rows, 5).endswith("(3 of the 5 runs recorded no step times and are not counted).")
    assert "not known" in overhead_finding([], 5)


def test_the_table_turns_each_runs_seconds_into_node_hours(tmp_path: Path) -> None:
    from .study_runs import fabricate_study

    made = fabricate_study(tmp_path)
    [one, two] = [s for s in made.results.summaries.values() if s.valid and s.nodes in (4, 8)][:2]
    cost = {"wall_s": 3600.0, "steps_s": 2700.0, "startup_s": 720.0, "teardown_s": 90.0}
    one.overhead = {**cost, "startup_share": 0.2, "teardown_share": 0.025, "outside_steps_share": 0.25}
    rows = overhead_rows(made.results)
    assert [r["run_id"] for r in rows] == [one.run_id]  # runs without a step clock are left out
    row = rows[0]
    assert row["node_hours"] == pytest.approx(one.nodes * 1.0)
    assert row["outside_steps_node_hours"] == pytest.approx(one.nodes * 0.25)
    # The summary keeps its overhead through its JSON.
    assert type(one).from_json(one.to_json()).overhead == one.overhead and two.overhead is None
