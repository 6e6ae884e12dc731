"""The study's explanation of its strong-scaling losses, made from the numbers: as nodes are added
to a fixed workload, each generation engine gets fewer trajectories; a run whose engines get fewer
than the one-node workload the sweep chose (where throughput saturated) runs them under-filled, and
its time over ideal scaling is then mostly generation."""

from __future__ import annotations

from typing import Any

from rlvr_scaling.analysis import scaling
from rlvr_scaling.analysis.metrics import PHASES
from rlvr_scaling.analysis.models import RunSummary
from rlvr_scaling.analysis.results_io import StudyResults

STEP_PARTS = (*PHASES, "other")


def saturation_run(results: StudyResults, dataset: str) -> RunSummary | None:
    """The one-node run of the chosen workload: the sweep point past which throughput stopped rising
    (or the pinned workload, which the study chose that way)."""
    return next((s for s in results.series(dataset, "weak") if s.nodes == 1), None)


def generation_share(run: RunSummary, reference: RunSummary) -> tuple[float, float]:
    """The run's step time over ideal scaling from the reference, and generation's share of it."""
    phases = {p: run.measured.phases_s[p].mean for p in STEP_PARTS}
    ideal = {
        p: scaling.ideal_phase_time(reference.measured.phases_s[p].mean, reference.nodes, run.nodes, "strong")
        for p in STEP_PARTS
    }
    shares = scaling.extra_time_shares(phases, ideal)
    return sum(s["extra_s"] for s in shares.values()), shares["gen"]["share"]


def fill_rows(results: StudyResults, reference_nodes: int) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        saturated = saturation_run(results, dataset)
        series = results.series(dataset, "strong")
        reference = next((s for s in series if s.nodes == reference_nodes), None)
        for run in series:
            # None (an empty cell): no time over ideal below or at the reference.
            extra, gen_share = None, None
            if reference is not None and run.nodes > reference.nodes:
                extra, gen_share = generation_share(run, reference)
            rows.append(
                {
                    "dataset": dataset,
                    "nodes": run.nodes,
                    "trajectories_per_engine": run.trajectories_per_engine,
                    "saturated_at": saturated.trajectories_per_engine if saturated else None,
                    "under_filled": saturated is not None
                    and run.trajectories_per_engine < saturated.trajectories_per_engine,
                    "extra_over_ideal_s": extra,
                    "gen_share_of_extra": gen_share,
                    "run_id": run.run_id,
                    "saturation_run_id": saturated.run_id if saturated else None,
                }
            )
    return rows


def _nodes(values: list[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _at(row: dict[str, Any]) -> str:
    return f"{row['trajectories_per_engine']:g} at {row['nodes']} node{'' if row['nodes'] == 1 else 's'}"


def fill_finding(dataset: str, rows: list[dict[str, Any]]) -> str:
    """One paragraph per dataset (its strong series, by nodes), every number from the rows."""
    first, last = rows[0], rows[-1]
    text = f"**{dataset}**: under strong scaling the trajectories per generation engine "
    text += f"fall from {_at(first)} to {_at(last)}." if len(rows) > 1 else f"are {_at(first)}."
    if first["saturated_at"] is None:
        return text + " No one-node run of the chosen workload was measured, so no run can be called under-filled."
    text += f" The one-node sweep saturated at {first['saturated_at']:g} trajectories per engine"
    under = [r for r in rows if r["under_filled"]]
    if not under:
        return text + "; no run has fewer, so none is under-filled."
    text += f"; the runs at {_nodes([r['nodes'] for r in under])} nodes have fewer: their engines are under-filled."
    explained = [r for r in under if r["gen_share_of_extra"] is not None]
    if explained:
        parts = [f"{r['gen_share_of_extra']:.0%} at {r['nodes']} nodes" for r in explained]
        text += f" Generation's share of their time over ideal scaling: {', '.join(parts)}."
    return text


def fill_findings(results: StudyResults, reference_nodes: int) -> list[str]:
    rows = fill_rows(results, reference_nodes)
    datasets = [d for d in results.datasets() if any(r["dataset"] == d for r in rows)]
    return [fill_finding(d, [r for r in rows if r["dataset"] == d]) for d in datasets]
