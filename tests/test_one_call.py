"""One `snakemake` call with a study file finishes the study, or exits non-zero naming what is left
(#61). Replayed as a new user met it: a finished study in the clone (the demo's place), a study of
their own whose first call fails in a run, the study changed (another model folder), the same call
again. Before, that call ran the first sweep point before the preflight for the new model, stopped at
a checkpoint with "N of N steps done" and exit 0, the second sweep point, the selection, the scaling
runs and the bundle never made (snakemake#4166: rules/runs.smk says how the rules avoid it).

The stand-in trainer (tests/standin_trainer.py) in place of verl: what is tested is Snakemake's plan
across calls, not verl; production runs verl's main_ppo, which the local study's tests run."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from rlvr_scaling.leftover_jobs import exit_if_work_left, leftover_counts, leftover_message, leftover_reasons

from .workflow_helpers import STANDIN, assert_no_run_processes, snakemake, study_status

SMALL = """
only_datasets: [gsm8k]
overrides:
  datasets.gsm8k.sweep: [2, 4]
  scaling.weak_nodes: [1]
  scaling.strong_nodes: [1]
  scaling.strong_reference_nodes: 1
"""

OWN = """
site: local
study: {{name: own-one-call, reference: null}}
model: {{name: my-model, source: local, path: {model}, max_context: 1024}}
"""


def _dry_run(workdir: Path, study: Path) -> str:
    return snakemake(workdir, "-n", "--cores", "2", "--configfile", str(study)).stdout


@pytest.mark.verl  # the workflow's preflight composes verl's configuration
@pytest.mark.standin
def test_a_failed_call_then_a_changed_model_finishes_the_study_in_the_next_call(workdir: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.yaml"
    first.write_text(SMALL)
    snakemake(workdir, "--cores", "2", "--configfile", str(first), env=STANDIN)
    results = workdir / "results"
    models = {}
    for name in ("model-a", "model-b"):
        models[name] = tmp_path / name
        [tiny] = (results / "models" / "local").iterdir()  # the first study's: one model so far
        shutil.copytree(tiny, models[name])
        (models[name] / "rlvr_manifest.json").unlink()
    own = tmp_path / "own.yaml"
    own.write_text(OWN.format(model=models["model-a"]) + SMALL)
    # A run that fails inside the trainer: the stand-in cannot read its step time.
    unreadable_step = {**STANDIN, "RLVR_STANDIN_STEP_SECONDS": "x"}
    failed = snakemake(workdir, "--cores", "2", "--configfile", str(own), env=unreadable_step, check=False)
    assert failed.returncode != 0 and "Error in rule run" in failed.stdout + failed.stderr
    own.write_text(OWN.format(model=models["model-b"]) + SMALL)
    planned = _dry_run(workdir, own)
    # The whole chain is planned from the start, the model made again and the preflight redone for it.
    for rule in ("rule model:", "checkpoint preflight:", "rule run:", "checkpoint sweep_step:", "rule bundle:"):
        assert rule in planned, (rule, planned[-3000:])
    done = snakemake(workdir, "--cores", "2", "--configfile", str(own), env=STANDIN)
    log = done.stdout + done.stderr
    assert "this call ended with" not in log
    # The preflight for the new model passed before any run of this study started.
    preflight_done = (results / "preflight" / "local.json").stat().st_mtime
    own_runs = [
        d
        for d in (results / "runs").iterdir()
        if json.loads((d / "spec.json").read_text())["study"]["study"]["name"] == "own-one-call"
    ]
    assert len(own_runs) == 2, own_runs  # the two sweep points; the scaling runs are the selected one
    for run in own_runs:
        # job.json's start is to the second; the preflight takes about 10 s.
        started = datetime.fromisoformat(json.loads((run / "job.json").read_text())["start"]).timestamp()
        assert started >= int(preflight_done), (run.name, started, preflight_done)
    assert list((results / "bundle" / "own-one-call-local").glob("*.tar.gz"))
    status = study_status(workdir, own)
    table = status.split("\n\nRuns:")[0]
    assert "missing" in table.splitlines()[2]  # the header names the column
    for line in table.splitlines()[3:]:
        cells = line.split()
        assert len(cells) == 2 and cells[1].isdigit(), (line, status)  # each stage: complete, nothing else
    assert "Nothing to be done" in _dry_run(workdir, own)
    assert_no_run_processes()


DRY_RUN = """Building DAG of jobs...
Job stats:
job           count
----------  -------
run               1
summary           2
all               1
total             4

