"""When a run's steps were logged, by the wall clock. verl's file logger writes one line per step
but no time; the launcher notes when the first and the last step appeared, so that the start-up
before the steps and the tear-down after them (what a study pays outside its steps) can be measured.
With the adaptive step count on, it also applies the run's stop rule to each step as it is logged."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution.failed_runs import now
from rlvr_scaling.execution.stall_guard import StallBound
from rlvr_scaling.measured.adaptive_steps import StopRule, stop_record
from rlvr_scaling.measured.metrics_file import is_positive_finite

# How often the launcher looks (the site's launch.poll_seconds): the times are good to about this.
POLL_SECONDS = 1.0
# Where the steps verl logged after the adaptive step count's stop are kept.
AFTER_STOP = "metrics.after_stop.jsonl"


@dataclass(frozen=True)
class EarlyStop:
    """The adaptive step count's stop: after which step, what job.json keeps of it, and where in the
    metrics file that step's line ends (what was logged past it is not the run's measurement)."""

    step: int
    record: dict[str, Any]
    offset: int


class StepClock:
    def __init__(
        self,
        metrics: Path,
        rule: StopRule | None = None,
        on_stop: Callable[[EarlyStop], None] | None = None,
        energy: Callable[[], dict[str, float] | None] | None = None,
        bound: StallBound | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        """`on_stop`: called once the rule holds, before the run's processes are ended (the launcher
        records the stop first, so a launcher killed while it ends them leaves why in job.json).
        `energy`: reads the node's energy counters (execution.energy) when a step is stamped."""
        self.metrics = metrics
        self.poll_seconds = poll_seconds
        self.energy = energy
        # (step, counters): a reading belongs to the last step of the look that made it
        self.first_energy: tuple[int, dict[str, float]] | None = None
        self.last_energy: tuple[int, dict[str, float]] | None = None
        self.offset = 0
        self.first: tuple[int, str] | None = None
        self.last: tuple[int, str] | None = None
        self.rule = rule
        self.seen: list[float] = []  # the time of each step 1, 2, ... (for the rule)
        self.stop: EarlyStop | None = None
        self.on_stop = on_stop
        # The hang guard (execution.stall_guard): when the last step (or the launch) was seen; the
        # longest interval between two looks that found steps, by the monotonic clock; and the longest
        # step time verl logged (timing_s/step).
        self.bound = bound
        self.last_progress = time.monotonic()
        self.slowest_interval: float | None = None
        self.slowest_logged: float | None = None

    def poll(self) -> None:
        """Read the complete lines written since the last look; a new step is stamped now."""
        if self.stop is not None:  # the run is being stopped: nothing logged after its stop counts
            return
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
        stamp = now()
        had_steps = self.first is not None
        # One reading for the steps of this look: they were logged since the last one.
        reading = self.energy() if self.energy is not None and complete else None
        for line in complete.splitlines(keepends=True):
            self.offset += len(line)
            try:
                record = json.loads(line)
                step = record.get("step")
            except (ValueError, AttributeError, RecursionError):  # not verl's line: the summary names it
                continue
            if isinstance(step, int) and not isinstance(step, bool):
                self._progress(had_steps, record.get("data"))
                self.first = self.first or (step, stamp)
                self.last = (step, stamp)
                if reading is not None:  # it belongs to the last step of the look that made it
                    if self.first_energy is None or self.first_energy[1] is reading:
                        self.first_energy = (step, reading)
                    self.last_energy = (step, reading)
                self._apply_rule(step, record.get("data"))
                if self.stop is not None:
                    return

    def _progress(self, had_steps: bool, data: Any) -> None:
        """A step was logged now: the interval since the last one counts toward the bound (not the
        start-up before the first), and so does the step's own time where verl logged it."""
        moment = time.monotonic()
        if had_steps and moment > self.last_progress:
            interval = moment - self.last_progress
            self.slowest_interval = max(self.slowest_interval or 0.0, interval)
        self.last_progress = moment
        seconds = data.get("timing_s/step") if isinstance(data, dict) else None
        if is_positive_finite(seconds):
            self.slowest_logged = max(self.slowest_logged or 0.0, float(seconds))

    def longest_measured(self) -> float | None:
        """The longest step time or interval between steps measured so far; None: nothing yet (no step,
        or one step logged without its time)."""
        measured = [m for m in (self.slowest_interval, self.slowest_logged) if m is not None]
        return max(measured) if measured else None

    def stalled(self) -> float | None:
        """How long since the last step (or the launch), when that is past the bound; else None."""
        if self.bound is None or self.stop is not None:
            return None
        waited = time.monotonic() - self.last_progress
        limit = self.bound.limit_s(self.first is not None, self.longest_measured())
        return waited if waited > limit else None

    def cancel_stop(self) -> None:
        """verl ended on its own, exit 0, as the rule held (it logged its last steps in the same
        second): its end is judged as it is, and the steps after the stop are read as any others."""
        self.stop, self.rule = None, None
        self.poll()

    def _apply_rule(self, step: int, data: Any) -> None:
        """As StopRule.first_stop, one step at a time (the steps before did not stop the run)."""
        if self.rule is None:
            return
        seconds = data.get("timing_s/step") if isinstance(data, dict) else None
        if step != len(self.seen) + 1 or not is_positive_finite(seconds):
            # Steps out of order or without a time: the run takes all its steps; its check names why.
            self.rule = None
            return
        self.seen.append(float(seconds))
        measured = self.seen[self.rule.warmup_steps :]
        width = self.rule.stops_after(step, measured)
        if width is not None:
            self.stop = EarlyStop(step, stop_record(self.rule, step, measured, width), self.offset)
            if self.on_stop is not None:
                try:
                    self.on_stop(self.stop)
                except (OSError, StudyError):  # the record is kept again when the run ends; the stop goes on
                    pass

    def record(self) -> dict[str, Any]:
        """For job.json: the first and last step seen and when (empty if no step was logged)."""
        if self.first is None or self.last is None:
            return {}
        return {
            "first_step": self.first[0],
            "first_step_logged": self.first[1],
            "last_step": self.last[0],
            "last_step_logged": self.last[1],
            "poll_seconds": self.poll_seconds,
            # The node's energy counters (joules) as those steps were stamped; absent if not read.
            **(
                {"energy_first_step": self.first_energy[0], "first_step_energy_j": self.first_energy[1]}
                if self.first_energy
                else {}
            ),
            **(
                {"energy_last_step": self.last_energy[0], "last_step_energy_j": self.last_energy[1]}
                if self.last_energy
                else {}
            ),
        }


def keep_steps_to_stop(metrics: Path, stop: EarlyStop) -> dict[str, int]:
    """Keep the metrics file's steps up to the stop; what verl logged after it, before it was ended, goes
    beside it to metrics.after_stop.jsonl. The kept part is a new file put in place by rename, never
    verl's own cut short: a logger still alive on another node (its Ray actor outliving the cluster's
    stop by a moment) writes at its own offset, and would leave a hole in a truncated file."""
    content = metrics.read_bytes()
    after = content[stop.offset :]
    if after:
        metrics.with_name(AFTER_STOP).write_bytes(after)
        kept = metrics.with_name(f".{metrics.name}.kept")
        kept.write_bytes(content[: stop.offset])
        os.replace(kept, metrics)
    return {"bytes_logged_after": len(after), "steps_logged_after": after.count(b"\n")}
