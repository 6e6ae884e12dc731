"""Prints how long `make demo` takes on a warm environment (target: under 15 minutes on 2 cores) and
where the time goes: each run's seconds (from its job.json), Snakemake's own time between runs, and
the report.

    .venv/bin/python benchmarks/demo.py [--cores 2]

It runs the same two Snakemake commands as `make demo` in a temporary working directory that sees
the repository's workflow, so the study starts from an empty results/ and never touches results/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlvr_scaling.paths import link_workflow, results_dir

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def timed(command: list[str], cwd: Path) -> float:
    start = time.monotonic()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = link_workflow(Path(tmp))
        study_s = timed([SNAKEMAKE, "--cores", str(args.cores)], workdir)
        report_s = timed([SNAKEMAKE, "--cores", str(args.cores), "--report", "results/report/report.html"], workdir)
        runs = sorted(
            (json.loads(job.read_text()) for job in (results_dir(workdir) / "runs").glob("*/job.json")),
            key=lambda job: job["start"],
        )
    in_runs = sum(job["seconds"] for job in runs)
    total = study_s + report_s
    print(f"make demo equivalent, {args.cores} cores, from an empty results/: {total:.0f} s ({total / 60:.1f} min)")
    print(f"  study (snakemake --cores {args.cores}): {study_s:.0f} s")
    print(f"    {len(runs)} runs, one after another: {in_runs:.0f} s")
    for job in runs:
        print(f"      {job['seconds']:6.1f} s  {job['run_id']}  ({job['status']})")
    print(f"    everything else (data, model, summaries, selection, analysis, gaps): {study_s - in_runs:.0f} s")
    print(f"  report (snakemake --report): {report_s:.0f} s")


if __name__ == "__main__":
    main()
