"""The local engine end to end: the real verl trainer on CPU, through Snakemake, with its faults."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from rlvr_scaling.metrics_file import REQUIRED_STEP_KEYS, read_metrics_jsonl

from .conftest import REPO
from .workflow_helpers import SNAKEMAKE, run_processes, snakemake, token_processes

pytestmark = pytest.mark.slow
REDUCED = str(REPO / "tests" / "data" / "reduced.yaml")
RUN_FILES = ("spec.json", "command.sh", "metrics.jsonl", "console.log", "job.json")


def check_run_directory(run_dir: Path, steps: int) -> None:
    for name in RUN_FILES:
        assert (run_dir / name).is_file(), f"{run_dir.name} lacks {name}"
    records, problems = read_metrics_jsonl(run_dir / "metrics.jsonl")
    assert not problems
    assert [r["step"] for r in records] == list(range(1, steps + 1))
    for record in records:
        for key in REQUIRED_STEP_KEYS:
            value = record[key]
            assert isinstance(value, int | float) and math.isfinite(value) and value > 0, (run_dir.name, key, value)
    job = json.loads((run_dir / "job.json").read_text())
    assert job["status"] == "succeeded" and job["exit_status"] == 0
    assert job["versions"]["verl"] == "0.9.1" and job["versions"]["torch"].startswith("2.13.0")
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["run"]["run_id"] == run_dir.name


def test_reduced_local_study_end_to_end(workdir: Path) -> None:
    snakemake(workdir, "--cores", "2", "--configfile", REDUCED)
    runs = sorted(p for p in (workdir / "results" / "runs").iterdir())
    # sweep point = weak 1 node; weak 2 nodes = strong reference; strong 1 node
    assert len(runs) == 3
    for run_dir in runs:
        check_run_directory(run_dir, steps=3)
    two_node = next(r for r in runs if "-n2-" in r.name)
    assert json.loads((two_node / "job.json").read_text())["workers"] == 2
    assert run_processes() == []

    results = workdir / "results"
    selection = json.loads((results / "selection" / "gsm8k.json").read_text())
    assert selection["selected"]["prompts"] == 2
    with open(results / "tables" / "weak_scaling.csv") as handle:
        weak = list(csv.DictReader(handle))
    assert [int(r["nodes"]) for r in weak] == [1, 2] and float(weak[0]["efficiency"]) == 1.0
    with open(results / "tables" / "strong_scaling.csv") as handle:
        strong = list(csv.DictReader(handle))
    assert [float(r["speedup"]) for r in strong if r["nodes"] == "2"] == [1.0]
    for name in ("figure1_step_phases", "figure2_weak_efficiency", "figure4_strong_speedup"):
        assert (results / "figures" / f"{name}.png").stat().st_size > 1000
    report = (results / "report" / "study.md").read_text()
    assert "weak_scaling" in report.lower() or "Weak scaling" in report
    assert list((results / "bundle").glob("*.tar.gz"))

    # The Snakemake HTML report carries every table and figure.
    snakemake(workdir, "--cores", "2", "--configfile", REDUCED, "--report", "report.html")
    html = (workdir / "report.html").read_text(errors="replace")
    for name in ("weak_scaling.md", "strong_scaling.md", "table1.md", "figure2_weak_efficiency.png", "study.md"):
        assert name in html, name

    # Nothing is redone when nothing changed; a redone run brings only what depends on it.
    assert "Nothing to be done" in snakemake(workdir, "-n", "--cores", "2", "--configfile", REDUCED).stdout
    redo = f"results/runs/{runs[-1].name}"
    plan = snakemake(workdir, "-n", "--cores", "2", "--configfile", REDUCED, "--forcerun", redo).stdout
    assert plan.count("rule run:") == 1 and redo in plan
    assert "rule selection" not in plan


def _worker_pids() -> list[int]:
    return [pid for pid, command in token_processes() if "WorkerDict" in command]


def test_a_crashed_run_keeps_its_evidence_and_is_redone_alone(workdir: Path, tmp_path: Path) -> None:
    single = tmp_path / "single.yaml"
    single.write_text(
        "only_datasets: [gsm8k]\noverrides:\n  selection.gsm8k: 2\n  algorithm.steps: 40\n"
        "  scaling.weak_nodes: [1]\n  scaling.strong_nodes: [1]\n  scaling.strong_reference_nodes: 1\n"
    )
    process = subprocess.Popen(
        [SNAKEMAKE, "--cores", "2", "--configfile", str(single)],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    runs = workdir / "results" / "runs"
    deadline = time.monotonic() + 900
    killed = []
    while time.monotonic() < deadline and not killed:
        logs = list(runs.glob(".staging-*/console.log")) if runs.exists() else []
        if logs and "step:2 " in logs[0].read_text(errors="replace"):
            killed = _worker_pids()
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
        time.sleep(1)
    assert killed, "the run never reached step 2"
    output, _ = process.communicate(timeout=900)
    assert process.returncode != 0
    assert "Error in rule run" in output
    failed = list((workdir / "results" / "failed").glob("*/*"))
    assert len(failed) == 1
    job = json.loads((failed[0] / "job.json").read_text())
    assert job["status"] == "failed" and job["exit_status"] != 0
    assert (failed[0] / "console.log").stat().st_size > 0
    assert not runs.exists() or not any(runs.iterdir()), "a failed run must leave nothing under results/runs"
    assert run_processes() == []
    plan = snakemake(workdir, "-n", "--cores", "2", "--configfile", str(single)).stdout
    assert plan.count("rule run:") == 1


def test_a_changed_sweep_result_reruns_the_selection_and_only_the_affected_scaling_runs(
    workdir: Path, tmp_path: Path
) -> None:
    study = tmp_path / "sweep.yaml"
    study.write_text(
        "only_datasets: [gsm8k]\noverrides:\n  datasets.gsm8k.sweep: [2, 4]\n  algorithm.steps: 3\n"
        "  scaling.weak_nodes: [1, 2]\n  scaling.strong_nodes: [1]\n  scaling.strong_reference_nodes: 1\n"
    )
    snakemake(workdir, "--cores", "2", "--configfile", str(study))
    results = workdir / "results"
    runs_before = {p.name: (p / "job.json").stat().st_mtime_ns for p in (results / "runs").iterdir()}
    assert len(runs_before) == 3  # two sweep points (one is also weak n1 and strong n1), weak n2
    selection = json.loads((results / "selection" / "gsm8k.json").read_text())
    first = selection["selected"]["prompts"]
    assert f"gsm8k-n2-p{2 * first}-" in " ".join(runs_before)
    other = next(p for p in selection["points"] if p["prompts"] != first)
    assert other["eligible"], other

    # The unselected point now measures ten times the best throughput: a changed sweep result.
    summary_path = results / "summaries" / f"{other['run_id']}.json"
    summary = json.loads(summary_path.read_text())
    summary["summary"]["throughput_per_gpu"]["mean"] = 10 * selection["selected"]["throughput_per_gpu"]
    summary_path.write_text(json.dumps(summary))

    rerun = snakemake(workdir, "--cores", "2", "--configfile", str(study))
    log = rerun.stdout + rerun.stderr
    assert json.loads((results / "selection" / "gsm8k.json").read_text())["selected"]["prompts"] == other["prompts"]
    assert log.count("rule run:") == 1, log[-3000:]
    runs_after = {p.name: p for p in (results / "runs").iterdir()}
    new = sorted(set(runs_after) - set(runs_before))
    assert len(new) == 1 and new[0].startswith(f"gsm8k-n2-p{2 * other['prompts']}-"), new
    check_run_directory(runs_after[new[0]], steps=3)
    for name, mtime in runs_before.items():  # the sweep runs and the old weak run are kept untouched
        assert (results / "runs" / name / "job.json").stat().st_mtime_ns == mtime, name
    with open(results / "tables" / "weak_scaling.csv") as handle:
        weak_runs = {row["run_id"] for row in csv.DictReader(handle)}
    assert weak_runs == {other["run_id"], new[0]}, weak_runs
    assert run_processes() == []
