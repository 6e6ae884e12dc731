"""A human-readable view of the plan."""

from __future__ import annotations

from .config import Study
from .plan import Run


def plan_table(study: Study, plan: list[Run]) -> str:
    header = ["run_id", "series", "nodes", "gpus", "prompts", "traj", "traj/engine", "cap", "steps", "time", "node-h"]
    rows = []
    for run in plan:
        rows.append(
            [
                run.run_id or "(pending)",
                "+".join(run.series),
                str(run.nodes),
                str(run.nodes * run.gpus_per_node),
                str(run.prompts) if run.prompts else "sel x ?",
                str(run.trajectories) if run.trajectories else "-",
                f"{run.trajectories_per_engine:g}" if run.trajectories_per_engine else "-",
                str(run.max_response_length),
                str(run.steps),
                f"{run.slurm['time_minutes']}m" if run.slurm else "-",
                f"{run.node_hours:.2f}" if run.node_hours is not None else "-",
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [
        f"Study {study.config['study']['name']} on site '{study.site_name}': {len(plan)} runs "
        f"({sum(1 for r in plan if r.run_id is None)} pending the sweep's selection)",
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    known = [r.node_hours for r in plan if r.node_hours is not None]
    lines.append(f"Estimated total: {sum(known):.1f} node-hours over the runs whose workload is known.")
    for run in plan:
        if run.pending:
            lines.append(f"  pending {run.dataset} {'+'.join(run.series)} n{run.nodes}: {run.pending}")
    return "\n".join(lines) + "\n"
