"""Prints how long Snakemake takes to find that a finished study has nothing to do (target: under 3 s),
and how long it takes to plan the rerun of one changed setting.

    .venv/bin/python benchmarks/noop_rerun.py WORKDIR [--configfile FILE ...] [--repeat 5]

WORKDIR is a working directory whose study has finished (after `make demo`: the repository itself;
after the tests: pytest's kept local-study folder, /tmp/pytest-of-$USER/pytest-N/local-study0, with
--configfile tests/data/reduced.yaml). Only dry runs: nothing in WORKDIR changes.

On a machine where Slurm is installed but its controller is down, every Snakemake start waits about
9 s more: the Slurm executor plugin runs `scontrol show config` (10 s timeout) when it is imported,
even for a local run. Measure with the controller up, or without Slurm installed.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def dry_run_seconds(workdir: Path, configfiles: list[str]) -> tuple[float, str]:
    command = [SNAKEMAKE, "-n", "--cores", "2", *(["--configfile", *configfiles] if configfiles else [])]
    start = time.monotonic()
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return seconds, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--configfile", nargs="*", default=[])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    configfiles = [str(Path(f).resolve()) for f in args.configfile]
    times = []
    for _ in range(args.repeat):
        seconds, output = dry_run_seconds(args.workdir, configfiles)
        if "Nothing to be done" not in output:
            raise SystemExit(f"the study in {args.workdir} is not finished:\n{output[-2000:]}")
        times.append(seconds)
    print(
        f"unchanged study, `snakemake -n` x{args.repeat}: median {statistics.median(times):.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f})"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as extra:
        extra.write("overrides:\n  selection_rule.tolerance: 0.5\n")
        extra.flush()
        seconds, output = dry_run_seconds(args.workdir, [*configfiles, extra.name])
    table = output.split("Job stats:")[1] if "Job stats:" in output else ""
    jobs = [f"{rule} {count}" for rule, count in re.findall(r"^(\w+)\s+(\d+)$", table, re.M) if rule != "total"]
    print(f"changed selection rule, `snakemake -n`: {seconds:.2f} s, jobs planned: {', '.join(jobs)}")


if __name__ == "__main__":
    main()
