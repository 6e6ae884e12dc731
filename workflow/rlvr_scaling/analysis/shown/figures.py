"""The study's figures (PNG and PDF), readable in greyscale: every series has its own marker,
line style or hatch, not only a colour. Error bars are the sample std over measured steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from rlvr_scaling.analysis.across_runs import scaling  # noqa: E402
from rlvr_scaling.analysis.per_run.results_io import StudyResults  # noqa: E402
from rlvr_scaling.analysis.shown.figure_data import DATA_FILE, FORMATS, Captions, plotted_data
from rlvr_scaling.analysis.shown.figure_models import figure_phase_models
from rlvr_scaling.analysis.shown.tables import ALL_PHASES, per_step_throughput, per_step_time  # noqa: E402
from rlvr_scaling.fsutil import json_text
from rlvr_scaling.measured.models import RunSummary
from rlvr_scaling.measured.stats import BOOTSTRAP_METHOD, sample_std  # noqa: E402

MARKERS = ["o", "s", "^", "D", "v", "P"]
LINES = ["-", "--", ":", "-."]
HATCHES = ["", "//", "..", "xx", "\\\\"]
PHASE_LABELS = {
    "gen": "generation",
    "old_log_prob": "log-prob recomputation",
    "update_actor": "model update",
    "update_weights": "weight sync",
    "other": "rest",
}


def steps_note(results: StudyResults) -> str:
    """What the error bars are, with the warm-up the runs' summaries say they left out."""
    warmups = sorted({s.measured.warmup_steps for s in results.summaries.values() if s.measured})
    if len(warmups) == 1:
        excluded = f"the first {warmups[0]} step(s) excluded as warm-up" if warmups[0] else "no warm-up excluded"
    else:
        excluded = f"the first {' or '.join(map(str, warmups))} steps excluded as warm-up, per run"
    return f"Error bars: sample std over the measured steps ({excluded})."


def _save(fig: Any, output: Path, name: str, captions: Captions, caption: str) -> None:
    captions.data[name] = plotted_data(fig)
    if captions.formats:
        fig.tight_layout()
    # No creation date in the PDF: the same runs draw the same bytes, so a bundle made again from
    # them is the same archive.
    for suffix in captions.formats:
        fig.savefig(output / f"{name}{suffix}", dpi=150, metadata={"CreationDate": None} if suffix == ".pdf" else {})
    plt.close(fig)
    captions[name] = caption


def _runs_note(runs: list[RunSummary]) -> str:
    return "Runs: " + ", ".join(r.run_id for r in runs) + "."


