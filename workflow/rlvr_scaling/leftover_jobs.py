"""After a Snakemake call that ended well: whether it left work of what it was asked for, and if so
a non-zero exit naming it (#61).

Snakemake 9 can end a call with "N of N steps done" and exit 0 while jobs it was asked for remain: it
skips the needrun check of every job downstream of one that must run, trusting its walk along the
edges to reach them, and the walk never crosses ancient inputs (snakemake#4166). The workflow's rules
are laid out so that it does not happen (the preflight is a checkpoint; rules/runs.smk says why);
this is the guard for what they do not foresee: a dry run of the same command line, which sees the
results as the next call would, and a study that stops halfway says so instead of passing for done.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence

from rlvr_scaling.snakemake_api import submits_jobs

# A dry run already says what is left; the calls that submit nothing (snakemake_api) make nothing to check.
DRY_RUN_OPTIONS = ("--dry-run", "-n", "--dryrun")
JOB_LINE = re.compile(r"^(\w+)\s+(\d+)$")
# A job's header as a dry run prints it: `rule X:` (`localrule`, `checkpoint`, `localcheckpoint`),
# or, for a rule with a message (the workflow's start "rule X:"), `Job N: rule X: <message>`.
RULE_LINE = re.compile(r"^(?:Job \d+: )?(?:local)?(?:rule|checkpoint) (\w+):")
REASON_LINE = re.compile(r"^[Rr]eason: (.*)$")
# The reasons told per rule: its jobs' different ones, the first few.
REASONS_PER_RULE = 3
# The part of a reason that names why, not the (possibly hundreds of) files it applies to.
REASON_CHARS = 400


def leftover_counts(dry_run_output: str) -> dict[str, int]:
    """{rule: jobs} of the first job-stats table of a dry run's output ({} when nothing is to be done)."""
    lines = dry_run_output.splitlines()
    if "Job stats:" not in lines:
        return {}
    counts: dict[str, int] = {}
    for line in lines[lines.index("Job stats:") + 3 :]:
        match = JOB_LINE.match(line.strip())
        if not match:
            break
        if match.group(1) not in ("total", "all"):  # the sum, and the target that only gathers
            counts[match.group(1)] = int(match.group(2))
    return counts


def leftover_reasons(dry_run_output: str) -> dict[str, list[str]]:
    """{rule: Snakemake's reasons} for the jobs of each rule in a dry run's output, each different one
    once, in its order: the first job whose reason is not another's update is where the plan and the
    files disagree."""
    reasons: dict[str, list[str]] = {}
    rule = None
    for line in dry_run_output.splitlines():
        stripped = line.strip()
        if match := RULE_LINE.match(stripped):
            rule = match.group(1)
        elif rule and (reason := REASON_LINE.match(stripped)):
            told = reasons.setdefault(rule, [])
            if reason.group(1) not in told:
                told.append(reason.group(1))
            rule = None
    return reasons


def _cut(reason: str) -> str:
    return reason[:REASON_CHARS] + (" ..." if len(reason) > REASON_CHARS else "")


def leftover_message(
    counts: dict[str, int], command: Sequence[str], reasons: dict[str, list[str]] | None = None
) -> str:
    jobs = ", ".join(f"{rule} {number}" for rule, number in counts.items())
    why = "".join(
        f"\n  {rule}: {_cut(reason)}"
        for rule, told in (reasons or {}).items()
        if rule in counts
        for reason in told[:REASONS_PER_RULE]
    )
    return (
        f"rlvr-scaling: this call ended with {sum(counts.values())} job(s) of what it was asked for still to do "
        f"({jobs}): Snakemake's plan changed while it ran (snakemake#4166). Nothing made is lost; run the same "
        f"command again to finish: {' '.join(command)}"
        + (f"\nWhy Snakemake would run them (its dry run's reasons):{why}" if why else "")
    )


def dry_run_command(argv: Sequence[str]) -> list[str]:
    # The options first: a target list may close the command line (`-- target`).
    return [sys.executable, "-m", "snakemake", "--dry-run", "--nolock", *argv[1:]]


def exit_if_work_left(argv: Sequence[str]) -> None:
    """Exit 1 naming what is left when a dry run of `argv` (Snakemake's own command line) would still
    run a job; nothing for calls that make nothing (a dry run, --touch, --report, --unlock)."""
    if not submits_jobs(list(argv)) or any(arg.split("=", 1)[0] in DRY_RUN_OPTIONS for arg in argv[1:]):
        return
    done = subprocess.run(dry_run_command(argv), capture_output=True, text=True)
    if done.returncode != 0:
        print(
            f"rlvr-scaling: the check that this call left nothing to do failed ({done.returncode}):\n"
            f"{done.stderr[-2000:]}",
            file=sys.stderr,
        )
        sys.exit(1)
    output = done.stdout + done.stderr
    counts = leftover_counts(output)
    if counts:
        print(leftover_message(counts, ["snakemake", *argv[1:]], leftover_reasons(output)), file=sys.stderr)
        sys.exit(1)
