"""Prints how long `rlvr-scaling plan --site lumi --json` and `snakemake --profile lumi -n` take.

Targets (issue 2): plan under 2 s; the full-study dry run under 10 s. Run from the repository root:
    .venv/bin/python benchmarks/plan_speed.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlvr_scaling.paths import link_workflow

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "RLVR_SLURM_ACCOUNT": os.environ.get("RLVR_SLURM_ACCOUNT", "project_465000000")}
    # A working directory of its own: LUMI's results live on /scratch (storage.results), here in a
    # temporary directory, and the repository's own results/ stays untouched.
    workdir = link_workflow(Path(tempfile.mkdtemp(prefix="plan-speed-")))
    (workdir / "lumi").symlink_to(ROOT / "lumi")
    env["RLVR_RESULTS_ROOT"] = str(workdir / "scratch-results")
    cases = {
        "rlvr-scaling plan --site lumi --json": [str(BIN / "rlvr-scaling"), "plan", "--site", "lumi", "--json"],
        "snakemake --profile lumi -n (before the sweep)": [str(BIN / "snakemake"), "--profile", "lumi", "-n"],
        "snakemake --profile lumi -n (published selection, all 18 runs)": [
            str(BIN / "snakemake"),
            "--profile",
            "lumi",
            "-n",
            "--configfile",
            "config/published-selection.yaml",
        ],
    }
    for label, command in cases.items():
        times = [timed(command, env, workdir) for _ in range(args.repeat)]
        print(
            f"{label}: median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}, "
            f"n={args.repeat})"
        )


if __name__ == "__main__":
    main()
