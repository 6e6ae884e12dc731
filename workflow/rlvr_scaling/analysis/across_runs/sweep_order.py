"""The one-node sweep as the study ran it: prompt counts in increasing order, "until throughput stops
improving or GPU memory is exhausted". After each point measured, the sweep goes on unless that point
is over the memory cap (a larger workload needs more memory still) or its throughput per GPU fell more
than the selection rule's tolerance below the best so far (within it, the points tie, as they do for
the selection). `selection_rule.sweep_order: grid` runs every point instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEQUENTIAL = "sequential"
GRID = "grid"


@dataclass(frozen=True)
class SweepStop:
    after_prompts: int  # the last point run
    reason: str  # why the sweep stopped there
    # Stopped by memory: a point past it would likely fail before its last step.
    over_cap: bool = False


def sweep_stop(points: list[dict[str, Any]], tolerance: float) -> SweepStop | None:
    """Where a sequential sweep stops among `points` (selection.point_row, in increasing prompts), or
    None when every one of them lets it go on. A point that is no measurement of throughput (failed
    checks, not over the cap) says nothing about the trend, so the sweep goes on past it."""
    best: dict[str, Any] | None = None
    for point in points:
        if point["over_cap"]:
            return SweepStop(point["prompts"], f"{point['prompts']} prompts are over the memory cap", over_cap=True)
        throughput = point["throughput_per_gpu"]
        if not point["eligible"] or throughput is None:
            continue
        if best is not None and throughput < best["throughput_per_gpu"] * (1 - tolerance):
            best_so_far = f"{best['throughput_per_gpu']:.4g} at {best['prompts']} prompts"
            return SweepStop(
                point["prompts"],
                f"throughput at {point['prompts']} prompts ({throughput:.4g} tokens/s/GPU) fell more than "
                f"{tolerance:.0%} below the best so far ({best_so_far})",
            )
        if best is None or throughput > best["throughput_per_gpu"]:
            best = point
    return None
