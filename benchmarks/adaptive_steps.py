"""Runs the reduced local study (real verl on CPU, tests/data/reduced.yaml: a two-point sweep, weak and
strong scaling over 1 and 2 nodes) with the adaptive step count on, and prints where each run stopped,
what it measured, and the node-hours saved. With --compare it runs the same study with the count off
too (other run ids, the same folder), and prints the measured saving and how far each stopped run's
mean step time is from the full run's.

    .venv/bin/python benchmarks/adaptive_steps.py [--steps 20] [--min-steps 5] [--halfwidth 0.05]
        [--workdir DIR] [--compare]

About a minute and a half per run at these sizes; --compare doubles it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.analysis.cost.adaptive_report import adaptive_findings, steps_not_run_node_hours
from rlvr_scaling.analysis.cost.budget import measured_node_hours
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.measured.models import RunSummary
from rlvr_scaling.study.yaml_file import read_yaml

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
REDUCED = paths.REPO_ROOT / "tests" / "data" / "reduced.yaml"


def run_study(workdir: Path, steps: int, adaptive: dict | None) -> dict[tuple[str, int, int], RunSummary]:
    """The study's run summaries after a Snakemake run, by (series, nodes, prompts)."""
    name = "on" if adaptive else "off"
    study = workdir / f"adaptive-{name}.yaml"
    config = read_yaml(REDUCED)
    config["overrides"].update(
        {"algorithm.steps": steps, "adaptive_steps.enabled": adaptive is not None, **(adaptive or {})}
    )
    study.write_text(json.dumps(config, indent=1))  # JSON is YAML
    command = [SNAKEMAKE, "--cores", "2", "--configfile", str(study)]
    # One call: it finishes the study or exits 1 naming what is left (rlvr_scaling.leftover_jobs).
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"snakemake failed ({done.returncode}):\n{done.stderr[-3000:]}")
    summaries = {}
    index = json.loads((paths.results_dir(workdir) / "index" / "gsm8k.json").read_text())
    for entry in index["runs"]:
        summary = RunSummary.from_json(json.loads((workdir / entry["summary"]).read_text()))
        summaries[("+".join(entry["series"]), summary.nodes, summary.prompts)] = summary
    return summaries


def cost(workdir: Path, summary: RunSummary) -> float:
    measured = measured_node_hours(paths.run_dir(workdir, summary.run_id))
    assert measured is not None, summary.run_id
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="algorithm.steps (default 20: 19 measured, as the study)")
    parser.add_argument("--min-steps", type=int, default=5)
    parser.add_argument("--halfwidth", type=float, default=0.05)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--compare", action="store_true", help="also run every step, and measure the saving")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="adaptive-steps-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / "Snakefile").exists():
        paths.link_workflow(workdir)
    rule = {"min_measured_steps": args.min_steps, "relative_halfwidth": args.halfwidth}
    adaptive = run_study(workdir, args.steps, {f"adaptive_steps.{k}": v for k, v in rule.items()})
    for (series, nodes, prompts), s in sorted(adaptive.items()):
        stop = s.adaptive_stop
        where = f"stopped after step {stop['step']} (+-{stop['relative_halfwidth']:.1%})" if stop else "all steps"
        print(
            f"{series:>12} n{nodes} p{prompts}: {where}; step time {s.measured.step_time_s.mean:.3f} s; "
            f"{cost(workdir, s):.4f} node-h measured, {steps_not_run_node_hours(s):.4f} node-h not run"
        )
    for line in adaptive_findings(StudyResults([], {s.run_id: s for s in adaptive.values()}), rule):
        print(line)
    if not args.compare:
        return
    full = run_study(workdir, args.steps, None)
    # The two sweeps choose by measured throughput, so they may pick other workloads: only the runs
    # both studies made are compared.
    shared = sorted(set(adaptive) & set(full))
    for key in sorted(set(adaptive) ^ set(full)):
        print(f"{key[0]:>12} n{key[1]} p{key[2]}: made only {'with' if key in adaptive else 'without'} the count")
    spent_on = sum(cost(workdir, adaptive[key]) for key in shared)
    spent_off = sum(cost(workdir, full[key]) for key in shared)
    print(
        f"measured over the {len(shared)} runs both made: {spent_on:.4f} node-hours with the count on, "
        f"{spent_off:.4f} with every step: "
        f"saved {spent_off - spent_on:.4f} ({(spent_off - spent_on) / spent_off:.0%})"
    )
    for key in shared:
        s, reference = adaptive[key], full[key].measured.step_time_s
        shift = (s.measured.step_time_s.mean - reference.mean) / reference.mean
        inside = reference.ci95 is not None and reference.ci95[0] <= s.measured.step_time_s.mean <= reference.ci95[1]
        print(
            f"{key[0]:>12} n{key[1]} p{key[2]}: mean step time {shift:+.1%} against every step's "
            f"({'inside' if inside else 'outside'} its 95% interval)"
        )


if __name__ == "__main__":
    main()
