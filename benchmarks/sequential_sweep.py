"""Runs the local study's one-node GSM8K sweep as the study ran it (selection_rule.sweep_order:
sequential, the real verl trainer on CPU) and prints the points it ran, where it stopped and why, and
the node-hours it saved: priced from the points measured (as the report prices them) and, with
--measure-skipped, measured by running the skipped points too (a grid sweep in the same folder).

    .venv/bin/python benchmarks/sequential_sweep.py [--sweep 2,4,8,16,32] [--workdir DIR] [--measure-skipped]

Each point is one local run (about a minute at these sizes); nothing else of the study runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.analysis.cost.budget import measured_node_hours
from rlvr_scaling.analysis.cost.sweep_savings import point_node_hours
from rlvr_scaling.measured.models import RunSummary

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TARGET = "results/selection/gsm8k.json"


def sweep(workdir: Path, prompts: list[int], order: str) -> dict:
    extra = workdir / f"sweep-{order}.yaml"
    extra.write_text(
        "only_datasets: [gsm8k]\noverrides:\n"
        f"  datasets.gsm8k.sweep: {json.dumps(prompts)}\n  selection_rule.sweep_order: {order}\n"
    )
    command = [SNAKEMAKE, TARGET, "--cores", "2", "--configfile", str(extra)]
    # One call: it finishes the study or exits 1 naming what is left (rlvr_scaling.leftover_jobs).
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"snakemake failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads((workdir / TARGET).read_text())


def node_hours(workdir: Path, run_id: str) -> float:
    measured = measured_node_hours(paths.run_dir(workdir, run_id))
    assert measured is not None, run_id
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", default="2,4,8,16,32")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--measure-skipped", action="store_true")
    args = parser.parse_args()
    prompts = [int(p) for p in args.sweep.split(",")]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sequential-sweep-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / "Snakefile").exists():
        paths.link_workflow(workdir)
    selection = sweep(workdir, prompts, "sequential")
    for point in selection["points"]:
        cost = node_hours(workdir, point["run_id"])
        print(f"ran {point['prompts']:>4} prompts: {point['throughput_per_gpu']:.4g} tokens/s/GPU, {cost:.4f} node-h")
    print(f"selection: {selection['reason']}")
    skipped = [p["prompts"] for p in selection["skipped"]]
    spent = sum(node_hours(workdir, p["run_id"]) for p in selection["points"])
    if not skipped:
        print(f"no point skipped: the sequential sweep ran all {len(prompts)} ({spent:.4f} node-hours)")
        return
    summaries = [
        RunSummary.from_json(json.loads((paths.results_dir(workdir) / "summaries" / f"{p['run_id']}.json").read_text()))
        for p in selection["points"]
    ]
    predicted = sum(point_node_hours(summaries, p) or 0.0 for p in skipped)
    print(f"skipped {skipped}: predicted saving {predicted:.4f} node-hours against {spent:.4f} spent")
    if args.measure_skipped:
        grid = sweep(workdir, prompts, "grid")
        measured = sum(node_hours(workdir, p["run_id"]) for p in grid["points"] if p["prompts"] in skipped)
        error = (predicted - measured) / measured
        print(
            f"measured saving {measured:.4f} node-hours ({measured / (spent + measured):.0%} of the grid's); "
            f"prediction {error:+.0%}"
        )
        print(f"grid selection: {grid['reason']}")
    print(f"workdir: {workdir}")


if __name__ == "__main__":
    main()
