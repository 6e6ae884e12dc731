"""Prints one local run's start-up time (launch to step 1 logged), its per-step time, step 1's timers
against the later steps', its peak memory (all processes of the run together, PSS sampled every 0.5 s;
target under 4 GiB) and when each of its processes started (where the start-up goes).

    .venv/bin/python benchmarks/local_run.py [--dataset gsm8k] [--steps 4] [--nodes 1]

It builds the tiny model and data in a temporary directory, so it never touches results/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR
from rlvr_scaling.inputs.data import prepare_dataset
from rlvr_scaling.inputs.model import prepare_model
from rlvr_scaling.paths import dataset_dir, model_dir
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan, known_runs

ROOT = Path(__file__).resolve().parents[1]


def run_memory(started: dict[int, tuple[float, str]]) -> tuple[int, int, list[tuple[int, str]]]:
    """(PSS, RSS, [(PSS, name)]) over the run's processes. RSS counts the libraries that ~10 Python
    processes share once per process; PSS splits shared pages between them: the machine's real footprint.
    Also notes in `started` each process's start time and latest name (a Ray worker takes its actor's
    name once it hosts one)."""
    pss = rss = 0
    processes = []
    for process in psutil.process_iter(["environ", "cmdline", "create_time"]):
        try:
            if TOKEN_VAR not in (process.info["environ"] or {}):
                continue
            full = process.memory_full_info()
        except (psutil.Error, TypeError):
            continue
        pss, rss = pss + full.pss, rss + full.rss
        name = process_name(process.info["cmdline"] or ["?"])
        processes.append((full.pss, name))
        started[process.pid] = (process.info["create_time"], name)
    return pss, rss, processes


def process_name(cmdline: list[str]) -> str:
    """Ray actors name themselves ray::Class; other processes by their script or module."""
    if cmdline[0].startswith("ray::"):
        return cmdline[0].split()[0]
    for part in cmdline[1:]:
        if part.endswith(".py") or part.startswith("verl.") or "main(" in part:
            return Path(part).name if part.endswith(".py") else part[:40]
    return Path(cmdline[0]).name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="gsm8k")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=1, help="local nodes (CPU worker groups) of the run")
    args = parser.parse_args()
    sets = [f"algorithm.steps={args.steps}"]
    # The workload of the sweep's first point, pinned so that multi-node runs are planned too.
    first_point = load_study(sets=sets).config.datasets[args.dataset].sweep[0]
    sets.append(f"selection.{args.dataset}={first_point}")
    study = load_study(sets=sets)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prepare_dataset(study, args.dataset, dataset_dir(root, study.site_name, args.dataset))
        prepare_model(study, model_dir(root, study.site_name, study.model_folder))
        runs = [r for r in known_runs(build_plan(study, root=root)) if r.dataset == args.dataset]
        run = next((r for r in runs if r.nodes == args.nodes), None)
        if run is None:
            raise SystemExit(
                f"--nodes {args.nodes}: the local plan has {args.dataset} runs on {[r.nodes for r in runs]}"
            )
        peak: list = [0, 0, []]
        started: dict[int, tuple[float, str]] = {}
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                pss, rss, processes = run_memory(started)
                if pss > peak[0]:
                    peak[0], peak[2] = pss, processes
                peak[1] = max(peak[1], rss)
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start, launched = time.monotonic(), time.time()
        first_step = None
        command = [
            sys.executable,
            "-m",
            "rlvr_scaling",
            "launch",
            "--root",
            str(root),
            *[f"--set={s}" for s in sets],
            run.run_id,
        ]
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while process.poll() is None:
            if first_step is None:
                for metrics in (root / "results" / "runs").glob(".staging-*/metrics.jsonl"):
                    if metrics.stat().st_size > 0:
                        first_step = time.monotonic() - start
            time.sleep(0.2)
        total = time.monotonic() - start
        done.set()
        sampler.join()
        if process.returncode != 0:
            raise SystemExit(f"the run failed (exit {process.returncode}); see {root}/results/failed")
        records = [json.loads(line) for line in (root / "results" / "runs" / run.run_id / "metrics.jsonl").open()]
        engine = json.loads((root / "results" / "runs" / run.run_id / "job.json").read_text()).get("engine", {})
        print(
            f"engine hooks: {len(engine.get('cpu_affinity', []))} worker(s) bound, "
            f"{len(engine.get('rollout_memory', []))} rollout sleep/wake events recorded"
        )
        later = [r["data"]["timing_s/step"] for r in records[1:]]
        print(f"run {run.run_id} ({run.trajectories} trajectories per step, {run.nodes * run.gpus_per_node} worker)")
        print(f"  start-up (launch to step 1 logged, includes step 1): {first_step:.1f} s")
        print(f"  step 1 (warm-up): {records[0]['data']['timing_s/step']:.2f} s")
        print(f"  later steps: mean {sum(later) / len(later):.2f} s over {len(later)} steps")
        # Where the warm-up step's extra time goes: its timers against the later steps' means.
        for key in sorted(k for k in records[0]["data"] if k.startswith("timing_s/") and k != "timing_s/step"):
            first = records[0]["data"][key]
            rest = [r["data"].get(key, 0.0) for r in records[1:]]
            if first >= 0.05:
                print(f"    {key}: step 1 {first:.2f} s, later {sum(rest) / len(rest):.2f} s")
        print(f"  whole run including shutdown: {total:.1f} s")
        print(
            f"  peak memory of all the run's processes: {peak[0] / 2**30:.2f} GiB PSS "
            f"({peak[1] / 2**30:.2f} GiB summed RSS, shared libraries counted once per process)"
        )
        # verl builds its actors one after another, each a new process importing torch and verl: when
        # each appeared shows where the start-up goes (seconds after launch, by start time).
        print("  when each process of the run started (s after launch):")
        for created, name in sorted(started.values()):
            print(f"    {created - launched:6.1f}  {name}")
        print(f"  at the peak, {len(peak[2])} processes (PSS MiB):")
        for size, name in sorted(peak[2], reverse=True):
            print(f"    {size / 2**20:7.0f}  {name}")


if __name__ == "__main__":
    main()
