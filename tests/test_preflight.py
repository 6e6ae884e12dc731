"""The preflight's checks on this machine's engine (the local site: this Python, the CPU engine)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from rlvr_scaling.analysis.across_runs.selection_io import read_selections
from rlvr_scaling.execution.preflight.checks import check, engine_modules, preflight_nodes, runs_to_check
from rlvr_scaling.execution.preflight.engine_smoke import run_smoke, smoke_run
from rlvr_scaling.plan_view import memory_record
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan

from .conftest import PYTHON
from .study_edits import edited
from .workflow_helpers import STANDIN, assert_no_run_processes, run_processes, snakemake

pytestmark = pytest.mark.verl


def _inputs(root: Path, study) -> None:
    for dataset in study.datasets:
        folder = root / "results" / "data" / study.site_name / dataset
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text("{}")
    model = root / "results" / "models" / study.site_name / study.model_folder
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")


@pytest.mark.heavy
def test_the_local_engine_passes_and_every_possible_run_is_composed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No engine smoke: the inputs here are empty files (the smoke with the real trainer runs in the
    # shared local study, tests/test_local_study.py, and inside the image in tests/test_apptainer.py).
    # The site passes a secret on from the job's environment: the published record must not hold it.
    monkeypatch.setenv("RLVR_TEST_API_TOKEN", "s3cr3t-value-of-the-job")
    study = edited(
        load_study(sets=["preflight.engine_smoke_steps=0"]),
        site={"environment": {"RLVR_TEST_API_TOKEN": "${RLVR_TEST_API_TOKEN}"}},
    )
    _inputs(tmp_path, study)
    runs, unplannable = runs_to_check(study, tmp_path, read_selections(tmp_path, study))
    assert unplannable == []
    # Both sweep points of each dataset as the possible selection: sweep runs and all scaling runs.
    assert len(runs) == len({r.run_id for r in runs}) >= 8
    record = check(study, runs, tmp_path)
    assert record["problems"] == [], record["problems"]
    engine = record["engine"]
    assert engine["versions"]["verl"] == "0.9.1" and engine["versions"]["ray"] == "2.60.0"
    assert set(engine["composition"]) == {r.run_id for r in runs}
    assert set(engine["modules"]) == set(engine_modules(study)) and "rlvr_scaling.engines.cpu" in engine["modules"]
    assert engine["environment"]["VERL_PLATFORM"] == "cpu"
    # The engine saw the secret's value; the record holds its reference only, as the runs' do.
    assert engine["environment"]["RLVR_TEST_API_TOKEN"] == "${RLVR_TEST_API_TOKEN}"
    assert engine["environment_not_as_set"] == []
    assert "s3cr3t-value-of-the-job" not in json.dumps(record)
    assert preflight_nodes(study, runs) == 1  # local launcher: no Ray cluster across Slurm nodes
    assert record["engine_smoke"] == {"ran": False, "reason": "preflight.engine_smoke_steps is 0"}
    json.dumps(record)


@pytest.mark.heavy
def test_every_problem_is_named_at_once(tmp_path: Path) -> None:
    # No data, no model, an engine this environment lacks, and a run verl's config rejects.
    study = load_study(sets=["parallel.rollout.engine=vllm"])
    runs, _ = runs_to_check(study, tmp_path, read_selections(tmp_path, study))
    broken = dataclasses.replace(runs[0], verl_args=[*runs[0].verl_args, "actor_rollout_ref.rollout.no_such_key=1"])
    # One run verl accepts beside the broken one: only the broken one is named.
    record = check(study, [broken, runs[1]], tmp_path)
    problems = "\n".join(record["problems"])
    assert "dataset gsm8k" in problems and "dataset dapo_math" in problems and "model:" in problems
    assert "module vllm does not import" in problems
    assert f"run {broken.run_id}: verl rejects its arguments" in problems and "no_such_key" in problems
    assert sum("verl rejects" in p for p in record["problems"]) == 1
    assert record["engine_smoke"] == {"ran": False, "reason": "an earlier check failed"}


def _training_dp(study, run) -> int:
    """Megatron's data-parallel size, from the study's parallel settings: world size / (TP x PP)."""
    training = study.config.parallel.training
    return run.nodes * run.gpus_per_node // (training.tensor_parallel * training.pipeline_parallel)


def _peak(study, run, root: Path) -> float:
    """A run's memory peak per GPU as `plan --json` records its budget."""
    budget = memory_record(study, run, root)
    return max(budget["generation_peak_gb"], budget["training_peak_gb"])


