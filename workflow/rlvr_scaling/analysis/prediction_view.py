"""`rlvr-scaling plan --nodes 32,64`: what the measured series predict at node counts not measured
(analysis.phase_models): step time with its 95% prediction interval, efficiency, and the node-hours a
run of the study's steps would cost there."""

from __future__ import annotations

import math
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.analysis.phase_models import measured_startup, predictions
from rlvr_scaling.analysis.results_io import load_results
from rlvr_scaling.errors import StudyError
from rlvr_scaling.study.config import Study


def parse_nodes(text: str) -> list[int]:
    try:
        nodes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        nodes = []
    if not nodes or any(n < 1 for n in nodes):
        raise StudyError(f"plan: --nodes is {text!r}; expected node counts separated by commas, e.g. 32,64")
    return nodes


def startup_seconds(study: Study, measured: float | None, nodes: int) -> float:
    """The runs' measured median start-up if they recorded one, else the study's estimate; both grow
    by the estimate's minutes per doubling of nodes beyond one."""
    estimate = study.config.estimate
    growth = 60 * estimate.startup_minutes_per_doubling * math.log2(nodes)
    return (measured if measured is not None else 60 * estimate.startup_minutes) + growth


def prediction_text(study: Study, root: Path, nodes: list[int]) -> str:
    indexes = [paths.results_dir(root) / "index" / f"{d}.json" for d in study.datasets]
    found = [path for path in indexes if path.exists()]
    if not found:
        raise StudyError(
            f"plan --nodes predicts from measured series, and {paths.results_dir(root)}/index/ has none: run the "
            "study (its sweep and scaling runs) first"
        )
    results = load_results(found, root)
    measured = measured_startup(results)
    startup = {n: startup_seconds(study, measured, n) for n in nodes}
    rows = predictions(
        results, nodes, study.config.scaling.strong_reference_nodes, study.config.algorithm.steps, startup
    )
    lines = [
        f"Predicted from the measured series of study {study.name} on site '{study.site_name}' "
        f"(step time: the model chosen for it, 95% prediction interval):",
        f"{'dataset':<12}{'series':<8}{'nodes':>6}  {'step time (s)':<28}{'efficiency':>11}{'node-h':>9}  model",
    ]
    for r in rows:
        interval = f"{r['step_time_s']:.1f} [{r['step_time_low_s']:.1f}, {r['step_time_high_s']:.1f}]"
        lines.append(
            f"{r['dataset']:<12}{r['series']:<8}{r['nodes']:>6}  {interval:<28}{r['efficiency']:>11.2f}"
            f"{r['node_hours']:>9.2f}  {r['form']}"
        )
    source = f"the runs' measured median {measured:.0f} s" if measured is not None else "the study's estimate"
    lines.append(
        f"Node-hours: {study.config.algorithm.steps} steps plus a start-up of {source}, growing by "
        f"estimate.startup_minutes_per_doubling per doubling of nodes."
    )
    if not rows:
        lines.append("No series has enough measured node counts for a model (three are needed).")
    return "\n".join(lines) + "\n"
