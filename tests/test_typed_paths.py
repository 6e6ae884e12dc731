"""Paths that the type check (mypy, pyproject.toml) showed were unguarded: each fails without its fix."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.inputs import data
from rlvr_scaling.inputs import model as model_stage
from rlvr_scaling.measured.models import RunSummary
from rlvr_scaling.study.validate import check_schema


def test_a_hub_answer_without_a_commit_is_refused_not_locked_as_null(monkeypatch) -> None:
    # The hub client types ModelInfo.sha and DatasetInfo.sha optional: with None, the input used to be
    # fetched at whatever its branch named then and recorded with commit null, pinned to nothing.
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, name, revision: SimpleNamespace(sha=None))
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, repo, revision: SimpleNamespace(sha=None))
    with pytest.raises(StudyError, match="model Qwen/Qwen3-0.6B at revision main: the hub named no commit"):
        model_stage._resolve_model("Qwen/Qwen3-0.6B", "main")
    with pytest.raises(StudyError, match="dataset openai/gsm8k at revision main: the hub named no commit"):
        data._resolve_dataset("openai/gsm8k", "main")


def test_a_hub_answer_with_a_commit_is_that_commit(monkeypatch) -> None:
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, name, revision: SimpleNamespace(sha="c0ffee"))
    assert model_stage._resolve_model("Qwen/Qwen3-0.6B", "main") == "c0ffee"


def test_a_value_a_boolean_subschema_refuses_is_a_config_error(tmp_path: Path) -> None:
    # A `false` subschema fails with a bool as the error's schema: describing it used to raise
    # AttributeError ('bool' object has no attribute 'get') instead of naming the key.
    schema = tmp_path / "schema.yaml"
    schema.write_text("type: object\nproperties:\n  retired: false\n")
    with pytest.raises(ConfigError, match="False schema does not allow 1"):
        check_schema({"retired": 1}, schema)


def test_figures_of_a_run_that_measured_nothing_name_the_run() -> None:
    failed = RunSummary(
        run_id="sweep-gsm8k-n1-p64",
        dataset="gsm8k",
        series=["sweep"],
        nodes=1,
        gpus=8,
        prompts=64,
        trajectories=512,
        trajectories_per_engine=64.0,
        concurrency=64,
        max_response_length=1024,
        memory_settings={},
        site="lumi",
        gpu_memory_gb=64.0,
        measured=None,
        checks=[],
        valid=False,
        status="failed",
        steps=[],
        provenance={},
    )
    with pytest.raises(ValueError, match="run sweep-gsm8k-n1-p64 \\(failed\\) measured nothing"):
        _ = failed.figures
