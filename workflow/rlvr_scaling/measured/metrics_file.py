"""Reading verl's file logger output: one JSON object per line, {"step": N, "data": {...}}, and the one
set of rules that makes a run's steps a valid measurement (the launcher, summaries and `metrics` share it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeGuard

REQUIRED_STEP_KEYS = (
    "timing_s/gen",
    "timing_s/old_log_prob",
    "timing_s/update_actor",
    "timing_s/step",
    "perf/total_num_tokens",
    "perf/throughput",
)
# Durations verl measures. The required ones must be positive; the rest finite and not negative (verl
# writes timing_per_token_ms/<phase> = 0 for a phase without tokens).
TIMING_PREFIXES = ("timing_s/", "timing_per_token_ms/")
# Beyond any figure a run logs (seconds, tokens, GB, rates): a finite value this large is corruption,
# and its sums and squares overflow the statistics to inf.
MAX_MAGNITUDE = 1e15


def read_metrics_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Steps in order (a repeated step keeps its last record) and the problems met on the way."""
    steps: dict[int, dict[str, Any]] = {}
    problems: list[str] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
            step, data = record["step"], dict(record["data"])
        except UnicodeDecodeError:
            problems.append(f"line {number}: not UTF-8 text")
            continue
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"line {number}: not a step record ({exc.__class__.__name__})")
            continue
        except RecursionError:  # no step record nests; the parser runs out of stack on such a line
            problems.append(f"line {number}: not a step record (nested too deeply)")
            continue
        if not isinstance(step, int) or isinstance(step, bool):
            problems.append(f"line {number}: step {step!r} is not an integer")
            continue
        if step in steps:
            problems.append(f"step {step} appears again at line {number}; the last record is kept")
        steps[step] = {**data, "step": step}
    return [steps[k] for k in sorted(steps)], problems


def is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_finite(value: Any) -> TypeGuard[float]:
    """A number that can be a measurement: finite, and within MAX_MAGNITUDE (so no statistic of such
    numbers overflows)."""
    try:
        return is_number(value) and math.isfinite(value) and abs(value) <= MAX_MAGNITUDE
    except OverflowError:  # an integer too large for a float
        return False


def _huge(value: Any) -> bool:
    """Finite (or an integer no float holds) but beyond MAX_MAGNITUDE."""
    try:
        return math.isfinite(value) and abs(value) > MAX_MAGNITUDE
    except OverflowError:
        return True


def is_positive_finite(value: Any) -> TypeGuard[float]:
    return is_finite(value) and value > 0


def _sequence_problem(numbers: list[int], expected_steps: int | None) -> str | None:
    last = expected_steps if expected_steps is not None else max(numbers, default=0)
    present = set(numbers)
    if numbers and len(numbers) == last and present == set(range(1, last + 1)):
        return None
    # Without building range(1, last): a logged step number can be anything.
    missing = []
    for step in range(1, last + 1):
        if step not in present:
            missing.append(step)
            if len(missing) > 8:
                break
    missing_count = last - len({n for n in present if 1 <= n <= last})
    unexpected = sorted(n for n in present if not 1 <= n <= last)
    detail = []
    if missing:
        more = f" and {missing_count - 8} more" if missing_count > 8 else ""
        detail.append("missing " + ", ".join(str(n) for n in missing[:8]) + more)
    if unexpected:
        detail.append(f"unexpected {_listing(unexpected)}")
    return f"steps must run 1..{last}: " + "; ".join(detail) if detail else f"no steps 1..{last}"


def _listing(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:8])
    return shown + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")


def measurement_problems(
    steps: list[dict[str, Any]], reader_problems: list[str], expected_steps: int | None
) -> list[str]:
    """Why these steps are not a valid measurement (empty when they are): every problem the reader met
    (a repeated step, an unreadable line), steps other than exactly 1..N, a value that is not a number,
    and a missing, non-finite or non-positive timing or required figure; each names the step and key."""
    problems = list(reader_problems)
    sequence = _sequence_problem([s["step"] for s in steps], expected_steps)
    if sequence:
        problems.append(sequence)
    for record in steps:
        for key in REQUIRED_STEP_KEYS:
            if key not in record:
                problems.append(f"step {record['step']}: {key} missing")
        for key, value in record.items():
            if key == "step":
                continue
            step = record["step"]
            if key in REQUIRED_STEP_KEYS:
                if not is_positive_finite(value):
                    problems.append(f"step {step}: {key} = {value!r} (expected a finite positive number)")
            elif value is None:
                continue  # verl's JSON writer logs NaN as null (e.g. critic/score/* when every sample aborted)
            elif not is_number(value):
                problems.append(f"step {step}: {key} = {value!r} (expected a number)")
            elif key.startswith(TIMING_PREFIXES) and not (is_finite(value) and value >= 0):
                problems.append(f"step {step}: {key} = {value!r} (expected a finite duration, 0 or more)")
            elif _huge(value):
                problems.append(
                    f"step {step}: {key} = {value!r} (beyond {MAX_MAGNITUDE:g}: no measurement is this large)"
                )
    return problems
