"""Where a study's time went on this machine: the environment, what comes before the first run (data,
model, preflight), each run's start-up (launch to its first step logged) and steps, the analysis
between and after the runs, the Snakemake report, the bundle and its check. `make demo` writes the
phases' times (a timeline: "<phase> <epoch seconds>" lines, in order) and prints this at its end, so a
newcomer sees why the demo takes what it takes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from rlvr_scaling import paths

# The timeline's phases, in order, and what the time up to each was spent on.
PHASES = {
    "environment": "the Python environment (.venv: torch, verl, Snakemake; made once)",
    "study": "the study (snakemake)",
    "report": "the Snakemake report (snakemake --report)",
    "bundle": "the bundle, packed with the report in it",
    "verify": "rlvr-scaling verify of the bundle",
}


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return dt.datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def read_timeline(path: Path) -> list[tuple[str, float]]:
    marks = []
    for line in path.read_text().splitlines():
        name, _, value = line.strip().partition(" ")
        if name and value:
            marks.append((name, float(value)))
    return marks


def run_times(root: Path, since: float, until: float) -> list[dict[str, Any]]:
    """The runs that started in [since, until]: their start-up and steps, in seconds."""
    runs = []
    for job_file in sorted((paths.results_dir(root) / "runs").glob("*/job.json")):
        job = json.loads(job_file.read_text())
        start, end = _epoch(job.get("start")), _epoch(job.get("end"))
        if start is None or end is None or not since - 1 <= start <= until + 1:
            continue
        first = _epoch((job.get("step_clock") or {}).get("first_step_logged"))
        startup = (first - start) if first is not None else end - start
        runs.append({"run_id": job.get("run_id", job_file.parent.name), "start": start, "end": end, "startup": startup})
    return sorted(runs, key=lambda r: r["start"])


def time_spent_lines(root: Path, timeline: list[tuple[str, float]]) -> list[str]:
    if len(timeline) < 2:
        return ["No timeline to read: nothing to say about where the time went."]
    began, ended = timeline[0][1], timeline[-1][1]
    lines = [f"Where the {ended - began:.0f} s went ({(ended - began) / 60:.1f} min):"]
    previous = began
    for name, stamp in timeline[1:]:
        spent = stamp - previous
        lines.append(f"  {spent:6.0f} s  {PHASES.get(name, name)}")
        if name == "study":
            lines += _study_lines(root, previous, stamp)
        previous = stamp
    return lines


def _study_lines(root: Path, since: float, until: float) -> list[str]:
    runs = run_times(root, since, until)
    if not runs:
        return ["           no run started: everything was done already"]
    in_runs = sum(r["end"] - r["start"] for r in runs)
    startup = sum(r["startup"] for r in runs)
    lines = [
        f"    {runs[0]['start'] - since:6.0f} s  before the first run: data, model, preflight",
        f"    {in_runs:6.0f} s  {len(runs)} runs, one after another: {startup:.0f} s of it verl starting "
        f"(launch to the first step logged), {in_runs - startup:.0f} s of steps",
    ]
    lines += [
        f"             {r['end'] - r['start']:5.0f} s  {r['run_id']} (start-up {r['startup']:.0f} s)" for r in runs
    ]
    between = (until - since) - (runs[0]["start"] - since) - in_runs
    lines.append(f"    {between:6.0f} s  between and after the runs: summaries, selection, tables, figures, bundle")
    return lines
