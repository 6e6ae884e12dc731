"""The study's tables as files: each table's rows (analysis.shown.tables and the modules named below) as
CSV, Markdown and LaTeX, under the names the report and the bundle's verify read."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from rlvr_scaling.analysis.across_runs.engine_fill import fill_rows
from rlvr_scaling.analysis.across_runs.phase_models import model_rows
from rlvr_scaling.analysis.cost.cost_check import cost_rows
from rlvr_scaling.analysis.per_run.overhead import overhead_rows
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.analysis.shown.tables import (
    energy_rows,
    extra_time_rows,
    invalid_rows,
    mfu_rows,
    phase_rows,
    strong_rows,
    sweep_rows,
    table1_rows,
    weak_rows,
)


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
    "energy": "Energy per step (per node, read on the run's first node) and per trajectory, with the counters' source",
    "mfu": "Model FLOPs utilisation per phase and per step (fraction of the site's BF16 peak), verl's own beside it",
    "engine_fill": "Strong scaling: trajectories per generation engine against the one-node saturation point",
    "cost": "Each run's node-hours: the site's estimate, the calibration from the other runs, and as measured",
    "overhead": "Each run's time and node-hours outside its steps: start-up before the first, tear-down after the last",
    "scaling_models": "Scaling models: each part's mean time vs nodes, the form chosen by cross-validation",
    "table1": "Table 1: the selected one-node configuration and its measured workload",
    "sweep": "One-node sweep: every point, the memory cap and the selected point",
    "invalid_runs": "Runs left out of the tables, with the checks they failed",
    "reproduction": "Reproduction: every published number and relation, measured against it, with its verdict",
}


def write_tables(
    results: StudyResults, reference_nodes: int, output: Path, reproduction: list[dict[str, Any]] | None = None
) -> list[Path]:
    """`reproduction`: the verdict rows (analysis.verdict.reproduction), none when the study names no reference."""
    builders = {
        "weak_scaling": lambda: weak_rows(results),
        "strong_scaling": lambda: strong_rows(results, reference_nodes),
        "phase_times": lambda: phase_rows(results),
        "extra_time": lambda: extra_time_rows(results, reference_nodes),
        "mfu": lambda: mfu_rows(results),
        "energy": lambda: energy_rows(results),
        "engine_fill": lambda: fill_rows(results, reference_nodes),
        "cost": lambda: cost_rows(results),
        "overhead": lambda: overhead_rows(results),
        "scaling_models": lambda: model_rows(results),
        "table1": lambda: table1_rows(results),
        "sweep": lambda: sweep_rows(results),
        "invalid_runs": lambda: invalid_rows(results),
        "reproduction": lambda: reproduction or [],
    }
    written = []
    for name, build in builders.items():
        written += write_table(build(), output / name, TABLES[name])
    return written