def test_the_smoke_takes_the_hardest_run_of_the_preflights_nodes_cut_to_its_steps(tmp_path: Path) -> None:
    study = load_study(site="lumi", sets=["selection.gsm8k=100", "selection.dapo_math=10"])
    plan = [r for r in build_plan(study, selection={"gsm8k": 100, "dapo_math": 10}, root=tmp_path) if r.verl_args]
    nodes = preflight_nodes(study, plan)
    assert nodes == 2  # a Slurm site with multi-node runs
    smoke = smoke_run(study, plan, 2, tmp_path, max_nodes=nodes)
    assert smoke is not None
    run = smoke.run
    # By hand, from each candidate's memory budget record: of the runs the two nodes hold, those of
    # DP above one, and of those the highest peak; of equal peaks, the fewest prompts (cheapest smoke).
    candidates = [r for r in plan if r.nodes <= nodes]
    replicated = [r for r in candidates if _training_dp(study, r) > 1]
    peaks = {r.run_id: _peak(study, r, tmp_path) for r in candidates}
    top = max(peaks[r.run_id] for r in replicated)
    expected = min((r for r in replicated if peaks[r.run_id] == top), key=lambda r: r.prompts)
    assert smoke.of_run == expected.run_id
    # The published workloads: DAPO's (8192-token responses, vLLM's 0.6 share, offload and recompute) on
    # two nodes, Megatron TP 8 over 16 GCDs: DP 2.
    assert run.dataset == "dapo_math" and run.nodes == 2 and run.max_response_length == 8192 and run.prompts == 20
    assert _training_dp(study, run) == 2 and "trainer.nnodes=2" in run.verl_args
    assert f"training peak {top:g} GB of the cap 67.35 GB" in smoke.because and "Megatron DP 2" in smoke.because
    # A one-node run (DP 1, its optimizer unsharded) peaks higher: the record names it, passed over.
    overall = max(candidates, key=lambda r: (peaks[r.run_id], r.run_id))
    assert peaks[overall.run_id] > top and _training_dp(study, overall) == 1
    assert f"peaks higher, {peaks[overall.run_id]:g} GB, at DP 1" in smoke.because
    # Cut to its steps; its estimate the run's start-up on two nodes and two of its steps.
    assert "trainer.total_training_steps=2" in run.verl_args and "trainer.total_epochs=2" in run.verl_args
    assert not any(a.startswith("trainer.total_training_steps=20") for a in run.verl_args)
    assert run.run_id.endswith("-engine-smoke") and f"trainer.experiment_name={run.run_id}" in run.verl_args
    estimate = study.config.estimate
    startup = estimate.startup_minutes + estimate.startup_minutes_per_doubling  # one doubling: two nodes
    assert smoke.minutes == pytest.approx(startup + 2 * expected.estimate["step_seconds"] / 60, abs=0.01)
    # Every other argument is the run's own: its engines, parallelism, model, data.
    assert set(expected.verl_args) - set(run.verl_args) == {
        a
        for a in expected.verl_args
        if a.startswith(("trainer.total_training_steps=", "trainer.total_epochs=", "trainer.experiment_name="))
    }
    assert smoke_run(study, plan, 0, tmp_path, max_nodes=2) is None
    # Within one node (a preflight outside Slurm): no run of DP above one, the highest peak.
    one = smoke_run(study, plan, 2, tmp_path, max_nodes=1)
    assert one is not None and one.run.nodes == 1 and one.run.dataset == "dapo_math"
    assert "no run of at most 1 node(s) has DP above 1" in one.because
    assert _peak(study, one.run, tmp_path) == max(peaks[r.run_id] for r in candidates if r.nodes == 1)


def test_without_a_memory_budget_the_smoke_takes_the_smallest_one_node_run(tmp_path: Path) -> None:
    # The local site runs the CPU engine: no GPU memory to budget, the runs cannot be ranked by it.
    study = load_study()
    plan = [r for r in build_plan(study, selection={"gsm8k": 2, "dapo_math": 2}, root=tmp_path) if r.verl_args]
    assert memory_record(study, plan[0], tmp_path)["computed"] is False
    smoke = smoke_run(study, plan, 2, tmp_path, max_nodes=2)
    one_node = [r for r in plan if r.nodes == 1]
    expected = min(one_node, key=lambda r: (r.max_response_length, r.prompts, r.run_id))
    assert smoke is not None and smoke.of_run == expected.run_id and smoke.run.nodes == 1
    assert "smallest one-node run" in smoke.because and "runs the CPU engine" in smoke.because
    # A study of multi-node runs only: its smallest run that fits the preflight's two nodes.
    multi = [r for r in plan if r.nodes > 1]
    assert smoke_run(study, multi, 2, tmp_path) is None
    two = smoke_run(study, multi, 2, tmp_path, max_nodes=2)
    assert two is not None and two.run.nodes == 2 and "trainer.nnodes=2" in two.run.verl_args
    assert two.run.max_response_length == min(r.max_response_length for r in multi)
    # A GPU site whose model has no shape to budget keeps the smallest one-node run too.
    unknown = load_study(site="lumi", sets=["selection.gsm8k=100", "selection.dapo_math=10", "model.name=nobody/none"])
    runs = [r for r in build_plan(unknown, root=tmp_path) if r.verl_args]
    blind = smoke_run(unknown, runs, 2, tmp_path, max_nodes=2)
    assert blind is not None and blind.run.dataset == "gsm8k" and blind.run.nodes == 1 and blind.run.prompts == 100
    assert "no config.json for nobody/none" in blind.because


