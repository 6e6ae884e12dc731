"""How `verify` compares what a bundle holds with what it recomputed: JSON records by the path of
each differing value, tables cell by cell, the most telling differences first."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from rlvr_scaling.fsutil import json_text

# A reader wants the figures first: the measured summary, then validity, then the per-step records
# and provenance that explain it.
FIRST_NAMED = ("summary.", "valid", "checks", "selected", "reason", "table ")
# Figures derived from the ones above (MFU from the phase times, whether the steps were disturbed from
# the step times): named after them.
NAMED_LAST = ("summary.mfu", "summary.disturbance")
MAX_SHOWN = 5


def as_read(value: Any) -> Any:
    """A value as a reader of its JSON file sees it (tuples become lists, keys strings)."""
    return json.loads(json_text(value))


def _same(a: Any, b: Any) -> bool:
    # A run with one measured step has no spread: NaN there is the value, on both sides.
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def differences(bundled: Any, recomputed: Any, where: str = "") -> list[str]:
    """Every place two JSON values differ, by its path (a.b[2].c)."""
    if isinstance(bundled, dict) and isinstance(recomputed, dict):
        found = []
        for key in sorted(set(bundled) | set(recomputed), key=str):
            path = f"{where}.{key}" if where else str(key)
            if key not in recomputed:
                found.append(f"{path} is in the bundle but not recomputed")
            elif key not in bundled:
                found.append(f"{path} is missing (recomputed: {recomputed[key]!r})")
            else:
                found += differences(bundled[key], recomputed[key], path)
        return found
    if isinstance(bundled, list) and isinstance(recomputed, list) and len(bundled) == len(recomputed):
        pairs = zip(bundled, recomputed, strict=True)
        return [d for i, (a, b) in enumerate(pairs) for d in differences(a, b, f"{where}[{i}]")]
    if not _same(bundled, recomputed):
        return [f"{where or 'the value'} is {bundled!r} in the bundle, recomputed {recomputed!r}"]
    return []


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def compare_table(name: str, bundled: str, recomputed: str) -> list[str]:
    """Cell by cell: `table <name>, row <n> (<first two columns>), column <c>`."""
    old, new = _rows(bundled), _rows(recomputed)
    if not old or not new or old[0] != new[0]:
        return [f"table {name}: columns {old[0] if old else []} in the bundle, recomputed {new[0] if new else []}"]
    header, found = new[0], []
    if len(old) != len(new):
        found.append(f"table {name}: {len(old) - 1} rows in the bundle, recomputed {len(new) - 1}")
    for number, (row_old, row_new) in enumerate(zip(old[1:], new[1:], strict=False), 1):
        # The first two columns name a row (dataset and nodes, or dataset and run).
        label = ", ".join(f"{c}={v}" for c, v in zip(header[:2], row_new[:2], strict=False))
        for column, a, b in zip(header, row_old, row_new, strict=False):
            if a != b:
                found.append(
                    f"table {name}, row {number} ({label}), column {column}: {a!r} in the bundle, recomputed {b!r}"
                )
    return found


def _rank(difference: str) -> int:
    if difference.startswith(NAMED_LAST):
        return len(FIRST_NAMED) + 1
    return next((i for i, start in enumerate(FIRST_NAMED) if difference.startswith(start)), len(FIRST_NAMED))


def described(name: str, found: list[str], source: str) -> str | None:
    """One problem line for a file: its first differences, most telling first."""
    if not found:
        return None
    found = sorted(found, key=_rank)
    more = f"; and {len(found) - MAX_SHOWN} more" if len(found) > MAX_SHOWN else ""
    return f"{name}: {'; '.join(found[:MAX_SHOWN])}{more} ({source})"
