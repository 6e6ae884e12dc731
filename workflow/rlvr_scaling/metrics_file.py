"""Reading verl's file logger output: one JSON object per line, {"step": N, "data": {...}}."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

REQUIRED_STEP_KEYS = (
    "timing_s/gen",
    "timing_s/old_log_prob",
    "timing_s/update_actor",
    "timing_s/step",
    "perf/total_num_tokens",
    "perf/throughput",
)


def read_metrics_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Steps in order (a repeated step keeps its last record) and the problems met on the way."""
    steps: dict[int, dict[str, Any]] = {}
    problems: list[str] = []
    with open(path) as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
                step = int(record["step"])
                data = dict(record["data"])
            except (ValueError, KeyError, TypeError) as exc:
                problems.append(f"line {number}: not a step record ({exc.__class__.__name__})")
                continue
            if step in steps:
                problems.append(f"step {step} appears again at line {number}; the last record is kept")
            steps[step] = {"step": step, **data}
    return [steps[k] for k in sorted(steps)], problems


def step_problems(steps: list[dict[str, Any]], expected_steps: int) -> list[str]:
    """Why these steps are not a complete measurement (empty when they are)."""
    problems = []
    if len(steps) != expected_steps:
        problems.append(f"{len(steps)} steps recorded, {expected_steps} expected")
    for record in steps:
        for key in REQUIRED_STEP_KEYS:
            value = record.get(key)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                problems.append(f"step {record['step']}: {key} = {value!r} (expected a finite positive number)")
    return problems
