"""The one-node workload: chosen from the sweep as the study did it.

Highest throughput per GPU among valid points whose peak memory stays under the cap; points within
`tolerance` of the best tie, and the smallest prompt count among them wins (the study's GSM8K choice:
throughput saturated at 100 prompts). Failed points count as over the cap.
"""

from __future__ import annotations

from typing import Any

from .errors import StudyError


class SelectionError(StudyError):
    """No sweep point can be selected; the message lists every point and why."""


def point_row(summary: dict[str, Any], cap_gb: float) -> dict[str, Any]:
    figures = summary.get("summary") or {}
    peak = figures.get("peak_memory_gb")
    throughput = (figures.get("throughput_per_gpu") or {}).get("mean")
    reasons = [f"{c['name']}: {c['detail']}" for c in summary.get("checks", []) if not c["passed"]]
    if summary.get("status") == "failed":
        reasons.insert(0, f"run failed ({summary.get('failure', 'see its console.log')}); counted as over the cap")
    elif peak is not None and peak > cap_gb:
        reasons.append(f"peak memory {peak:.2f} GB over the cap {cap_gb:.2f} GB")
    return {
        "prompts": summary["prompts"],
        "run_id": summary["run_id"],
        "throughput_per_gpu": throughput,
        "step_time_s": (figures.get("step_time_s") or {}).get("mean"),
        "peak_memory_gb": peak,
        "eligible": not reasons and throughput is not None,
        "rejected_because": reasons,
    }


def select(
    dataset: str, summaries: list[dict[str, Any]], memory_cap_fraction: float, tolerance: float
) -> dict[str, Any]:
    if not summaries:
        raise SelectionError(f"no sweep points for {dataset}")
    cap_gb = memory_cap_fraction * summaries[0]["gpu_memory_gb"]
    points = sorted((point_row(s, cap_gb) for s in summaries), key=lambda p: p["prompts"])
    eligible = [p for p in points if p["eligible"]]
    if not eligible:
        listing = "; ".join(
            f"{p['prompts']} prompts ({p['run_id']}): {', '.join(p['rejected_because'])}" for p in points
        )
        raise SelectionError(f"no valid sweep point for {dataset}, so no scaling run can start. Points: {listing}")
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
    return {
        "dataset": dataset,
        "selected": {k: chosen[k] for k in ("prompts", "run_id", "throughput_per_gpu", "peak_memory_gb")},
        "points": points,
        "rule": {
            "objective": "max mean throughput per GPU over measured steps",
            "memory_cap_fraction": memory_cap_fraction,
            "memory_cap_gb": cap_gb,
            "tolerance": tolerance,
            "tie_break": "fewest prompts",
        },
        "reason": reason,
    }
