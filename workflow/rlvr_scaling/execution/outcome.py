"""What a finished run's outcome means for the study, in one place.

A run that succeeded with a valid measurement lands in results/runs/. A sweep point that ran out of
memory lands there too, as a measurement of the memory bound (the selection counts it over the cap,
citing the evidence). Every other failure is a failure: its evidence goes to results/failed/, the rule
fails, and the next invocation runs it again. A crash, a killed worker or a short run is never read as
"memory bound".
"""

from __future__ import annotations

import re
from pathlib import Path

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
