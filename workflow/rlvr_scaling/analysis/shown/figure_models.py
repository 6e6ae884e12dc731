"""Figure 6: each part of a step, measured against its scaling model (analysis.across_runs.phase_models), per
dataset and series, with the model's 95% prediction band carried to four times the largest node
count measured."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from rlvr_scaling.analysis.across_runs.phase_models import PARTS, part_time, series_model
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.analysis.shown.figure_data import Captions

NAME = "figure6_phase_models"


def _panel(ax: Any, runs: list, part: str) -> str | None:
    model = series_model(runs, part)
    nodes = [r.nodes for r in runs]
    ax.plot(nodes, [part_time(r, part) for r in runs], "o", color="black", markersize=4)
    if model is None:
        return None
    grid = np.geomspace(1, 4 * max(nodes), 60)
    predicted = np.array([model.predict(n) for n in grid])
    ax.plot(grid, predicted[:, 0], "-", color="0.3", linewidth=1)
    ax.fill_between(grid, predicted[:, 1], predicted[:, 2], color="0.85")
    ax.set_xscale("log", base=2)
    ax.set_title(f"{part}: {model.form}", fontsize="x-small")
    return model.form


def figure_phase_models(results: StudyResults, output: Path, captions: Captions, save: Callable[..., None]) -> None:
    rows = [(d, s, results.series(d, s)) for d in results.datasets() for s in ("weak", "strong")]
    rows = [(d, s, runs) for d, s, runs in rows if runs]
    fig, axes = plt.subplots(
        max(1, len(rows)), len(PARTS), figsize=(2.2 * len(PARTS), 2.0 * max(1, len(rows))), squeeze=False
    )
    unmodelled = []
    for row, (dataset, series, runs) in enumerate(rows):
        forms = [_panel(axes[row][column], runs, part) for column, part in enumerate(PARTS)]
        if not any(forms):
            unmodelled.append(f"{dataset} {series}")
        axes[row][0].set_ylabel(f"{dataset} {series}\nseconds", fontsize="small")
    for ax in axes[-1]:
        ax.set_xlabel("nodes")
    used = [r.run_id for _, _, runs in rows for r in runs]
    caption = (
        "Figure 6: mean time of each part of a step against the nodes (points), with the model chosen for "
        "it by leave-one-out cross-validation among a + b/N, a + c log2(N) and both (line), and its 95% "
        "prediction band to four times the largest node count measured; table scaling_models gives the "
        "coefficients. Runs: " + ", ".join(used) + "."
    )
    if unmodelled:
        # A model needs three node counts (one left out, one for its interval): say where it is missing.
        caption += f" Too few node counts for a model (three are needed): {', '.join(unmodelled)}."
    save(fig, output, NAME, captions, caption)
