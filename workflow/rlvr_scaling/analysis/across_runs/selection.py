"""The one-node workload: chosen from the sweep as the study did it.

Highest throughput per GPU among valid points whose peak memory stays under the cap; points within
`tolerance` of the best tie, and the smallest prompt count among them wins (the study's GSM8K choice:
throughput saturated at 100 prompts). A sequential sweep (analysis.across_runs.sweep_order) is read as far as it
went, and the points it skipped are listed with the reason. A point counts as over the cap only on
evidence: a measured peak over it, or an out-of-memory error in its log. A point that failed otherwise
stops the selection (it is no measurement of anything), and a smaller point over the cap while a
larger one fits is reported.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlvr_scaling.analysis.across_runs.sweep_order import GRID, SEQUENTIAL, SweepStop, sweep_stop
from rlvr_scaling.errors import StudyError
from rlvr_scaling.measured.models import RunSummary


class SelectionError(StudyError):
    """No sweep point can be selected; the message lists every point and why."""


def point_row(summary: RunSummary, cap_gb: float) -> dict[str, Any]:
    measured = summary.measured
    peak = measured.peak_memory_gb if measured else None
    throughput = measured.throughput_per_gpu.mean if measured else None
    reasons = [f"{c.name}: {c.detail}" for c in summary.failed_checks()]
    over_cap = False
    if summary.status == "failed":
        if not summary.memory_evidence:
            raise SelectionError(
                f"sweep point {summary.prompts} prompts ({summary.run_id}) failed without running out of "
                f"memory ({summary.failure or 'see its console.log'}): that is no measurement of the memory "
                f"bound; delete results/runs/{summary.run_id} to run it again"
            )
        reasons.insert(0, f"ran out of memory ({summary.memory_evidence}): over the cap")
        over_cap = True
    elif peak is not None and peak > cap_gb:
        reasons.append(f"peak memory {peak:.2f} GB over the cap {cap_gb:.2f} GB")
        over_cap = True
    return {
        "prompts": summary.prompts,
        "run_id": summary.run_id,
        "throughput_per_gpu": throughput,
        "step_time_s": measured.step_time_s.mean if measured else None,
        "peak_memory_gb": peak,
        "eligible": not reasons and throughput is not None,
        "over_cap": over_cap,
        "rejected_because": reasons,
    }


def contradictions(points: list[dict[str, Any]]) -> list[str]:
    """Memory grows with the prompt count: a point over the cap below one that fits is suspect."""
    fits = [p for p in points if not p["over_cap"] and p["peak_memory_gb"] is not None]
    return [
        f"{low['prompts']} prompts ({low['run_id']}) are over the memory cap while {high['prompts']} prompts "
        f"({high['run_id']}) fit: check both runs"
        for low in points
        if low["over_cap"]
        for high in fits
        if high["prompts"] > low["prompts"]
    ]


def swept_points(
    summaries: list[RunSummary], cap_gb: float, tolerance: float, order: str
) -> tuple[list[dict[str, Any]], SweepStop | None]:
    """The points measured, in increasing prompts, as far as a sequential sweep went: a point past its
    stop (measured earlier, or by hand) is no part of it, and is not read."""
    points: list[dict[str, Any]] = []
    for summary in sorted(summaries, key=lambda s: s.prompts):
        points.append(point_row(summary, cap_gb))
        stop = sweep_stop(points, tolerance) if order == SEQUENTIAL else None
        if stop is not None:
            return points, stop
    return points, None


def skipped_points(planned: list[int], stop: SweepStop | None) -> list[dict[str, Any]]:
    if stop is None:
        return []
    because = f"the sweep stopped after {stop.after_prompts} prompts: {stop.reason}"
    return [{"prompts": p, "skipped_because": because} for p in sorted(planned) if p > stop.after_prompts]


def stop_sentence(dataset: str, stop: SweepStop | None, skipped: list[dict[str, Any]]) -> str:
    if stop is None or not skipped:
        return ""
    words = [str(p["prompts"]) for p in skipped]
    counts = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
    return (
        f"the sweep of {dataset} stopped after {stop.after_prompts} prompts ({stop.reason}), "
        f"so {counts} prompts did not run"
    )


def select(
    dataset: str,
    summaries: list[RunSummary],
    memory_cap_fraction: float,
    tolerance: float,
    planned: list[int] | None = None,
    order: str = GRID,
) -> dict[str, Any]:
    """`planned`: the sweep's prompt counts (datasets.<name>.sweep), for the points a sequential sweep
    skipped; `order`: selection_rule.sweep_order."""
    if not summaries:
        raise SelectionError(f"no sweep points for {dataset}")
    cap_gb = memory_cap_fraction * summaries[0].gpu_memory_gb
    points, stop = swept_points(summaries, cap_gb, tolerance, order)
    skipped = skipped_points(planned or [], stop)
    stopped = stop_sentence(dataset, stop, skipped)
    eligible = [p for p in points if p["eligible"]]
    if not eligible:
        listing = "; ".join(
            f"{p['prompts']} prompts ({p['run_id']}): {', '.join(p['rejected_because'])}" for p in points
        )
        raise SelectionError(
            f"no valid sweep point for {dataset}, so no scaling run can start. Points: {listing}"
            + (f"; {stopped}. Add smaller prompt counts to datasets.{dataset}.sweep" if stopped else "")
        )
    best = max(p["throughput_per_gpu"] for p in eligible)
    tied = [p for p in eligible if p["throughput_per_gpu"] >= best * (1 - tolerance)]
    chosen = min(tied, key=lambda p: p["prompts"])
    reason = (
        f"{chosen['prompts']} prompts per node: {chosen['throughput_per_gpu']:.4g} tokens/s/GPU, "
        f"{'the best' if chosen['throughput_per_gpu'] == best else f'within {tolerance:.0%} of the best {best:.4g}'}"
        f" among {len(eligible)} valid point(s) under the {cap_gb:.2f} GB memory cap"
    )
    if len(tied) > 1:
        reason += f"; {len(tied)} points tie within {tolerance:.0%}, the smallest prompt count wins"
    if stopped:
        reason += f"; {stopped}"
    warnings = contradictions(points)
    if warnings:
        reason += "; WARNING: " + "; ".join(warnings)
    return {
        "dataset": dataset,
        "selected": {k: chosen[k] for k in ("prompts", "run_id", "throughput_per_gpu", "peak_memory_gb")},
        "points": points,
        "skipped": skipped,
        "stopped": None if stop is None else asdict(stop),
        "rule": {
            "objective": "max mean throughput per GPU over measured steps",
            "memory_cap_fraction": memory_cap_fraction,
            "memory_cap_gb": cap_gb,
            "tolerance": tolerance,
            "tie_break": "fewest prompts",
            "sweep_order": order,
        },
        "reason": reason,
        "warnings": warnings,
    }


def select_from_files(study: Any, dataset: str, summary_paths: list[Path]) -> dict[str, Any]:
    """The selection by the study's rule, from the sweep's summary files."""
    rule = study.config.selection_rule
    summaries = [RunSummary.from_json(json.loads(path.read_text())) for path in summary_paths]
    planned = study.config.datasets[dataset].sweep
    return select(dataset, summaries, rule.memory_cap_fraction, rule.tolerance, planned, rule.sweep_order)


def sweep_step(
    dataset: str, summaries: list[RunSummary], memory_cap_fraction: float, tolerance: float
) -> dict[str, Any]:
    """After the points measured so far (a sequential sweep's prefix): whether the next point runs."""
    cap_gb = memory_cap_fraction * summaries[0].gpu_memory_gb
    points, stop = swept_points(summaries, cap_gb, tolerance, SEQUENTIAL)
    last = points[-1]
    return {
        "dataset": dataset,
        "after": {"prompts": last["prompts"], "run_id": last["run_id"]},
        "goes_on": stop is None,
        "reason": f"stops after {stop.after_prompts} prompts: {stop.reason}"
        if stop
        else f"goes on after {last['prompts']} prompts",
        "points": [p["prompts"] for p in points],
    }


def sweep_step_from_files(study: Any, dataset: str, summary_paths: list[Path]) -> dict[str, Any]:
    rule = study.config.selection_rule
    summaries = [RunSummary.from_json(json.loads(path.read_text())) for path in summary_paths]
    return sweep_step(dataset, summaries, rule.memory_cap_fraction, rule.tolerance)
