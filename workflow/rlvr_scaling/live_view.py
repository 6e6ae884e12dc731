"""`rlvr-scaling status`'s live part: each run going on now (its Slurm job, nodes, step N of M, the last
and mean step time, when it should end) and the node-hours the study has spent against its plan and
budget. It reads the results folder and Slurm, never Snakemake, so it answers from any shell while
the controller runs, and `--watch` redraws it."""

from __future__ import annotations

import datetime as dt
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from rlvr_scaling.analysis.cost.budget import failed_attempts_cost, study_cost
from rlvr_scaling.execution.live_runs import LiveRun, live_runs
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PlannedRun

CLEAR_SCREEN = "\033[H\033[J"


@dataclass(frozen=True)
class Spent:
    """Node-hours: measured for runs done and failed attempts, so far for the runs going on."""

    done: float
    failed: float
    running: float
    plan_total: float  # spent (done and failed) plus the plan's estimate of every run not done
    budget: float | None

    @property
    def total(self) -> float:
        return self.done + self.failed + self.running


def spent(study: Study, plan: list[PlannedRun], root: Path, running: list[LiveRun]) -> Spent:
    cost = study_cost(study, plan, root)  # its spent: the runs done and the failed attempts
    failed = failed_attempts_cost(root, study.name)
    return Spent(
        done=cost.spent - failed,
        failed=failed,
        running=sum(run.node_hours for run in running if run.alive),
        plan_total=cost.total,
        budget=cost.budget,
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _end(run: LiveRun, now: dt.datetime) -> str:
    if run.expected_end is None:
        return "after its first step" if run.alive and not run.steps_done else "-"
    end = dt.datetime.fromisoformat(run.expected_end)
    return f"{end:%Y-%m-%d %H:%M} UTC (in {_seconds((end - now).total_seconds())})"


def _in_units(study: Study, node_hours: float) -> str:
    billing = study.site.billing
    return f" ({billing.node_hours_in_units(node_hours):.1f} {billing.unit})" if billing.unit else ""


def spent_line(study: Study, money: Spent) -> str:
    budget = "no budget set (budget.node_hours)"
    if money.budget is not None:
        budget = f"budget {money.budget:g} node-hours, {100 * money.total / money.budget:.1f}% of it spent"
    return (
        f"Spent: {money.total:.2f} node-hours{_in_units(study, money.total)} (runs done {money.done:.2f}, "
        f"failed attempts {money.failed:.2f}, running now {money.running:.2f}); the plan in all "
        f"{money.plan_total:.2f}; {budget}."
    )


def render_live(study: Study, running: list[LiveRun], money: Spent, now: dt.datetime) -> str:
    lines = [f"Running now ({sum(r.alive for r in running)}), at {now:%Y-%m-%d %H:%M:%S} UTC:"]
    header = ["run", "slurm job", "state", "nodes", "step", "last", "mean", "expected end"]
    rows = [
        [
            run.run_id,
            run.slurm_job_id or "-",
            run.state,
            ",".join(run.node_list) or str(run.nodes),
            f"{run.steps_done}/{run.steps_planned}",
            _seconds(run.last_step_s),
            _seconds(run.mean_step_s),
            _end(run, now),
        ]
        for run in running
    ]
    if rows:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines += [
            "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
        ]
    else:
        lines.append("  none")
    gone = [run for run in running if not run.alive]
    lines += [
        f"  {run.run_id}: its folder ({run.folder}) stays, but its job is {run.state}: "
        "the next launch of the run files it"
        for run in gone
    ]
    return "\n".join([*lines, spent_line(study, money)]) + "\n"


def where_it_stands(run: LiveRun) -> str:
    job = f", Slurm job {run.slurm_job_id}" if run.slurm_job_id else ""
    return f"step {run.steps_done} of {run.steps_planned}{job}"


def live_document(running: list[LiveRun], money: Spent) -> dict[str, Any]:
    return {"running": [asdict(run) for run in running], "spent": {**asdict(money), "total": money.total}}


def watch(draw: Any, seconds: float, out: TextIO = sys.stdout) -> int:
    """Redraw every `seconds` until Ctrl-C."""
    try:
        while True:
            out.write((CLEAR_SCREEN if out.isatty() else "") + draw())
            out.flush()
            time.sleep(seconds)
    except KeyboardInterrupt:
        return 0


def live_view(study: Study, plan: list[PlannedRun], root: Path) -> tuple[list[LiveRun], Spent, dt.datetime]:
    now = dt.datetime.now(dt.UTC)
    running = live_runs(root, now)
    return running, spent(study, plan, root, running), now
