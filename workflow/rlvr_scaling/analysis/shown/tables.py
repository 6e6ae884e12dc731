"""The rows of the study's tables, from the run summaries (written by analysis.shown.table_files).

Every row carries the run ids it was computed from, so each cell traces back to its runs.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr_scaling.analysis.across_runs import scaling
from rlvr_scaling.analysis.across_runs.engine_fill import under_filled
from rlvr_scaling.analysis.per_run import disturbance
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.measured.metrics import PHASES, throughput_per_gpu
from rlvr_scaling.measured.models import RunSummary
from rlvr_scaling.measured.stats import bootstrap_ci, row_mean_ratio

ALL_PHASES = (*PHASES, "other")
NO_INTERVAL = (math.nan, math.nan)


def per_step_throughput(summary: RunSummary) -> list[float]:
    return [throughput_per_gpu(s, summary.gpus) for s in summary.measured_steps()]


def per_step_time(summary: RunSummary) -> list[float]:
    return [float(s["timing_s/step"]) for s in summary.measured_steps()]


def phase_means(summary: RunSummary) -> dict[str, float]:
    assert summary.measured is not None
    return {p: summary.measured.phases_s[p].mean for p in ALL_PHASES}


def ratio_interval(numerator: list[float], denominator: list[float], same_run: bool) -> tuple[float, float]:
    """Interval of mean(numerator) / mean(denominator). A run compared with itself is 1 exactly: resampling
    its steps twice, independently, would give a ratio of one series to itself a spread it cannot have."""
    if same_run:
        return 1.0, 1.0
    return bootstrap_ci([numerator, denominator], row_mean_ratio)


def weak_rows(results: StudyResults) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        base = results.run_at(dataset, "weak", 1)
        for s in results.series(dataset, "weak"):
            thr = s.figures.throughput_per_gpu
            row = {
                "dataset": dataset,
                "nodes": s.nodes,
                "gpus": s.gpus,
                "prompts": s.prompts,
                "trajectories": s.trajectories,
                "step_time_s": s.figures.step_time_s.mean,
                "step_time_std_s": s.figures.step_time_s.std,
                "throughput_per_gpu": thr.mean,
                "throughput_per_gpu_std": thr.std,
                "throughput_per_gpu_ci_low": (thr.ci95 or NO_INTERVAL)[0],
                "throughput_per_gpu_ci_high": (thr.ci95 or NO_INTERVAL)[1],
                "efficiency": math.nan,
                "efficiency_ci_low": math.nan,
                "efficiency_ci_high": math.nan,
                # its steps vary beyond analysis.per_run.disturbance's bound: empty, or why and which steps
                "disturbed": disturbance.short(s.figures.disturbance),
                "run_id": s.run_id,
                "base_run_id": base.run_id if base else None,
            }
            if base:
                row["efficiency"] = scaling.weak_efficiency(thr.mean, base.figures.throughput_per_gpu.mean)
                row["efficiency_ci_low"], row["efficiency_ci_high"] = ratio_interval(
                    per_step_throughput(s), per_step_throughput(base), same_run=s is base
                )
            rows.append(row)
    return rows


def strong_rows(results: StudyResults, reference_nodes: int) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        ref = results.run_at(dataset, "strong", reference_nodes)
        for s in results.series(dataset, "strong"):
            time_n = s.figures.step_time_s.mean
            row = {
                "dataset": dataset,
                "nodes": s.nodes,
                "gpus": s.gpus,
                "prompts": s.prompts,
                "trajectories_per_engine": s.trajectories_per_engine,
                # fewer trajectories per engine than the one-node workload set its engines to (engine_fill)
                "under_filled": under_filled(s),
                "step_time_s": time_n,
                "step_time_std_s": s.figures.step_time_s.std,
                # summaries written before the interval was added have none (NaN, shown empty)
                "step_time_ci_low_s": (s.figures.step_time_s.ci95 or NO_INTERVAL)[0],
                "step_time_ci_high_s": (s.figures.step_time_s.ci95 or NO_INTERVAL)[1],
                "speedup": math.nan,
                "speedup_ci_low": math.nan,
                "speedup_ci_high": math.nan,
                "ideal_speedup": scaling.ideal_speedup(s.nodes, reference_nodes),
                "efficiency": math.nan,
                "disturbed": disturbance.short(s.figures.disturbance),
                "run_id": s.run_id,
                "reference_run_id": ref.run_id if ref else None,
            }
            if ref:
                time_ref = ref.figures.step_time_s.mean
                row["speedup"] = scaling.strong_speedup(time_ref, time_n)
                row["efficiency"] = scaling.strong_efficiency(time_ref, time_n, s.nodes, reference_nodes)
                row["speedup_ci_low"], row["speedup_ci_high"] = ratio_interval(
                    per_step_time(ref), per_step_time(s), same_run=s is ref
                )
            rows.append(row)
    return rows


def phase_rows(results: StudyResults) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        for series in ("weak", "strong"):
            for s in results.series(dataset, series):
                phases = s.figures.phases_s
                row: dict[str, Any] = {"dataset": dataset, "series": series, "nodes": s.nodes}
                for p in ALL_PHASES:
                    row[f"{p}_s"] = phases[p].mean
                    row[f"{p}_std_s"] = phases[p].std
                row["step_s"] = s.figures.step_time_s.mean
                row["run_id"] = s.run_id
                rows.append(row)
    return rows


MFU_PHASES = ("gen", "old_log_prob", "update_actor", "step")


def mfu_rows(results: StudyResults) -> list[dict[str, Any]]:
    """MFU per phase of every scaling run (analysis.per_run.model_flops), verl's own beside it; empty cells
    where a run's MFU is not measured (the report says why)."""
    rows = []
    for dataset in results.datasets():
        for series in ("weak", "strong"):
            for s in results.series(dataset, series):
                mfu = s.figures.mfu or {}
                by_phase = mfu.get("by_phase") or {}
                row: dict[str, Any] = {"dataset": dataset, "series": series, "nodes": s.nodes, "prompts": s.prompts}
                for phase in MFU_PHASES:
                    row[f"{phase}_mfu"] = by_phase[phase]["mean"] if phase in by_phase else None
                row["step_mfu_std"] = by_phase["step"]["std"] if "step" in by_phase else None
                verl = mfu.get("verl") or {}
                row["verl_update_actor_mfu"] = verl.get("update_actor")
                row["verl_old_log_prob_mfu"] = verl.get("old_log_prob")
                row["peak_tflops_per_gpu"] = mfu.get("peak_tflops_per_gpu")
                row["run_id"] = s.run_id
                rows.append(row)
    return rows


