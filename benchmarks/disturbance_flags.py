"""Which runs of a finished study the disturbance rule flags, and what their outlying steps were.

For every run summary under RESULTS (a demo's results/, or several): its measured steps' coefficient
of variation, the steps that stand out (analysis.per_run.disturbance), how far they move the mean
against the other steps' 95% interval, whether the rule flags the run now and whether the rule before
#55 (any step that stands out flags the run) did, and, per outlying step, which of its timers grew:
each phase (verl's timing_s/<phase>, and the rest of the step) against that phase's median over the
run's measured steps. No verl, nothing written.

    .venv/bin/python benchmarks/disturbance_flags.py RESULTS [RESULTS ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from rlvr_scaling.analysis.per_run.disturbance import CV_BOUND, assess
from rlvr_scaling.measured.metrics import PHASES, read_steps


def phase_times(step: dict) -> dict[str, float]:
    times = {phase: float(step.get(f"timing_s/{phase}", 0.0)) for phase in PHASES}
    times["other"] = float(step["timing_s/step"]) - sum(times.values())
    return times


def grown(steps: list[dict], number: int) -> str:
    """The outlying step's phases against their medians, the largest growth first."""
    medians = {phase: statistics.median(phase_times(s)[phase] for s in steps) for phase in [*PHASES, "other"]}
    step = next(s for s in steps if s["step"] == number)
    growth = sorted(((t - medians[p], p) for p, t in phase_times(step).items()), reverse=True)
    return ", ".join(f"{phase} {delta:+.3f} s" for delta, phase in growth[:3])


def report(results: Path) -> tuple[int, int, int]:
    """Print each run; (runs, flagged now, flagged by the rule before)."""
    runs = flagged = flagged_before = 0
    for path in sorted((results / "summaries").glob("*.json")):
        summary = json.loads(path.read_text())
        run_dir = results / "runs" / summary["run_id"]
        if not (run_dir / "metrics.jsonl").is_file():
            continue
        steps, _, _ = read_steps(run_dir / "metrics.jsonl")
        warmup = summary["summary"]["warmup_steps"]
        measured = [s for s in steps if s["step"] > warmup]
        record = assess([(s["step"], float(s["timing_s/step"])) for s in measured])
        if record is None:
            continue
        runs += 1
        before = record["cv"] > CV_BOUND or bool(record["outliers"])
        flagged += record["disturbed"]
        flagged_before += before
        print(
            f"{summary['run_id']:<28} cv {record['cv']:.3f}  median {record['median_s']:.3f} s  "
            f"flagged now {'yes' if record['disturbed'] else 'no ':<3}  before {'yes' if before else 'no'}"
        )
        for outlier in record["outliers"]:
            print(
                f"    step {outlier['step']}: {outlier['time_s']:.3f} s ({outlier['from_median']:+.0%}); "
                f"mean moved {record['mean_shift']:+.1%}, interval reaches {record['allowed_shift']:.1%}; "
                f"grew: {grown(measured, outlier['step'])}"
            )
    return runs, flagged, flagged_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path, help="a study's results/ folder")
    args = parser.parse_args()
    for results in args.results:
        print(f"{results}:")
        runs, flagged, before = report(results)
        print(f"  {flagged} of {runs} runs flagged disturbed by the rule now; {before} by the rule before #55\n")


if __name__ == "__main__":
    main()