@pytest.mark.heavy
def test_a_changed_study_reruns_the_preflight(workdir: Path, tmp_path: Path) -> None:
    # Without the engine smoke (a trainer start): tested on its own below and in the Apptainer tests.
    # One dataset: which steps rerun is the point here, not how many runs the preflight composes.
    study = tmp_path / "study.yaml"
    study.write_text("only_datasets: [gsm8k]\noverrides:\n  preflight.engine_smoke_steps: 0\n")
    changed_study = tmp_path / "changed.yaml"
    changed_study.write_text(study.read_text() + "  datasets.gsm8k.memory.token_budget: 4096\n")
    snakemake(workdir, "--cores", "2", "results/preflight/local.json", "--configfile", str(study))
    unchanged = snakemake(workdir, "-n", "--cores", "2", "results/preflight/local.json", "--configfile", str(study))
    assert "Nothing to be done" in unchanged.stdout
    changed = snakemake(
        workdir, "-n", "--cores", "2", "results/preflight/local.json", "--configfile", str(changed_study)
    )
    assert "checkpoint preflight:" in changed.stdout and "rule dataset:" not in changed.stdout


@pytest.mark.standin
def test_a_failed_smoke_names_the_engines_and_the_error_and_stops_the_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in trainer (tests/standin_trainer.py) as the engine: it reads trainer.nnodes as verl
    does, and a run without it makes it fail at once with a KeyError, as a broken engine would. The
    smoke's success, with the real trainer, is in tests/test_local_study.py and tests/test_apptainer.py."""
    for key, value in STANDIN.items():
        monkeypatch.setenv(key, value)
    # The local site runs no smoke (its first run proves as much); a site that does, with its engine.
    study = edited(load_study(sets=["preflight.engine_smoke_steps=2"]), site={"engine_smoke": True})
    plan = [r for r in build_plan(study, selection={"gsm8k": 2, "dapo_math": 2}, root=tmp_path) if r.verl_args]
    broken = [
        dataclasses.replace(r, verl_args=[a for a in r.verl_args if not a.startswith("trainer.nnodes=")]) for r in plan
    ]
    record, problems = run_smoke(study, broken, tmp_path, dict(os.environ), timeout_s=120)
    assert record["ran"] is True and record["status"] == "failed" and record["step_seconds"] == []
    assert "KeyError: 'trainer.nnodes'" in record["error"]
    [problem] = problems
    assert problem.startswith("the engine smoke (the CPU engine (tests.standin_trainer), gsm8k on 1 node(s)) failed")
    assert "0 of 2 steps" in problem and "KeyError" in problem


@pytest.mark.standin
def test_a_passing_smoke_records_its_steps_in_its_own_folder_and_nothing_in_the_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in trainer logs verl's JSONL as verl does: enough to check what the smoke records and
    where, in a folder of its own (the real trainer's smoke: tests/test_local_study.py, and
    tests/test_apptainer.py inside the image, both build ways)."""
    for key, value in STANDIN.items():
        monkeypatch.setenv(key, value)
    study = edited(load_study(sets=["preflight.engine_smoke_steps=2"]), site={"engine_smoke": True})
    plan = [r for r in build_plan(study, selection={"gsm8k": 2, "dapo_math": 2}, root=tmp_path) if r.verl_args]
    record, problems = run_smoke(study, plan, tmp_path, dict(os.environ), timeout_s=120)
    assert problems == [] and record["ran"] is True and record["status"] == "succeeded"
    assert (
        record["steps_asked"] == 2 and len(record["step_seconds"]) == 2 and all(t > 0 for t in record["step_seconds"])
    )
    # The CPU engine has no memory budget: the smallest one-node run (config/sites/local.yaml):
    # gsm8k's responses (16) are shorter than dapo_math's (32); its fewest prompts is its first sweep
    # point, 2.
    smallest = min((r for r in plan if r.nodes == 1), key=lambda r: (r.max_response_length, r.prompts, r.run_id))
    assert record["of_run"] == smallest.run_id and smallest.dataset == "gsm8k" and record["prompts"] == 2
    assert record["chosen_because"].startswith("the smallest one-node run") and "CPU engine" in record["chosen_because"]
    folder = tmp_path / "results" / "preflight" / "local-engine-smoke"
    assert [json.loads(line)["step"] for line in (folder / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert "trainer.total_training_steps=2" in (folder / "command.sh").read_text()
    assert not (tmp_path / "results" / "runs").exists() or not any((tmp_path / "results" / "runs").iterdir())


# A preflight in miniature: the engine smoke of the plan's smallest run, long enough to be killed.
SMOKE = """
import dataclasses, os, sys
from pathlib import Path
from rlvr_scaling.execution.preflight.engine_smoke import run_smoke
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan

