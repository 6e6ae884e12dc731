"""The preflight's checks on this machine's engine (the local site: this Python, the CPU engine)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rlvr_scaling.execution.preflight import check, engine_modules, preflight_nodes, runs_to_check
from rlvr_scaling.study.config import load_study

from .workflow_helpers import snakemake

pytestmark = pytest.mark.verl


def _inputs(root: Path, study) -> None:
    for dataset in study.datasets:
        folder = root / "results" / "data" / study.site_name / dataset
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text("{}")
    model = root / "results" / "models" / study.site_name
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")


def test_the_local_engine_passes_and_every_possible_run_is_composed(tmp_path: Path) -> None:
    study = load_study()
    _inputs(tmp_path, study)
    runs, unplannable = runs_to_check(study, tmp_path)
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
    assert preflight_nodes(study, runs) == 1  # local launcher: no Ray cluster across Slurm nodes
    json.dumps(record)


def test_every_problem_is_named_at_once(tmp_path: Path) -> None:
    # No data, no model, an engine this environment lacks, and a run verl's config rejects.
    study = load_study(sets=["parallel.rollout.engine=vllm"])
    runs, _ = runs_to_check(study, tmp_path)
    broken = dataclasses.replace(runs[0], verl_args=[*runs[0].verl_args, "actor_rollout_ref.rollout.no_such_key=1"])
    record = check(study, [broken, *runs[1:]], tmp_path)
    problems = "\n".join(record["problems"])
    assert "dataset gsm8k" in problems and "dataset dapo_math" in problems and "model:" in problems
    assert "module vllm does not import" in problems
    assert f"run {broken.run_id}: verl rejects its arguments" in problems and "no_such_key" in problems
    assert sum("verl rejects" in p for p in record["problems"]) == 1


def test_a_changed_study_reruns_the_preflight(workdir: Path) -> None:
    snakemake(workdir, "--cores", "2", "results/preflight/local.json")
    assert "Nothing to be done" in snakemake(workdir, "-n", "--cores", "2", "results/preflight/local.json").stdout
    override = 'overrides={"datasets.gsm8k.memory.token_budget": 4096}'
    changed = snakemake(workdir, "results/preflight/local.json", "-n", "--cores", "2", "--config", override).stdout
    assert "rule preflight:" in changed and "rule dataset:" not in changed
