"""A run's energy from the counters its launcher read (execution.energy): joules per step per node
between the first and the last step it saw logged, per step for the run (x nodes) and per trajectory,
with their source; "not measured" with the reason when the site has no counters or they were not read,
never 0."""

from __future__ import annotations

from typing import Any

from rlvr_scaling.analysis.per_run.findings import measured_with, others_line
from rlvr_scaling.execution.energy import joules_between

READ_ON = "the run's first node (the launcher's); per run and per trajectory as if its nodes drew alike"


def summarize_energy(job: dict[str, Any], nodes: int, trajectories: int) -> dict[str, Any]:
    if not isinstance(job.get("energy"), dict):
        return {"not_measured": "the run's job.json has no energy record (imported, or run before it was read)"}
    energy = job["energy"]
    source = energy.get("source")
    if not source or source == "none":
        return {"not_measured": "the site names no energy counters (energy.source)"}
    if "start" in energy and energy.get("start") is None and energy.get("end") is None:
        where = "pynvml in the launcher's Python and a GPU" if source == "nvml" else energy.get("path") or source
        return {"not_measured": f"the {source} counters could not be read on the launcher's node ({where})"}
    clock = job.get("step_clock") or {}
    first, last = clock.get("energy_first_step"), clock.get("energy_last_step")
    spent = joules_between(clock.get("first_step_energy_j"), clock.get("last_step_energy_j"))
    if spent is None or not isinstance(first, int) or not isinstance(last, int) or last <= first or spent["node"] <= 0:
        return {"not_measured": f"the {source} counters were not read at two step boundaries", "source": source}
    steps = last - first
    per_node = spent["node"] / steps
    accelerators = sum(v for k, v in spent.items() if k.startswith(("accel", "gpu")))
    whole = joules_between(energy.get("start"), energy.get("end"))
    return {
        "not_measured": None,
        "source": source,
        "read_on": READ_ON,
        "steps": [first + 1, last],
        "joules_per_step_per_node": per_node,
        "accelerator_joules_per_step_per_node": accelerators / steps if accelerators else None,
        "joules_per_step": per_node * nodes,
        "joules_per_trajectory": per_node * nodes / trajectories,
        "run_joules_per_node": whole["node"] if whole else None,
    }


def energy_findings(summaries: list[Any]) -> list[str]:
    """The report's lines: per run its joules per step and per trajectory, or why none."""
    measured = measured_with(summaries, "energy")
    if not measured:
        reasons = sorted({s.measured.energy["not_measured"] for s in summaries if s.measured and s.measured.energy})
        why = "; ".join(reasons) or "no run's summary has an energy record (summaries written before it existed)"
        return [f"Not measured: {why}."]
    first = measured[0].measured.energy
    lines = [
        f"From the {first['source']} counters, read on {first['read_on']}; between the first and last steps logged."
    ]
    for s in sorted(measured, key=lambda s: (s.dataset, s.nodes, s.prompts)):
        e = s.measured.energy
        first_step, last_step = e["steps"]
        lines.append(
            f"{s.dataset}, {s.nodes} node(s), {s.prompts} prompts: {e['joules_per_step_per_node'] / 1000:.1f} kJ "
            f"per step per node, {e['joules_per_trajectory']:.0f} J per trajectory (steps {first_step}..{last_step})"
        )
    return lines + others_line(summaries, measured, "energy", "no record")