def energy_rows(results: StudyResults) -> list[dict[str, Any]]:
    """Joules per step and per trajectory of every scaling run (analysis.per_run.energy_use); empty cells where
    a run's energy is not measured (the report says why)."""
    rows = []
    for dataset in results.datasets():
        for series in ("weak", "strong"):
            for s in results.series(dataset, series):
                energy = s.figures.energy or {}
                row: dict[str, Any] = {"dataset": dataset, "series": series, "nodes": s.nodes, "prompts": s.prompts}
                for key in (
                    "joules_per_step_per_node",
                    "accelerator_joules_per_step_per_node",
                    "joules_per_step",
                    "joules_per_trajectory",
                ):
                    row[key] = energy.get(key)
                row["source"] = energy.get("source") or ""
                row["run_id"] = s.run_id
                rows.append(row)
    return rows


def extra_time_rows(results: StudyResults, reference_nodes: int) -> list[dict[str, Any]]:
    """Per phase: time over ideal scaling from the base point, and its share of the extra step time."""
    rows = []
    for dataset in results.datasets():
        for series, base_nodes in (("weak", 1), ("strong", reference_nodes)):
            base = results.run_at(dataset, series, base_nodes)
            if not base:
                continue
            for s in results.series(dataset, series):
                if s.nodes <= base_nodes:
                    continue
                ideal = {
                    p: scaling.ideal_phase_time(v, base_nodes, s.nodes, series) for p, v in phase_means(base).items()
                }
                shares = scaling.extra_time_shares(phase_means(s), ideal)
                row: dict[str, Any] = {
                    "dataset": dataset,
                    "series": series,
                    "from_nodes": base_nodes,
                    "nodes": s.nodes,
                }
                for p in ALL_PHASES:
                    row[f"{p}_extra_s"] = shares[p]["extra_s"]
                    row[f"{p}_share"] = shares[p]["share"]
                row["run_id"], row["base_run_id"] = s.run_id, base.run_id
                rows.append(row)
    return rows


def table1_rows(results: StudyResults) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        one = results.run_at(dataset, "weak", 1)
        if not one:
            continue
        measured = one.measured
        assert measured is not None
        memory = one.memory_settings
        rows.append(
            {
                "dataset": dataset,
                "prompts": one.prompts,
                "trajectories": one.trajectories,
                "response_cap": one.max_response_length,
                "mean_response_length": measured.response_length.mean,
                "share_at_cap": measured.response_clip_ratio.mean,
                "concurrency_per_engine": one.concurrency,
                "recompute": memory["recompute"],
                "offload": memory["offload"],
                "token_budget": memory["token_budget"],
                "step_time_s": measured.step_time_s.mean,
                "throughput_per_gpu": measured.throughput_per_gpu.mean,
                "peak_memory_gb": measured.peak_memory_gb,
                "run_id": one.run_id,
            }
        )
    return rows


def sweep_rows(results: StudyResults) -> list[dict[str, Any]]:
    rows = []
    for index in results.indexes:
        selection = index.selection or {}
        for p in selection.get("points", []):
            rows.append(
                {
                    "dataset": index.dataset,
                    "prompts": p["prompts"],
                    "throughput_per_gpu": p["throughput_per_gpu"],
                    "step_time_s": p["step_time_s"],
                    "peak_memory_gb": p["peak_memory_gb"],
                    "memory_cap_gb": selection["rule"]["memory_cap_gb"],
                    "selected": p["prompts"] == selection["selected"]["prompts"],
                    "rejected_because": "; ".join(p["rejected_because"]),
                    "run_id": p["run_id"],
                }
            )
        for p in selection.get("skipped", []):  # not run: a sequential sweep stopped before them
            rows.append(
                {
                    "dataset": index.dataset,
                    "prompts": p["prompts"],
                    "throughput_per_gpu": None,
                    "step_time_s": None,
                    "peak_memory_gb": None,
                    "memory_cap_gb": selection["rule"]["memory_cap_gb"],
                    "selected": False,
                    "rejected_because": f"not run: {p['skipped_because']}",
                    "run_id": "",
                }
            )
    return rows


def invalid_rows(results: StudyResults) -> list[dict[str, Any]]:
    return [
        {
            "run_id": s.run_id,
            "dataset": s.dataset,
            "nodes": s.nodes,
            "reasons": "; ".join(f"{c.name}: {c.detail}" for c in s.failed_checks()),
        }
        for s in results.invalid()
    ]