root = Path(sys.argv[1])
study = load_study(sets=["preflight.engine_smoke_steps=10"])
study = dataclasses.replace(study, site=type(study.site).from_dict({**study.site.to_dict(), "engine_smoke": True}))
plan = [r for r in build_plan(study, selection={"gsm8k": 2, "dapo_math": 2}, root=root) if r.verl_args]
run_smoke(study, plan, root, dict(os.environ), timeout_s=600)
"""


@pytest.mark.standin
def test_a_preflight_killed_during_its_smoke_leaves_no_process_of_it(tmp_path: Path) -> None:
    """SIGKILL to the preflight's whole process group while its smoke runs: the trainer and its
    workers, in sessions of their own as verl's are, end too (the smoke's guard, as a run's). The real
    trainer under a killed workflow: tests/test_local_study.py."""
    env = {**os.environ, **STANDIN, "RLVR_STANDIN_STEP_SECONDS": "5"}
    preflight = subprocess.Popen([PYTHON, "-c", SMOKE, str(tmp_path)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not any("WorkerDict" in command for command in run_processes()):
            assert preflight.poll() is None and time.monotonic() < deadline, "the smoke's workers never started"
            time.sleep(0.2)
    finally:
        os.killpg(preflight.pid, signal.SIGKILL)
        preflight.wait()
    assert_no_run_processes(grace_s=30)


@pytest.mark.heavy
def test_a_hang_in_the_collective_ends_within_its_limit_in_one_line_naming_the_stage(tmp_path: Path) -> None:
    """The probe's time limit firing on a real hang: the real probe on its own Ray (the local site's two
    groups of workers), one rank planted to never join the third new group's first all-reduce. On a
    Slurm site the same probe is a driver of the runs' Ray cluster (tests/test_slurm.py)."""
    from rlvr_scaling.engines.collective_probe import PLANT_HANG_VAR
    from rlvr_scaling.execution.preflight.collective import run_collective
    from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, end_processes, new_token

    study = load_study()
    limit = 20.0
    fabric = dataclasses.replace(
        study.site.fabric, collective_timeout_seconds=limit, collective_megabytes=1, collective_iterations=2
    )
    study = dataclasses.replace(study, site=dataclasses.replace(study.site, fabric=fabric))
    (tmp_path / "results").mkdir()
    token = new_token()
    env = {**os.environ, TOKEN_VAR: token, PLANT_HANG_VAR: "1:3"}
    try:
        record, problems = run_collective(
            study, tmp_path, env, tmp_path / "collective", ["group-0", "group-1"], local_groups=True
        )
    finally:
        end_processes(token)
    assert record["finished"] is False
    # The record says what it was judged against: the local site's groups and its absolute floor.
    assert (record["new_groups"], record["iterations"], record["floor_gb_per_s"]) == (8, 2, 0.01)
    assert record["ranks_at"] == {
        "0": (7, "the first all-reduce on new process group 3 of 8"),
        "1": (7, "the first all-reduce on new process group 3 of 8"),
    }
    # Both ranks noted the third group's first all-reduce: rank 1 never entered it, rank 0 waits in it.
    assert problems == [
        "the all-reduce across nodes group-0, group-1 on 8 new process group(s) did not finish within 20 s "
        "(fabric.collective_timeout_seconds): rank(s) 0, 1 stopped at the first all-reduce on new process group "
        f"3 of 8; the ranks' logs are in {tmp_path / 'collective'}"
    ]
    # Stopped by its limit, not sooner and not much later (Ray's own stop is outside the figure).
    assert limit <= record["seconds_total"] < limit + 10, record
