"""`rlvr-scaling plan --nodes 32,64`: what the measured series predict at node counts not measured
(analysis.across_runs.phase_models): step time with its 95% prediction interval, efficiency, and the node-hours a
run of the study's steps would cost there."""

from __future__ import annotations

from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.analysis.across_runs.phase_models import predictions
from rlvr_scaling.analysis.across_runs.selection_io import current_plan
from rlvr_scaling.analysis.cost.calibration import calibrate
from rlvr_scaling.analysis.per_run.results_io import load_results
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


def prediction_text(study: Study, root: Path, nodes: list[int]) -> str:
    indexes = [paths.results_dir(root) / "index" / f"{d}.json" for d in study.datasets]
    found = [path for path in indexes if path.exists()]
    if not found:
        raise StudyError(
            f"plan --nodes predicts from measured series, and {paths.results_dir(root)}/index/ has none: run the "
            "study (its sweep and scaling runs) first"
        )
    results = load_results(found, root)
    # Priced as `plan` and the budget price a run not yet made (analysis.cost.calibration).
    calibration = calibrate(study, current_plan(study, root), root)
    outside = {n: calibration.outside_steps_s(study.config.estimate, n) or 0.0 for n in nodes}
    rows = predictions(
        results, nodes, study.config.scaling.strong_reference_nodes, study.config.algorithm.steps, outside
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
    measured = calibration.startup_s is not None
    growth = "measured" if calibration.startup_per_doubling_s is not None else "estimate.startup_minutes_per_doubling"
    lines.append(
        f"Node-hours: {study.config.algorithm.steps} steps, plus a start-up "
        f"{'as the runs measured it' if measured else 'by the estimate (estimate.startup_minutes)'} growing per "
        f"doubling of nodes ({growth}), plus the measured tear-down ({calibration.teardown_s:.0f} s)."
    )
    if not rows:
        lines.append("No series has enough measured node counts for a model (three are needed).")
    return "\n".join(lines) + "\n"
