"""The scaling models of a study: per dataset, series and part of a step (each phase, the rest, the
whole step), the chosen model of its mean time against the nodes (analysis.across_runs.scaling_models), and
what they predict at node counts not measured: step time, efficiency and node-hours."""

from __future__ import annotations

from typing import Any

from rlvr_scaling.analysis.across_runs.scaling_models import Model, choose_model
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.measured.metrics import PHASES
from rlvr_scaling.measured.models import RunSummary

PARTS = (*PHASES, "other", "step")
TERMS = ("a", "b", "c")  # fixed, per 1/N, per log2(N): as the forms name them


def part_time(summary: RunSummary, part: str) -> float:
    measured = summary.measured
    assert measured is not None
    return measured.step_time_s.mean if part == "step" else measured.phases_s[part].mean


def series_model(runs: list[RunSummary], part: str) -> Model | None:
    return choose_model([float(r.nodes) for r in runs], [part_time(r, part) for r in runs])


def _coefficients(model: Model) -> dict[str, float | None]:
    named = dict.fromkeys(TERMS)
    terms = ["a", *(["b"] if "b/N" in model.form else []), *(["c"] if "c log2" in model.form else [])]
    named.update(zip(terms, model.coefficients, strict=True))
    return named


def model_rows(results: StudyResults) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        for series in ("weak", "strong"):
            runs = results.series(dataset, series)
            for part in PARTS:
                model = series_model(runs, part) if runs else None
                if model is None:
                    continue
                rows.append(
                    {
                        "dataset": dataset,
                        "series": series,
                        "part": part,
                        "form": model.form,
                        **{f"{term}_s": value for term, value in _coefficients(model).items()},
                        "loo_rmse_s": model.cv_rmse,
                        "points": len(runs),
                        "run_ids": " ".join(r.run_id for r in runs),
                    }
                )
    return rows


def efficiency(series: str, time_n: float, nodes: int, base_time: float, base_nodes: int) -> float:
    """Weak: the same work per GPU, so base time / time; strong: speedup over ideal speedup."""
    if series == "weak":
        return base_time / time_n
    return base_time / time_n / (nodes / base_nodes)


def predictions(
    results: StudyResults, nodes: list[int], reference_nodes: int, steps: int, outside_s: dict[int, float]
) -> list[dict[str, Any]]:
    """Step time (with its 95% prediction interval), efficiency and node-hours of each series at
    `nodes`; `outside_s` per node count, the time a run of that size is expected to spend outside its steps."""
    rows = []
    for dataset in results.datasets():
        for series, base_nodes in (("weak", 1), ("strong", reference_nodes)):
            runs = results.series(dataset, series)
            model = series_model(runs, "step") if runs else None
            base = next((r for r in runs if r.nodes == base_nodes), None)
            if model is None or base is None:
                continue
            for n in nodes:
                time_n, low, high = model.predict(n)
                rows.append(
                    {
                        "dataset": dataset,
                        "series": series,
                        "nodes": n,
                        "form": model.form,
                        "step_time_s": time_n,
                        "step_time_low_s": low,
                        "step_time_high_s": high,
                        "efficiency": efficiency(series, time_n, n, part_time(base, "step"), base_nodes),
                        "node_hours": n * (outside_s.get(n, 0.0) + steps * time_n) / 3600,
                    }
                )
    return rows
