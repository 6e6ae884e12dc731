"""The measured coverage of the study's 95% intervals where the study lives: 10 and 19 measured steps,
independent and AR(1) steps, 2% and 20% noise, and a heavy-tailed case (a few disturbed steps).

For every case (analysis.verdict.coverage.CASES) and interval (step-time mean, weak efficiency, strong
speedup, compare's ratio) it simulates `--runs` runs, computes each interval with the study's own code
(measured.stats.bootstrap_ci) and prints the share that holds the true value, its binomial standard
error, the intervals' median width relative to the true value, and the share of runs the disturbance
rule (analysis.per_run.disturbance) flags. No verl, no files: about a minute of numpy per 1000 runs.

    .venv/bin/python benchmarks/interval_coverage.py [--runs 2000] [--seed 0] [--markdown]
"""

from __future__ import annotations

import argparse
import math

from rlvr_scaling.analysis.verdict.coverage import CASES, CLAIMED, INTERVALS, coverage, flagged_share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs (or pairs) per case and interval")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--markdown", action="store_true", help="a Markdown table, as docs/interval-coverage.md")
    args = parser.parse_args()
    se = math.sqrt(0.95 * 0.05 / args.runs)
    names = list(INTERVALS)
    if args.markdown:
        print(
            "| case | claimed | "
            + " | ".join(f"{n} (width)" for n in names)
            + " | flagged disturbed | flagged by the rule before #55 |"
        )
        print("|---|---|" + "---|" * (len(names) + 2))
    else:
        print(f"{args.runs} runs per cell; binomial standard error of a 95% coverage: {se:.1%}")
    for number, case in enumerate(CASES):
        cells = []
        for column, name in enumerate(names):
            hits, width = coverage(case, name, args.runs, seed=args.seed + 100 * number + column)
            cells.append(f"{hits / args.runs:.1%} ({width:.3f})")
        now, before = flagged_share(case, args.runs, seed=args.seed + 100 * number + 99)
        flagged = f"{now:.1%} | {before:.1%}" if args.markdown else f"{now:.1%} (before #55: {before:.1%})"
        claimed = "yes" if case in CLAIMED else "no"
        if args.markdown:
            print(f"| {case.name} | {claimed} | " + " | ".join(cells) + f" | {flagged} |")
        else:
            print(
                f"{case.name:<55} claimed {claimed:<3} "
                + "  ".join(f"{n}: {c}" for n, c in zip(names, cells, strict=True))
                + f"  flagged: {flagged}"
            )


if __name__ == "__main__":
    main()
