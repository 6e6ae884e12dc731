"""What the rehearsal shows, read from its results alone: the jobs Slurm accepted, the runs and how
each ended, the hang guard's stops, the selection, the verdict, and the node-hours spent beside the
plan's and the published procedure's. Every duration and node-hour is scaled back by the
compression factor to LUMI's clock."""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import subprocess
from pathlib import Path
from typing import Any

from tests.published_timings import WARMUP_EXTRA_S, profile_of, startup_seconds

PUBLISHED_SELECTION = {"gsm8k": 100, "dapo_math": 10}
PUBLISHED_SWEEPS = {"gsm8k": [25, 50, 100, 150, 200], "dapo_math": [5, 10, 15, 20]}
SCALING_NODES = (1, 2, 4, 8, 16)


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _seconds(job: dict[str, Any]) -> float | None:
    try:
        return (dt.datetime.fromisoformat(job["end"]) - dt.datetime.fromisoformat(job["start"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def runs(results: Path) -> list[dict[str, Any]]:
    """Every run folder (done and filed as failed) with how it ended."""
    found = []
    for job_file in [*results.glob("runs/*/job.json"), *results.glob("failed/*/*/job.json")]:
        job = _json(job_file)
        spec = _json(job_file.with_name("spec.json")) if job_file.with_name("spec.json").exists() else {}
        found.append(
            {
                "run_id": job["run_id"],
                "folder": str(job_file.parent),
                "status": job.get("status"),
                "nodes": job["nodes"],
                "seconds": _seconds(job),
                "slurm_job_id": job.get("slurm_job_id"),
                # the time limit the run was given: its spec as the launch command priced it
                "time_limit_minutes": spec.get("run", {}).get("resources", {}).get("runtime"),
                "stall": job.get("stall"),
                "stall_bound": job.get("stall_bound"),
                "valid_for_scaling": (job.get("fabric") or {}).get("valid_for_scaling"),
            }
        )
    return sorted(found, key=lambda r: r["run_id"])


def slurm_jobs(workdir: Path, since: str) -> list[dict[str, str]]:
    """The jobs submitted from the rehearsal's folder since `since` (sacct's -S), as Slurm's accounting
    holds them."""
    lines = subprocess.run(
        ["sacct", "-a", "-n", "-X", "-P", "-S", since, "-o", "JobID,JobName,NNodes,Timelimit,State,WorkDir"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    jobs = []
    own = workdir.resolve()
    for line in lines:
        job_id, name, nodes, limit, state, where = line.split("|")
        if where and Path(where).resolve().is_relative_to(own):
            jobs.append({"id": job_id, "name": name, "nodes": nodes, "time_limit": limit, "state": state})
    return jobs


def selections(results: Path, only: str | None = None) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for dataset in [only] if only else PUBLISHED_SELECTION:
        path = results / "selection" / f"{dataset}.json"
        found[dataset] = _json(path)["selected"]["prompts"] if path.exists() else None
    return found


def verdict(results: Path) -> list[dict[str, str]]:
    path = results / "tables" / "reproduction.csv"
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def published_procedure_node_hours(only: str | None = None) -> float:
    """What the published procedure costs at its own timings: every sweep point of the grid it ran
    (the sweep's points all run, the one over memory included) and the 18 scaling runs, 20 steps each;
    `only`: one dataset's part."""
    datasets = [only] if only else list(PUBLISHED_SELECTION)
    keys = {(dataset, 1, prompts) for dataset in datasets for prompts in PUBLISHED_SWEEPS[dataset]}
    for dataset in datasets:
        per_node = PUBLISHED_SELECTION[dataset]
        keys |= {(dataset, n, per_node * n) for n in SCALING_NODES}
        keys |= {(dataset, n, per_node * 4) for n in SCALING_NODES}
    total = 0.0
    for key in keys:
        step = sum(profile_of(key))
        total += key[1] * (startup_seconds(key, spread=0.0) + 20 * step + WARMUP_EXTRA_S) / 3600
    return total


def node_hours(found: list[dict[str, Any]], factor: float) -> float:
    """Node-hours the runs spent, done and failed, on LUMI's clock (launcher start to end x nodes x factor)."""
    return sum(r["nodes"] * (r["seconds"] or 0.0) for r in found) * factor / 3600


def scaled(seconds: float | None, factor: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    lumi = seconds * factor
    return f"{seconds:.1f} s ({lumi / 60:.1f} min at LUMI's scale)"
