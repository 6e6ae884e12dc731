"""The study definition: loading, sites, overrides, and bad input stopped with key, value and rule."""

from __future__ import annotations

import subprocess

import pytest
from rlvr_scaling.config import load_study
from rlvr_scaling.errors import ConfigError

from .conftest import PYTHON, REPO


def test_lumi_study_encodes_the_published_settings() -> None:
    study = load_study(site="lumi")
    cfg = study.config
    assert cfg["model"]["name"] == "Qwen/Qwen3-8B"
    assert cfg["algorithm"] == {"name": "grpo", "responses_per_prompt": 8, "lr": 0.0, "steps": 20, "warmup_steps": 1}
    assert cfg["datasets"]["gsm8k"]["max_response_length"] == 1024
    assert cfg["datasets"]["dapo_math"]["max_response_length"] == 8192
    assert cfg["datasets"]["gsm8k"]["memory"]["recompute"] is False
    assert cfg["datasets"]["dapo_math"]["memory"] == {"recompute": True, "offload": True, "token_budget": 10240}
    assert cfg["scaling"] == {
        "weak_nodes": [1, 2, 4, 8, 16],
        "strong_nodes": [1, 2, 4, 8, 16],
        "strong_reference_nodes": 4,
    }
    assert cfg["parallel"]["rollout"]["tensor_parallel"] == 4 and cfg["parallel"]["rollout"]["data_parallel"] == 2
    assert cfg["parallel"]["training"]["tensor_parallel"] == 8
    assert study.site["hardware"]["gpus_per_node"] == 8
    assert study.site["slurm"]["partition"] == "standard-g"


def test_default_site_is_local_and_scaled_down() -> None:
    study = load_study()
    assert study.site_name == "local"
    assert study.config["model"]["source"] == "tiny"
    assert study.config["scaling"]["weak_nodes"] == [1, 2]
    # The contrast of the real study survives the scaling down.
    data = study.config["datasets"]
    assert data["dapo_math"]["max_response_length"] > data["gsm8k"]["max_response_length"]


def test_set_overrides_win_over_the_site() -> None:
    study = load_study(sets=["algorithm.steps=3", "scaling.weak_nodes=[1]"])
    assert study.config["algorithm"]["steps"] == 3
    assert study.config["scaling"]["weak_nodes"] == [1]


@pytest.mark.parametrize(
    ("assignment", "key", "fragment"),
    [
        ("algorithm.stepz=3", "algorithm.stepz", "not a known key"),
        ("algorithm.steps=many", "algorithm.steps", "not of type 'integer'"),
        ("parallel.rollout.tensor_parallel=3", "parallel.rollout", "must divide"),
        ("datasets.gsm8k.max_response_length=40500", "datasets.gsm8k.max_response_length", "context"),
        ("scaling.weak_nodes=[1,0]", "scaling.weak_nodes.1", "minimum"),
        ("scaling.strong_reference_nodes=3", "scaling.strong_reference_nodes", "strong_nodes"),
        ("datasets.gsm8k.memory.token_budget=100", "datasets.gsm8k.memory.token_budget", "at least"),
        ("study.name=bad;name", "study.name", "does not match"),
        ("selection.gsm8k=0", "selection.gsm8k", "positive"),
        ("algorithm.warmup_steps=20", "algorithm.warmup_steps", "smaller"),
        # NaN and infinities reached verl or crashed the selection and the plan; 20.0 made new run ids
        ("algorithm.lr=.nan", "algorithm.lr", "finite number"),
        ("selection_rule.tolerance=.nan", "selection_rule.tolerance", "finite number"),
        (
            "datasets.gsm8k.estimate.seconds_per_trajectory=.inf",
            "datasets.gsm8k.estimate.seconds_per_trajectory",
            "finite",
        ),
        ("scaling.weak_nodes=[1,-.inf]", "scaling.weak_nodes.1", "finite number"),
        ("algorithm.steps=20.0", "algorithm.steps", "not of type 'integer'"),
        ("algorithm.steps=true", "algorithm.steps", "not of type 'integer'"),
    ],
)
def test_bad_input_names_key_value_and_rule(assignment: str, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_study(site="lumi", sets=[assignment])
    assert caught.value.key == key
    assert fragment in str(caught.value)


def test_pinned_selection_outside_the_grid_warns() -> None:
    with pytest.warns(UserWarning, match="not in the sweep grid"):
        load_study(site="lumi", sets=["selection.gsm8k=120"])


def test_unknown_site_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known sites: ci-apptainer, ci-slurm, local, lumi"):
        load_study(site="nowhere")


def test_cli_exits_2_with_one_clear_paragraph() -> None:
    result = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--site", "lumi", "--set", "scaling.weak_nodes=[1,-2]"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 2
    assert "scaling.weak_nodes.1" in result.stderr and "-2" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_site_can_inherit_another() -> None:
    study = load_study(site="ci-slurm")
    assert study.site["engine"] == "verl-cpu" and study.site["launch"]["kind"] == "ray-srun"
    assert study.site["launch"]["unset_environment"] == ["ROCR_VISIBLE_DEVICES"]
    assert study.config["model"]["source"] == "tiny"  # the local site's scaled-down study
