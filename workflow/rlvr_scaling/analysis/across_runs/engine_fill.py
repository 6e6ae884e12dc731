"""The study's explanation of its strong-scaling losses, made from the numbers: as nodes are added
to a fixed workload, each generation engine gets fewer trajectories. Every run's engines are set to
the concurrency of the one-node workload (vLLM max_num_seqs: its trajectories per engine, where the
sweep found throughput saturated, or the workload pinned in the config); a run whose engines get
fewer runs them under-filled, and its time over ideal scaling is then mostly generation."""

from __future__ import annotations

from typing import Any

from rlvr_scaling.analysis.across_runs import scaling
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.measured.metrics import PHASES
from rlvr_scaling.measured.models import RunSummary

STEP_PARTS = (*PHASES, "other")


def under_filled(run: RunSummary) -> bool:
    return run.trajectories_per_engine < run.concurrency


def generation_share(run: RunSummary, reference: RunSummary) -> tuple[float, float | None]:
    """The run's step time over ideal scaling from the reference, and generation's share of it (None
    when there is no time over ideal to share out)."""
    phases = {p: run.figures.phases_s[p].mean for p in STEP_PARTS}
    ideal = {
        p: scaling.ideal_phase_time(reference.figures.phases_s[p].mean, reference.nodes, run.nodes, "strong")
        for p in STEP_PARTS
    }
    shares = scaling.extra_time_shares(phases, ideal)
    extra = sum(s["extra_s"] for s in shares.values())
    return extra, (shares["gen"]["share"] if extra > 0 else None)


def fill_rows(results: StudyResults, reference_nodes: int) -> list[dict[str, Any]]:
    rows = []
    for dataset in results.datasets():
        reference = results.run_at(dataset, "strong", reference_nodes)
        for run in results.series(dataset, "strong"):
            # None (an empty cell): no time over ideal at or below the reference.
            extra, gen_share = None, None
            if reference is not None and run.nodes > reference.nodes:
                extra, gen_share = generation_share(run, reference)
            rows.append(
                {
                    "dataset": dataset,
                    "nodes": run.nodes,
                    "trajectories_per_engine": run.trajectories_per_engine,
                    "concurrency": run.concurrency,
                    "under_filled": under_filled(run),
                    "extra_over_ideal_s": extra,
                    "gen_share_of_extra": gen_share,
                    "run_id": run.run_id,
                }
            )
    return rows


def _at(row: dict[str, Any]) -> str:
    return f"{row['trajectories_per_engine']:g} at {row['nodes']} node{'' if row['nodes'] == 1 else 's'}"


def _nodes(values: list[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def fill_finding(dataset: str, rows: list[dict[str, Any]], pinned: bool) -> str:
    """One paragraph per dataset (its strong series, by nodes), every number from the rows."""
    first, last = rows[0], rows[-1]
    text = f"**{dataset}**: under strong scaling the trajectories per generation engine "
    text += f"fall from {_at(first)} to {_at(last)}." if len(rows) > 1 else f"are {_at(first)}."
    chosen = "pinned in the config" if pinned else "where the one-node sweep saturated"
    text += f" Every engine is set to the one-node workload's {first['concurrency']:g} ({chosen})"
    under = [r for r in rows if r["under_filled"]]
    if not under:
        return text + "; no run gives it fewer, so none is under-filled."
    text += f"; the runs at {_nodes([r['nodes'] for r in under])} nodes give it fewer: their engines are under-filled."
    explained = [r for r in under if r["gen_share_of_extra"] is not None]
    if explained:
        parts = [f"{r['gen_share_of_extra']:.0%} at {r['nodes']} nodes" for r in explained]
        text += f" Generation's share of their time over ideal scaling: {', '.join(parts)}."
    return text


def fill_findings(results: StudyResults, reference_nodes: int) -> list[str]:
    rows = fill_rows(results, reference_nodes)
    findings = []
    for dataset in results.datasets():
        mine = [r for r in rows if r["dataset"] == dataset]
        if mine:
            pinned = bool((results.index(dataset).selection or {}).get("pinned"))
            findings.append(fill_finding(dataset, mine, pinned))
    return findings