[Sun Dec  6 08:44:08 2026]
"""


def test_a_dry_runs_job_table_is_what_is_left_and_nothing_to_do_is_nothing() -> None:
    assert leftover_counts(DRY_RUN) == {"run": 1, "summary": 2}
    assert leftover_counts("Building DAG of jobs...\nNothing to be done (all requested files are present).") == {}
    message = leftover_message({"run": 1, "summary": 2}, ["snakemake", "--cores", "2"])
    assert "3 job(s)" in message and "run 1, summary 2" in message and "snakemake --cores 2" in message


# As Snakemake 9.27 prints a dry run's jobs (cut to the lines read): a rule with a message (the
# workflow's dataset and model rules) is headed `Job N: <message>` and says `Reason:`.
DRY_RUN_JOBS = """Job stats:
job        count
-------  -------
dataset        2
figures        1
report         1
all            1
total          5


[Mon Dec  7 02:39:20 2026]
Job 7: rule dataset: gsm8k into results/data/local/gsm8k, a local job
Reason: Missing output files: results/data/local/gsm8k/train.parquet

[Mon Dec  7 02:39:20 2026]
Job 8: rule dataset: dapo_math into results/data/local/dapo_math, a local job
Reason: Code has changed since last execution

[Mon Dec  7 02:39:20 2026]
localrule figures:
    input: results/index/gsm8k.json, /repo/workflow/rlvr_scaling/analysis/shown/figures.py
    output: results/figures
    jobid: 18
    reason: Updated input files: /repo/workflow/rlvr_scaling/analysis/shown/figures.py
    resources: tmpdir=/tmp
Shell command: python -m rlvr_scaling figures

[Mon Dec  7 02:39:20 2026]
localrule report:
    input: results/tables, results/figures
    output: results/report/study.md
    jobid: 2
    reason: Input files updated by another job: results/figures
    resources: tmpdir=/tmp

[Mon Dec  7 02:39:20 2026]
localrule all:
    input: results/report/study.md
    jobid: 0
    reason: Input files updated by another job: results/report/study.md
"""


def test_what_is_left_is_told_with_snakemakes_reasons_for_each_rule() -> None:
    reasons = leftover_reasons(DRY_RUN_JOBS)
    assert reasons == {
        "dataset": [
            "Missing output files: results/data/local/gsm8k/train.parquet",
            "Code has changed since last execution",
        ],
        "figures": ["Updated input files: /repo/workflow/rlvr_scaling/analysis/shown/figures.py"],
        "report": ["Input files updated by another job: results/figures"],
        "all": ["Input files updated by another job: results/report/study.md"],
    }
    message = leftover_message(leftover_counts(DRY_RUN_JOBS), ["snakemake"], reasons)
    lines = message.splitlines()
    assert "4 job(s)" in lines[0] and "(dataset 2, figures 1, report 1)" in lines[0]
    # The target that only gathers is not a job left.
    assert lines[2:] == [
        f"  dataset: {reasons['dataset'][0]}",
        f"  dataset: {reasons['dataset'][1]}",
        f"  figures: {reasons['figures'][0]}",
        f"  report: {reasons['report'][0]}",
    ]
    # A reason past the cap is cut and says so; at most three different reasons a rule.
    long = leftover_message({"figures": 1}, ["snakemake"], {"figures": ["x" * 401]})
    assert long.endswith("  figures: " + "x" * 400 + " ...")
    exact = leftover_message({"figures": 1}, ["snakemake"], {"figures": ["x" * 400]})
    assert exact.endswith("  figures: " + "x" * 400)
    four = leftover_message({"figures": 4}, ["snakemake"], {"figures": ["a", "b", "c", "d"]})
    assert four.splitlines()[2:] == ["  figures: a", "  figures: b", "  figures: c"]


def test_calls_that_make_nothing_are_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dry_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run was started for a call that makes nothing")

    monkeypatch.setattr(subprocess, "run", no_dry_run)
    for argv in (["snakemake", "-n"], ["snakemake", "--report", "r.html"], ["snakemake", "--unlock"]):
        exit_if_work_left(argv)
