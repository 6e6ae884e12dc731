"""What a sequential sweep saved: the points it did not run, priced as the points it measured price
them (step time on their line in trajectories per engine, their steps, their median time outside the
steps), and the report's sentence saying so."""

from __future__ import annotations

import statistics

from rlvr_scaling.analysis.cost.calibration import step_line
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.measured.models import RunSummary


def point_node_hours(measured: list[RunSummary], prompts: int) -> float | None:
    """A sweep point not run, priced from the points measured; None without a valid one."""
    valid = [s for s in measured if s.valid and s.measured is not None]
    if not valid:
        return None
    fixed, per_trajectory = step_line(valid)
    reference = valid[0]
    per_engine = prompts * reference.trajectories_per_engine / reference.prompts
    outside = [s.overhead["startup_s"] + s.overhead["teardown_s"] for s in valid if s.overhead]
    outside_s = statistics.median(outside) if outside else 0.0
    step_s = max(0.0, fixed + per_trajectory * per_engine)
    # The steps the points ran: all of them, or, with the adaptive step count, where each stopped.
    steps = statistics.median(len(s.steps) for s in valid)
    return reference.nodes * (outside_s + steps * step_s) / 3600


def sweep_findings(results: StudyResults) -> list[str]:
    findings = []
    for index in results.indexes:
        selection = index.selection or {}
        if selection.get("pinned") or "points" not in selection:
            continue
        order = selection["rule"].get("sweep_order", "grid")
        measured = [results.summaries[p["run_id"]] for p in selection["points"] if p["run_id"] in results.summaries]
        skipped, stopped = selection.get("skipped", []), selection.get("stopped")
        ran = f"The {order} sweep of {index.dataset} ran {len(selection['points'])} of its "
        ran += f"{len(selection['points']) + len(skipped)} points"
        if stopped:
            ran += f": it stopped after {stopped['after_prompts']} prompts ({stopped['reason']})"
        if not skipped:
            findings.append(f"{ran}; none was left out.")
            continue
        prices = [point_node_hours(measured, p["prompts"]) for p in skipped]
        priced = [price for price in prices if price is not None]
        counts = ", ".join(str(p["prompts"]) for p in skipped)
        # Past the memory cap, a point would likely have failed before its last step.
        bound = "at most " if stopped and stopped.get("over_cap") else ""
        saved = (
            f"saving {bound}about {sum(priced):.3g} node-hours (priced from the points measured: step time on "
            "their line in trajectories per engine, their steps and their time outside the steps)"
            if len(priced) == len(prices)
            else "no valid point prices what that saved"
        )
        findings.append(f"{ran}; {counts} prompts did not run, {saved}.")
    return findings or ["Every dataset's one-node workload is pinned: no sweep ran."]
