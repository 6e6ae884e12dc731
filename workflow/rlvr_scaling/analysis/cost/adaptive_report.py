"""What the report says of the adaptive step count (measured.adaptive_steps): how many runs it stopped,
where, and the node-hours the steps not run would have cost."""

from __future__ import annotations

from typing import Any

from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.measured.adaptive_steps import describe_rule
from rlvr_scaling.measured.models import RunSummary


def steps_not_run_node_hours(run: RunSummary) -> float:
    """What the steps a run did not take would have cost, at its mean measured step time: those after
    its stop less the ones verl logged before it was ended (paid for, not measured). The step under
    way at the end counts as not run."""
    stop = run.adaptive_stop
    if not stop or run.measured is None:
        return 0.0
    not_run = stop["configured_steps"] - stop["step"] - stop.get("steps_logged_after", 0)
    return max(0, not_run) * run.measured.step_time_s.mean * run.nodes / 3600


def _under_the_rule(summary: RunSummary) -> bool:
    """A run made with the rule on (its summary checked the rule); imported runs and runs made with it
    off are not counted among the runs it could have stopped."""
    return any(check.name == "adaptive_steps" for check in summary.checks)


def adaptive_findings(results: StudyResults, rule: dict[str, Any] | None) -> list[str]:
    """The report's sentences on the adaptive step count; none when it was off and no run stopped."""
    runs = [s for s in results.summaries.values() if s.valid and s.measured is not None and s.overhead]
    stopped = sorted(
        ((s, s.adaptive_stop) for s in runs if s.adaptive_stop),
        key=lambda run: (run[0].dataset, run[0].nodes, run[0].prompts),
    )
    if rule is None and not stopped:
        return []
    described = f" ({describe_rule(rule)})" if rule else ""
    if not stopped:
        return [f"The adaptive step count was on{described}, but no run stopped early: every run took all its steps."]
    under_the_rule = [s for s in runs if _under_the_rule(s)]
    saved = sum(steps_not_run_node_hours(s) for s, _ in stopped)
    # The share is of what the runs made with the rule cost; a run made without it could not have saved.
    spent = sum(s.nodes * s.overhead["wall_s"] / 3600 for s in under_the_rule if s.overhead)
    taken = sorted({stop["step"] for _, stop in stopped})
    after = str(taken[0]) if len(taken) == 1 else f"{taken[0]} to {taken[-1]}"
    configured = sorted({stop["configured_steps"] for _, stop in stopped})
    of = f"their {configured[0]}" if len(configured) == 1 else f"their {configured[0]} to {configured[-1]}"
    lines = [
        f"The adaptive step count{described} stopped {len(stopped)} of "
        f"{len(under_the_rule)} runs made with it early, after {after} of {of} steps. "
        f"The steps not run would have cost about {saved:.3g} node-hours at each run's mean step time: "
        f"{saved / (spent + saved):.0%} of the {spent + saved:.3g} node-hours the runs would have taken in all."
    ]
    for s, stop in stopped:
        lines.append(
            f"{s.dataset}, {s.nodes} node{'s' if s.nodes > 1 else ''}, {s.prompts} prompts per node: stopped "
            f"after step {stop['step']} of "
            f"{stop['configured_steps']} (+-{stop['relative_halfwidth']:.1%}), saving "
            f"{steps_not_run_node_hours(s):.3g} node-hours (`{s.run_id}`)."
        )
    return lines
