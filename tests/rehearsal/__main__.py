"""`make rehearse`: the LUMI study rehearsed on the tests' Slurm cluster (tests/rehearsal/__init__.py).

    python -m tests.rehearsal [--compression 250] [--adaptive off|on|both] [--workdir DIR]

Needs the test cluster up with its 16 nodes (tests/slurm/cluster.sh start). Prints what it shows and
exits non-zero when any of it does not hold: a job refused, a healthy run stopped, another workload
selected, a verdict other than reproduced, a planted fault not handled as it must be.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.published_timings import profile_of
from tests.rehearsal import outcome, scratch

REPO = scratch.REPO
SNAKEMAKE = [sys.executable, str(REPO / "tests" / "slurm" / "snakemake_steady_polling.py")]
ACCOUNT = os.environ.get("RLVR_SLURM_TEST_ACCOUNT", "rlvr-test")
# The planted faults: a strong GSM8K run hangs after step 3 (every process alive, no step), and GSM8K's
# last sweep point (150 prompts, over the memory cap: the sweep stops there whatever its speed) steps
# 2.5 x slower than the plan predicts for it: the plan's ideal 0.24 s x 1,200 trajectories = 288 s.
FROZEN, SLOW = "gsm8k/16/400", "gsm8k/1/150"
SLOW_FACTOR = 2.5 * (0.24 * 150 * 8) / sum(profile_of(("gsm8k", 1, 150)))
FAULTS = {"slower": {SLOW: SLOW_FACTOR}, "freeze_after": {FROZEN: 3}}
NODES_NEEDED = 16


def _env(sc: scratch.Scratch) -> dict[str, str]:
    return {
        **os.environ,
        "RLVR_SLURM_ACCOUNT": ACCOUNT,
        "RLVR_STANDIN_TRAINER": "tests.standin_trainer",
        "RLVR_STANDIN_TIMINGS": str(sc.timings_file),
        "PYTHONPATH": str(REPO),
    }


def _cli(sc: scratch.Scratch, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "rlvr_scaling", *args]
    return subprocess.run(command, cwd=sc.root, env=_env(sc), capture_output=True, text=True)


def _snakemake(sc: scratch.Scratch, log: Path, *args: str) -> int:
    command = [*SNAKEMAKE, "--profile", "lumi", "--profile", str(sc.profile), "--configfile", str(sc.study_file), *args]
    with open(log, "a") as handle:
        handle.write(f"\n$ {' '.join(command)}\n")
        handle.flush()
        return subprocess.run(command, cwd=sc.root, env=_env(sc), stdout=handle, stderr=subprocess.STDOUT).returncode


class StatusSampler(threading.Thread):
    """`rlvr-scaling status --running` every few seconds while the study runs: the view a researcher
    has of it; the sample with the most runs going on is kept."""

    def __init__(self, sc: scratch.Scratch, every_s: float = 15.0) -> None:
        super().__init__(daemon=True)
        self.sc, self.every_s = sc, every_s
        self.best, self.best_count, self.samples = "", -1, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            shown = _cli(self.sc, "status", "--running", "--configfile", str(self.sc.study_file)).stdout
            self.samples += 1
            # runs with a step done (their progress "n/20" with n above 0): the view has progress and spent
            going = len(re.findall(r"\s[1-9][0-9]*/[0-9]+\s", shown))
            if going > self.best_count:
                self.best, self.best_count = shown, going


def _planned_node_hours(sc: scratch.Scratch) -> float:
    """The plan's estimate before the study: the sweep's points, and the 18 scaling runs at the
    published selection (compressed node-hours)."""
    total = 0.0
    for sets in ([], ["--set", "selection.gsm8k=100", "--set", "selection.dapo_math=10"]):
        shown = _cli(sc, "plan", "--config", str(sc.study_file), *sets, "--json")
        if shown.returncode:
            raise SystemExit(f"rehearsal: plan failed:\n{shown.stderr}")
        runs = json.loads(shown.stdout)
        wanted = ("sweep",) if not sets else ("weak", "strong")
        total += sum(r["node_hours"] or 0.0 for r in runs if r["node_hours"] and set(r["series"]) & set(wanted))
    return total


def rehearse(workdir: Path, factor: float, adaptive: bool, faults: bool, only: str | None) -> dict[str, Any]:
    """One rehearsal: the study through Slurm; after the planted hang, the study called again."""
    timings = {"jitter": 0.03, **(FAULTS if faults else {})}
    sc = scratch.make(workdir, factor, timings, adaptive, only)
    log = workdir / "snakemake.log"
    began = time.monotonic()
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    planned = _planned_node_hours(sc) * factor
    sampler = StatusSampler(sc)
    sampler.start()
    calls = [_snakemake(sc, log, "--omit-from", "bundle")]
    if calls[-1] and faults:
        # The planted hang was stopped and filed: the researcher calls the study again, which runs the
        # failed run alone (the hang does not recur) and everything after it.
        sc.timings_file.write_text(json.dumps({"compression": factor, "jitter": 0.03, "slower": FAULTS["slower"]}))
        calls.append(_snakemake(sc, log, "--omit-from", "bundle"))
    sampler.done.set()
    study_s = time.monotonic() - began
    calls.append(_snakemake(sc, log, "--omit-from", "bundle", "--report", "results/report/workflow.html"))
    calls.append(_snakemake(sc, log))
    bundles = sorted((workdir / "results" / "bundle").glob("*/*.tar.gz"))
    verified = _cli(sc, "verify", str(bundles[-1])) if bundles else None
    results = workdir / "results"
    found = outcome.runs(results)
    return {
        "workdir": str(workdir),
        "adaptive_steps": adaptive,
        "compression": factor,
        "calls": calls,
        "wall_seconds": round(time.monotonic() - began, 1),
        "study_seconds": round(study_s, 1),
        "slurm_jobs": outcome.slurm_jobs(workdir, since),
        "runs": found,
        "datasets": [only] if only else list(outcome.PUBLISHED_SELECTION),
        "selection": outcome.selections(results, only),
        "verdict": [v for v in outcome.verdict(results) if not only or v["dataset"] == only],
        "node_hours": {
            "spent": round(outcome.node_hours(found, factor), 1),
            "planned": round(planned, 1),
            "published_procedure": round(outcome.published_procedure_node_hours(only), 1),
        },
        "status_running": sampler.best,
        "status_samples": sampler.samples,
        "bundle_verified": verified is not None and verified.returncode == 0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.rehearsal", description=__doc__)
    parser.add_argument("--compression", type=float, default=250.0)
    parser.add_argument("--adaptive", choices=["off", "on", "both"], default="both")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument(
        "--only", choices=sorted(outcome.PUBLISHED_SELECTION), help="one dataset's half of the study (CI: gsm8k)"
    )
    args = parser.parse_args(argv)
    idle = subprocess.run(["sinfo", "-h", "-p", "standard-g", "-o", "%D"], capture_output=True, text=True)
    if idle.returncode or int((idle.stdout.split() or ["0"])[0]) < NODES_NEEDED:
        print(
            f"rehearsal: the test cluster must be up with {NODES_NEEDED} nodes (tests/slurm/cluster.sh start); "
            f"sinfo says: {(idle.stdout or idle.stderr).strip()!r}",
            file=sys.stderr,
        )
        return 2
    base = args.workdir or Path(f"/tmp/rlvr-rehearsal-{os.getpid()}")
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.adaptive]
    from tests.rehearsal.shown import judged, text

    faults = not args.no_faults
    outcomes = [
        rehearse(base / f"adaptive-{'on' if adaptive else 'off'}", args.compression, adaptive, faults, args.only)
        for adaptive in modes
    ]
    checks = [judged(o, faults=faults) for o in outcomes]
    print(text(outcomes, checks))
    (base / "rehearsal.json").write_text(json.dumps({"outcomes": outcomes, "checks": checks}, indent=1, default=str))
    print(f"\nThe rehearsal's record: {base / 'rehearsal.json'}")
    return 0 if all(not failed for check in checks for failed in check["failed"]) else 1


if __name__ == "__main__":
    sys.exit(main())
