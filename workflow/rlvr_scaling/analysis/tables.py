"""The study's tables (CSV, Markdown, LaTeX) from the run summaries.

Every row carries the run ids it was computed from, so each cell traces back to its runs.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from rlvr_scaling.analysis import scaling
from rlvr_scaling.analysis.engine_fill import fill_rows, under_filled
from rlvr_scaling.analysis.metrics import PHASES, throughput_per_gpu
from rlvr_scaling.analysis.models import RunSummary
from rlvr_scaling.analysis.overhead import overhead_rows
from rlvr_scaling.analysis.phase_models import model_rows
from rlvr_scaling.analysis.results_io import StudyResults
from rlvr_scaling.analysis.stats import bootstrap_ci, row_mean_ratio

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
        series = results.series(dataset, "weak")
        base = next((s for s in series if s.nodes == 1), None)
        for s in series:
            thr = s.measured.throughput_per_gpu
            row = {
                "dataset": dataset,
                "nodes": s.nodes,
                "gpus": s.gpus,
                "prompts": s.prompts,
                "trajectories": s.trajectories,
                "step_time_s": s.measured.step_time_s.mean,
                "step_time_std_s": s.measured.step_time_s.std,
                "throughput_per_gpu": thr.mean,
                "throughput_per_gpu_std": thr.std,
                "throughput_per_gpu_ci_low": thr.ci95[0],
                "throughput_per_gpu_ci_high": thr.ci95[1],
                "efficiency": math.nan,
                "efficiency_ci_low": math.nan,
                "efficiency_ci_high": math.nan,
                "run_id": s.run_id,
                "base_run_id": base.run_id if base else None,
            }
            if base:
                row["efficiency"] = scaling.weak_efficiency(thr.mean, base.measured.throughput_per_gpu.mean)
                row["efficiency_ci_low"], row["efficiency_ci_high"] = ratio_interval(
                    per_step_throughput(s), per_step_throughput(base), same_run=s is base
                )
            rows.append(row)
    return rows


def strong_rows(results: StudyResults, reference_nodes: int) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        series = results.series(dataset, "strong")
        ref = next((s for s in series if s.nodes == reference_nodes), None)
        for s in series:
            time_n = s.measured.step_time_s.mean
            row = {
                "dataset": dataset,
                "nodes": s.nodes,
                "gpus": s.gpus,
                "prompts": s.prompts,
                "trajectories_per_engine": s.trajectories_per_engine,
                # fewer trajectories per engine than the one-node workload set its engines to (engine_fill)
                "under_filled": under_filled(s),
                "step_time_s": time_n,
                "step_time_std_s": s.measured.step_time_s.std,
                # summaries written before the interval was added have none (NaN, shown empty)
                "step_time_ci_low_s": (s.measured.step_time_s.ci95 or NO_INTERVAL)[0],
                "step_time_ci_high_s": (s.measured.step_time_s.ci95 or NO_INTERVAL)[1],
                "speedup": math.nan,
                "speedup_ci_low": math.nan,
                "speedup_ci_high": math.nan,
                "ideal_speedup": scaling.ideal_speedup(s.nodes, reference_nodes),
                "efficiency": math.nan,
                "run_id": s.run_id,
                "reference_run_id": ref.run_id if ref else None,
            }
            if ref:
                time_ref = ref.measured.step_time_s.mean
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
                phases = s.measured.phases_s
                row: dict[str, Any] = {"dataset": dataset, "series": series, "nodes": s.nodes}
                for p in ALL_PHASES:
                    row[f"{p}_s"] = phases[p].mean
                    row[f"{p}_std_s"] = phases[p].std
                row["step_s"] = s.measured.step_time_s.mean
                row["run_id"] = s.run_id
                rows.append(row)
    return rows


def extra_time_rows(results: StudyResults, reference_nodes: int) -> list[dict[str, Any]]:
    """Per phase: time over ideal scaling from the base point, and its share of the extra step time."""
    rows = []
    for dataset in results.datasets():
        for series, base_nodes in (("weak", 1), ("strong", reference_nodes)):
            runs = results.series(dataset, series)
            base = next((s for s in runs if s.nodes == base_nodes), None)
            if not base:
                continue
            for s in runs:
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
        one = next((s for s in results.series(dataset, "weak") if s.nodes == 1), None)
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


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return "" if value is None else str(value)


def _latex_escape(text: str) -> str:
    for char, escaped in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#")):
        text = text.replace(char, escaped)
    return text


def write_table(rows: list[dict[str, Any]], stem: Path, title: str) -> list[Path]:
    """The same rows as CSV, Markdown and LaTeX; an empty table still gets its header line."""
    columns = list(rows[0]) if rows else ["(no rows)"]
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv_path, md_path, tex_path = stem.with_suffix(".csv"), stem.with_suffix(".md"), stem.with_suffix(".tex")
    with open(csv_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    lines = [f"**{title}**", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
    md_path.write_text("\n".join(lines) + "\n")
    tex = [
        r"\begin{table}[ht]",
        r"\centering",
        rf"\caption{{{_latex_escape(title)}}}",
        r"\begin{tabular}{" + "l" * len(columns) + "}",
        r"\hline",
        " & ".join(_latex_escape(c) for c in columns) + r" \\",
        r"\hline",
    ]
    tex += [" & ".join(_latex_escape(_cell(r.get(c))) for c in columns) + r" \\" for r in rows]
    tex += [r"\hline", r"\end{tabular}", r"\end{table}"]
    tex_path.write_text("\n".join(tex) + "\n")
    return [csv_path, md_path, tex_path]


TABLES = {
    "weak_scaling": "Weak scaling: throughput per GPU and efficiency relative to one node",
    "strong_scaling": "Strong scaling: step time, speedup and efficiency relative to the reference node count",
    "phase_times": "Phase times per run (mean and sample std over measured steps)",
    "extra_time": "Extra step time over ideal scaling, by phase, and each phase's share",
    "engine_fill": "Strong scaling: trajectories per generation engine against the one-node saturation point",
    "overhead": "Each run's time and node-hours outside its steps: start-up before the first, tear-down after the last",
    "scaling_models": "Scaling models: each part's mean time vs nodes, the form chosen by cross-validation",
    "table1": "Table 1: the selected one-node configuration and its measured workload",
    "sweep": "One-node sweep: every point, the memory cap and the selected point",
    "invalid_runs": "Runs left out of the tables, with the checks they failed",
}


def write_tables(results: StudyResults, reference_nodes: int, output: Path) -> list[Path]:
    builders = {
        "weak_scaling": lambda: weak_rows(results),
        "strong_scaling": lambda: strong_rows(results, reference_nodes),
        "phase_times": lambda: phase_rows(results),
        "extra_time": lambda: extra_time_rows(results, reference_nodes),
        "engine_fill": lambda: fill_rows(results, reference_nodes),
        "overhead": lambda: overhead_rows(results),
        "scaling_models": lambda: model_rows(results),
        "table1": lambda: table1_rows(results),
        "sweep": lambda: sweep_rows(results),
        "invalid_runs": lambda: invalid_rows(results),
    }
    written = []
    for name, build in builders.items():
        written += write_table(build(), output / name, TABLES[name])
    return written
