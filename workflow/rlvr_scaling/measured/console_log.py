"""The fallback reader: verl's per-step console lines, as they really appear in a job's output.

`(TaskRunner pid=3165) step:71 - timing_s/gen:12.3 - perf/throughput:np.float64(1.23) - ...`,
with Ray prefixes, ANSI colours, tqdm progress interleaved (carriage returns), other processes'
lines, possibly a truncated last line, and steps repeated after a restart.
"""

from __future__ import annotations

import math
import re
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STEP_LINE = re.compile(r"(?:^|\s|\))step:(\d{1,18})\s+-\s+(.*)$")
WRAPPED = re.compile(r"^(?:np\.)?(?:float|int)(?:16|32|64)?\((.*)\)$|^tensor\((.*?)(?:,.*)?\)$")


def parse_value(text: str) -> float | int | str:
    text = text.strip()
    match = WRAPPED.match(text)
    if match:
        text = (match.group(1) or match.group(2) or "").strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if number.is_integer() and re.fullmatch(r"-?\d+", text):
        return int(text)
    return number


def parse_step_line(line: str) -> tuple[int, dict[str, Any]] | None:
    match = STEP_LINE.search(line)
    if not match:
        return None
    fields: dict[str, Any] = {}
    for part in match.group(2).split(" - "):
        key, sep, value = part.partition(":")
        if not sep or not key.strip():
            continue
        fields[key.strip()] = parse_value(value)
    return int(match.group(1)), fields


def read_console(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Steps (the last complete record of each) and the problems met."""
    problems: list[str] = []
    steps: dict[int, dict[str, Any]] = {}
    complete = text.endswith("\n")
    physical = text.split("\n")
    if not complete:
        last = physical.pop()
        if STEP_LINE.search(ANSI.sub("", last)):
            problems.append("the last line is truncated; its step is ignored")
    for raw in physical:
        # tqdm redraws with carriage returns: every segment is a line of its own.
        for segment in ANSI.sub("", raw).split("\r"):
            parsed = parse_step_line(segment)
            if parsed is None:
                continue
            step, fields = parsed
            if "timing_s/step" not in fields or not _finite(fields.get("timing_s/step")):
                problems.append(f"step {step}: incomplete record ignored")
                continue
            if step in steps:
                problems.append(f"step {step} repeated (a restart?); the last complete record is kept")
            steps[step] = {"step": step, **fields}
    return [steps[k] for k in sorted(steps)], problems


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
