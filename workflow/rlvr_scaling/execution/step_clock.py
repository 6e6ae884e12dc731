"""When a run's steps were logged, by the wall clock. verl's file logger writes one line per step
but no time; the launcher notes when the first and the last step appeared, so that the start-up
before the steps and the tear-down after them (what a study pays outside its steps) can be measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr_scaling.execution.failed_runs import now

# How often the launcher looks: the times are good to about this.
POLL_SECONDS = 1.0


class StepClock:
    def __init__(self, metrics: Path) -> None:
        self.metrics = metrics
        self.offset = 0
        self.first: tuple[int, str] | None = None
        self.last: tuple[int, str] | None = None

    def poll(self) -> None:
        """Read the complete lines written since the last look; a new step is stamped now."""
        # A look that fails (no file yet, a stale handle on a network file system) is skipped: the
        # clock must never stop the run it watches.
        try:
            size = self.metrics.stat().st_size
            if size <= self.offset:
                return
            with open(self.metrics, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(size - self.offset)
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        stamp = now()
        for line in complete.splitlines():
            try:
                step = json.loads(line).get("step")
            except (ValueError, AttributeError):
                continue
            if isinstance(step, int) and not isinstance(step, bool):
                self.first = self.first or (step, stamp)
                self.last = (step, stamp)

    def record(self) -> dict[str, Any]:
        """For job.json: the first and last step seen and when (empty if no step was logged)."""
        if self.first is None or self.last is None:
            return {}
        return {
            "first_step": self.first[0],
            "first_step_logged": self.first[1],
            "last_step": self.last[0],
            "last_step_logged": self.last[1],
            "poll_seconds": POLL_SECONDS,
        }
