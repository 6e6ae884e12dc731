"""What a finished run's outcome means for the study, in one place.

A run that succeeded with a valid measurement lands in results/runs/. A sweep point that ran out of
memory lands there too, as a measurement of the memory bound (the selection counts it over the cap,
citing the evidence). Every other failure is a failure: its evidence goes to results/failed/, the rule
fails, and the next invocation runs it again. A crash, a killed worker or a short run is never read as
"memory bound".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rlvr_scaling.measured.metrics_file import measurement_problems, read_metrics_jsonl

# What torch (CUDA and HIP), Ray's memory monitor and Python print when memory runs out. Not Ray's list of
# "potential root causes" of a dead worker ("killed by SIGKILL by OOM killer ..."), which it prints for
# any dead worker, a killed one included.
OUT_OF_MEMORY = re.compile(r"OutOfMemoryError|\b(?:CUDA|HIP|GPU|CPU)? ?out of memory\b|\bMemoryError\b")


def memory_evidence(console: Path) -> str | None:
    """The first console line that says the run ran out of memory, if any."""
    if not console.exists():
        return None
    with open(console, errors="replace") as handle:
        for line in handle:
            if OUT_OF_MEMORY.search(line):
                return line.strip()[:300]
    return None


def lands_in_runs(series: list[str], status: str, evidence: str | None) -> bool:
    if status == "succeeded":
        return True
    return "sweep" in series and status == "failed" and evidence is not None


@dataclass(frozen=True)
class Outcome:
    status: str  # succeeded, failed, timed out, terminated, launch failed, invalid metrics
    problems: list[str]  # why a run that exited 0 is no measurement
    memory_evidence: str | None  # the console line saying a failed run ran out of memory
    lands_in_runs: bool  # results/runs/ (a measurement) or results/failed/ (to be run again)


def judge(run_dir: Path, series: list[str], exit_status: str, last_step: int) -> Outcome:
    """The run's outcome from how its command ended and what it left in `run_dir`. `last_step`: all its
    steps, or the step after which the adaptive step count stopped it ("stopped early": it succeeded
    if its steps up to there are a measurement)."""
    status, problems, evidence = exit_status, [], None
    if status == "stopped early":
        status = "succeeded"
    if status == "succeeded":
        metrics = run_dir / "metrics.jsonl"
        if not metrics.exists():
            problems = ["verl exited 0 but wrote no metrics.jsonl"]
        else:
            steps, read_problems = read_metrics_jsonl(metrics)
            problems = measurement_problems(steps, read_problems, last_step)
        if problems:
            status = "invalid metrics"
    if status != "succeeded":
        evidence = memory_evidence(run_dir / "console.log")
    return Outcome(status, problems, evidence, lands_in_runs(series, status, evidence))
