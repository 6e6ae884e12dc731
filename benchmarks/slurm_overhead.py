"""Prints the scheduler's overhead per job through the real Snakemake Slurm executor: submission to
start (sacct Submit -> Start) and end to detection (sacct End -> Snakemake reporting the job done),
for trivial jobs on the test cluster (tests/slurm/cluster.sh start) with the test profile's polling.

    RLVR_SLURM_ACCOUNT=rlvr-test .venv/bin/python benchmarks/slurm_overhead.py [--jobs 4]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEFILE = """
rule all:
    input: expand("done/{i}.txt", i=range(JOBS))

rule job:
    output: "done/{i}.txt"
    resources: slurm_partition="standard-g", runtime=5, mem_mb=100, cpus_per_task=1
    shell: "echo $SLURM_JOB_ID > {output}"
"""


def sacct_times(job_id: str) -> tuple[dt.datetime, dt.datetime, dt.datetime]:
    out = (
        subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "Submit,Start,End"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split("|")
    )
    return tuple(dt.datetime.fromisoformat(t) for t in out)  # type: ignore[return-value]  # two times, one per line asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "Snakefile").write_text(f"JOBS = {args.jobs}\n" + SNAKEFILE)
        start = time.time()
        result = subprocess.run(
            [
                str(Path(sys.executable).with_name("snakemake")),
                "--executor",
                "slurm",
                "--jobs",
                str(args.jobs),
                "--slurm-init-seconds-before-status-checks",
                "1",
                "--seconds-between-status-checks",
                "2",
                "--default-resources",
                f"slurm_account={os.environ.get('RLVR_SLURM_ACCOUNT', 'rlvr-test')}",
            ],
            cwd=work,
            capture_output=True,
            text=True,
        )
        wall = time.time() - start
        if result.returncode != 0:
            raise SystemExit(result.stderr[-3000:])
        log = result.stderr
        finished = {}
        for match in re.finditer(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]\nFinished jobid: (\d+)", log):
            finished[match.group(2)] = dt.datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
        waits, detections = [], []
        for i in range(args.jobs):
            job_id = (work / "done" / f"{i}.txt").read_text().strip()
            submit, begin, end = sacct_times(job_id)
            waits.append((begin - submit).total_seconds())
            if finished:
                detections.append(max(0.0, (max(finished.values()) - end).total_seconds()))
    print(f"{args.jobs} trivial jobs through the Slurm executor: wall {wall:.1f} s")
    print(
        f"  submission to start (sacct, 1 s resolution): median {statistics.median(waits):.1f} s, "
        f"max {max(waits):.1f} s"
    )
    if detections:
        print(f"  end to detection by Snakemake (upper bound, last report): {max(detections):.1f} s")


if __name__ == "__main__":
    main()
