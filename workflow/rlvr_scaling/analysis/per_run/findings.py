"""What the report's per-run findings (MFU, energy) share: which runs' records hold figures, and the line
naming why the others have none."""

from __future__ import annotations

from typing import Any


def measured_with(summaries: list[Any], field: str) -> list[Any]:
    """The summaries whose `field` record (measured.mfu, measured.energy) holds figures."""
    return [
        s
        for s in summaries
        if s.measured and getattr(s.measured, field) and not getattr(s.measured, field).get("not_measured")
    ]


def others_line(summaries: list[Any], measured: list[Any], field: str, missing: str) -> list[str]:
    """One line for the runs not in `measured`, with each reason their records give (`missing` for none)."""
    others = [s for s in summaries if s not in measured]
    if not others:
        return []
    reasons = sorted({(getattr(s.measured, field) or {}).get("not_measured") or missing for s in others if s.measured})
    return [f"Not measured for {len(others)} run(s): {'; '.join(reasons)}"]
