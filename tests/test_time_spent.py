"""Where the demo's time went (publish/time_spent, printed at the end of `make demo`): each phase of
its timeline, and the study split into what comes before the runs, each run's start-up and steps,
and what comes after, all from the runs' own job.json."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from rlvr_scaling.publish.time_spent import read_timeline, time_spent_lines

T0 = 1_800_000_000.0


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(T0 + seconds, dt.UTC).isoformat(timespec="seconds")


def _run(root: Path, run_id: str, start: float, first_step: float, end: float) -> None:
    folder = root / "results" / "runs" / run_id
    folder.mkdir(parents=True)
    job = {
        "run_id": run_id,
        "start": _iso(start),
        "end": _iso(end),
        "step_clock": {"first_step_logged": _iso(first_step)},
    }
    (folder / "job.json").write_text(json.dumps(job))


def test_each_phase_and_each_runs_start_up_and_steps(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.txt"
    # 60 s environment; the study 60..400; report to 430; bundle to 440; verify to 445.
    marks = [("start", 0), ("environment", 60), ("study", 400), ("report", 430), ("bundle", 440), ("verify", 445)]
    timeline.write_text("".join(f"{name} {T0 + s}\n" for name, s in marks))
    _run(tmp_path, "gsm8k-n1-p2-aaaa", start=100, first_step=150, end=160)  # 50 s start-up, 10 s steps
    _run(tmp_path, "gsm8k-n1-p4-bbbb", start=170, first_step=215, end=230)  # 45 s start-up, 15 s steps
    _run(tmp_path, "old-run", start=-5000, first_step=-4950, end=-4900)  # an earlier study's: not this one
    text = "\n".join(time_spent_lines(tmp_path, read_timeline(timeline)))
    assert "Where the 445 s went (7.4 min):" in text
    assert "60 s  the Python environment" in text
    assert "340 s  the study (snakemake)" in text
    # Before the first run: 100 - 60; the runs: 60 + 60 = 120, of which 95 start-up and 25 steps;
    # between and after: 340 - 40 - 120 = 180.
    assert "40 s  before the first run" in text
    assert "120 s  2 runs, one after another: 95 s of it verl starting" in text and "25 s of steps" in text
    assert "180 s  between and after the runs" in text
    assert "old-run" not in text
    assert "30 s  the Snakemake report" in text and "10 s  the bundle, packed with the report" in text
    assert "5 s  rlvr-scaling verify" in text


def test_a_study_with_nothing_left_to_run_says_so(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.txt"
    timeline.write_text(f"start {T0}\nenvironment {T0 + 1}\nstudy {T0 + 20}\n")
    lines = time_spent_lines(tmp_path, read_timeline(timeline))
    assert any("no run started: everything was done already" in line for line in lines)