def figure_phases(results: StudyResults, output: Path, captions: Captions) -> None:
    ones = [s for d in results.datasets() for s in results.series(d, "weak") if s.nodes == 1]
    fig, ax = plt.subplots(figsize=(7, 1.8 + 0.8 * max(1, len(ones))))
    for row, s in enumerate(ones):
        left = 0.0
        for i, phase in enumerate(ALL_PHASES):
            width = s.figures.phases_s[phase].mean
            ax.barh(
                row,
                width,
                left=left,
                color=sns.color_palette("Greys", len(ALL_PHASES))[i],
                edgecolor="black",
                hatch=HATCHES[i % len(HATCHES)],
                label=PHASE_LABELS[phase] if row == 0 else None,
            )
            left += width
    ax.set_yticks(range(len(ones)), [s.dataset for s in ones])
    ax.set_xlabel("time per step (s)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=3, fontsize="small", frameon=False)
    _save(
        fig,
        output,
        "figure1_step_phases",
        captions,
        "Figure 1: the phases of one RLVR step on one node at the selected workload, mean over measured steps. "
        + _runs_note(ones),
    )


def _node_axis(ax: Any, nodes: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(nodes))
    ax.set_xticks(ticks, [str(n) for n in ticks])
    ax.minorticks_off()
    ax.set_xlabel("nodes")


def _series_plot(results: StudyResults, series: str, value: Any, ylabel: str, ideal: Any = None) -> tuple[Any, list]:
    fig, ax = plt.subplots(figsize=(6, 4))
    used = []
    for i, dataset in enumerate(results.datasets()):
        runs = results.series(dataset, series)
        points = [(s.nodes, *value(s, runs)) for s in runs]
        points = [p for p in points if p[1] is not None]
        if not points:
            continue
        used += runs
        nodes, centre, spread = zip(*points, strict=True)
        ax.errorbar(
            nodes,
            centre,
            yerr=spread,
            marker=MARKERS[i % len(MARKERS)],
            linestyle=LINES[i % len(LINES)],
            color="black",
            capsize=3,
            label=dataset,
        )
        if ideal is not None:
            ax.plot(nodes, [ideal(n) for n in nodes], linestyle=":", color="grey", label="ideal" if i == 0 else None)
    _node_axis(ax, [s.nodes for s in used])
    ax.set_ylabel(ylabel)
    ax.legend()
    return fig, used


def figure_weak_efficiency(results: StudyResults, output: Path, captions: Captions) -> None:
    def value(s: RunSummary, runs: list[RunSummary]) -> tuple[float | None, float]:
        base = next((r for r in runs if r.nodes == 1), None)
        if base is None:
            return None, 0.0
        # The point is the table's efficiency (analysis/across_runs/scaling.py, on the runs' means); the bar, the
        # spread of the steps' own ratios.
        reference = base.figures.throughput_per_gpu.mean
        ratios = [100 * scaling.weak_efficiency(t, reference) for t in per_step_throughput(s)]
        return 100 * scaling.weak_efficiency(s.figures.throughput_per_gpu.mean, reference), sample_std(ratios)

    fig, used = _series_plot(results, "weak", value, "weak-scaling efficiency (%)")
    _save(
        fig,
        output,
        "figure2_weak_efficiency",
        captions,
        "Figure 2: weak-scaling efficiency, throughput per GPU at N nodes over throughput per GPU at one node "
        f"(tokens of prompts and responses / step time / GPUs). {steps_note(results)} Confidence intervals in "
        f"tables/weak_scaling: {BOOTSTRAP_METHOD}. " + _runs_note(used),
    )


def figure_strong_speedup(results: StudyResults, reference_nodes: int, output: Path, captions: Captions) -> None:
    def value(s: RunSummary, runs: list[RunSummary]) -> tuple[float | None, float]:
        ref = next((r for r in runs if r.nodes == reference_nodes), None)
        if ref is None:
            return None, 0.0
        # The point is the table's speedup (analysis/across_runs/scaling.py: T_ref / mean T_N, not the mean of the
        # steps' ratios); the bar, the spread of the steps' own ratios.
        reference = ref.figures.step_time_s.mean
        speedups = [scaling.strong_speedup(reference, t) for t in per_step_time(s)]
        return scaling.strong_speedup(reference, s.figures.step_time_s.mean), sample_std(speedups)

    fig, used = _series_plot(
        results,
        "strong",
        value,
        f"speedup over {reference_nodes} nodes",
        ideal=lambda n: scaling.ideal_speedup(n, reference_nodes),
    )
    _save(
        fig,
        output,
        "figure4_strong_speedup",
        captions,
        f"Figure 4: strong-scaling speedup, step time at {reference_nodes} nodes over step time at N nodes, with "
        f"the ideal N/{reference_nodes}. {steps_note(results)} Confidence intervals in tables/strong_scaling: "
        f"{BOOTSTRAP_METHOD}. " + _runs_note(used),
    )


def figure_phase_times(
    results: StudyResults, series: str, name: str, title: str, output: Path, captions: Captions
) -> None:
    datasets = results.datasets()
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    used = []
    for ax, dataset in zip(axes[0], datasets, strict=True):
        runs = results.series(dataset, series)
        used += runs
        for i, phase in enumerate(ALL_PHASES):
            phases = [s.figures.phases_s[phase] for s in runs]
            ax.errorbar(
                [s.nodes for s in runs],
                [p.mean for p in phases],
                yerr=[p.std for p in phases],
                marker=MARKERS[i % len(MARKERS)],
                linestyle=LINES[i % len(LINES)],
                color="black",
                capsize=3,
                label=PHASE_LABELS[phase],
            )
        _node_axis(ax, [s.nodes for s in runs] or [1])
        ax.set_title(dataset)
        ax.set_ylabel("time per step (s)")
    axes[0][0].legend(fontsize="small")
    _save(fig, output, name, captions, f"{title} {steps_note(results)} " + _runs_note(used))


def figure_sweep(results: StudyResults, output: Path, captions: Captions) -> None:
    indexes = [i for i in results.indexes if i.selection and i.selection.get("points")]
    if not indexes:
        return
    fig, axes = plt.subplots(2, len(indexes), figsize=(5 * len(indexes), 6), squeeze=False, sharex="col")
    for col, index in enumerate(indexes):
        selection = index.selection or {}  # never empty: indexes are those with sweep points
        points = [p for p in selection["points"] if p["throughput_per_gpu"] is not None]
        chosen = selection["selected"]["prompts"]
        top, bottom = axes[0][col], axes[1][col]
        top.plot([p["prompts"] for p in points], [p["throughput_per_gpu"] for p in points], "o-", color="black")
        top.axvline(chosen, linestyle="--", color="grey", label=f"selected: {chosen} prompts")
        skipped = [p["prompts"] for p in selection.get("skipped", [])]
        if skipped and points:
            low = min(p["throughput_per_gpu"] for p in points)
            top.plot(skipped, [low] * len(skipped), "x", color="grey", label="not run: the sweep stopped")
        top.set_title(index.dataset)
        top.set_ylabel("throughput per GPU (tokens/s)")
        top.legend(fontsize="small")
        mem = [p for p in points if p["peak_memory_gb"] is not None]
        bottom.plot([p["prompts"] for p in mem], [p["peak_memory_gb"] for p in mem], "s--", color="black")
        bottom.axhline(selection["rule"]["memory_cap_gb"], linestyle=":", color="grey", label="memory cap")
        bottom.axvline(chosen, linestyle="--", color="grey")
        bottom.set_xlabel("prompts per node (one node)")
        bottom.set_ylabel("peak memory (GB)")
        bottom.legend(fontsize="small")
    _save(
        fig,
        output,
        "figure_sweep",
        captions,
        "One-node sweep: mean throughput per GPU and peak training memory per prompt count, the memory cap "
        "and the selected point (rule in results/selection/<dataset>.json)." + skipped_note(indexes),
    )


def skipped_note(indexes: list[Any]) -> str:
    """The caption's account of the points a sequential sweep did not run, and why."""
    notes = []
    for index in indexes:
        skipped = index.selection.get("skipped", [])
        if skipped:
            counts = ", ".join(str(p["prompts"]) for p in skipped)
            notes.append(f" {index.dataset}: {counts} prompts not run ({skipped[0]['skipped_because']}).")
    return (" Points marked x were not run:" + "".join(notes)) if notes else ""


def write_figures(
    results: StudyResults, reference_nodes: int, output: Path, formats: tuple[str, ...] = FORMATS
) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    sns.set_theme(style="whitegrid", palette="Greys")
    captions = Captions(formats)
    figure_phases(results, output, captions)
    figure_weak_efficiency(results, output, captions)
    figure_phase_times(
        results,
        "weak",
        "figure3_weak_phase_times",
        "Figure 3: phase times vs nodes under weak scaling (ideal: constant).",
        output,
        captions,
    )
    figure_strong_speedup(results, reference_nodes, output, captions)
    figure_phase_times(
        results,
        "strong",
        "figure5_strong_phase_times",
        "Figure 5: phase times vs nodes under strong scaling (fixed workload).",
        output,
        captions,
    )
    figure_sweep(results, output, captions)
    figure_phase_models(results, output, captions, _save)
    (output / "captions.json").write_text(json_text(dict(captions)))
    (output / DATA_FILE).write_text(json_text(captions.data))
    return sorted(output.iterdir())
