"""A study of one's own tried on this machine first (#54): the local site's toy_scale shrinks the user's
datasets and model by its stated rule and keeps what defines them; what the site replaced is listed
leaf by leaf and named when it conflicts; several study files read as Snakemake reads them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.plan_view import build_line
from rlvr_scaling.study.config import load_study

from .conftest import PYTHON, REPO
from .workflow_helpers import snakemake

EXAMPLE = REPO / "config" / "examples" / "own-study.yaml"
LOCAL_SITE = yaml.safe_load((REPO / "config" / "sites" / "local.yaml").read_text())
RULE = LOCAL_SITE["toy_scale"]


def test_the_example_on_the_local_site_keeps_its_data_and_reward_and_shrinks_by_the_rule() -> None:
    yours = yaml.safe_load(EXAMPLE.read_text())["datasets"]["my_problems"]
    study = load_study(EXAMPLE, site="local")
    mine = study.dataset("my_problems")
    # What defines the dataset is the user's.
    assert (mine.source, mine.question, mine.answer, mine.prompt) == (
        yours["source"],
        yours["question"],
        yours["answer"],
        yours["prompt"],
    )
    assert mine.ground_truth.to_dict() == yours["ground_truth"] and mine.reward.file == yours["reward"]["file"]
    # Lengths at most the rule's, the sweep and the memory the rule's.
    assert (mine.max_prompt_length, mine.max_response_length) == (
        min(yours["max_prompt_length"], RULE["max_prompt_length"]),
        min(yours["max_response_length"], RULE["max_response_length"]),
    )
    assert mine.sweep == RULE["sweep"] and mine.memory.token_budget == RULE["token_budget"]
    assert (mine.memory.recompute, mine.memory.offload) == (False, False)
    # A hub model becomes the site's tiny one, whole: no key of the user's model is left over it.
    model = study.config.model
    assert (model.source, model.name, model.path) == ("tiny", "tiny-qwen3", None)
    keys = {r.key for r in study.site_replaced}
    assert "datasets.my_problems.max_response_length" in keys and "datasets.my_problems.max_prompt_length" not in keys
    assert not any(".reward" in key or ".source" in key.removeprefix("model.") for key in keys), keys


def _model_folder(tmp_path: Path, hidden: int, layers: int) -> Path:
    folder = tmp_path / f"model-{hidden}"
    folder.mkdir()
    shape = {
        "model_type": "qwen3",
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": hidden // 4,
        "vocab_size": 1024,
        "max_position_embeddings": 4096,
    }
    (folder / "config.json").write_text(json.dumps(shape))
    return folder


def _matmul_parameters(hidden: int, layers: int) -> int:
    """q, k, v, o with 4 heads of hidden/4 and 2 kv heads, a gated MLP of 2 x hidden, and the embedding."""
    head = hidden // 4
    attention = 4 * head * hidden * 2 + 2 * head * hidden * 2
    return layers * (attention + 3 * hidden * 2 * hidden) + 1024 * hidden


@pytest.mark.parametrize(("hidden", "layers", "kept"), [(64, 2, True), (1024, 24, False)])
def test_a_local_model_is_kept_when_it_is_small_enough(tmp_path: Path, hidden: int, layers: int, kept: bool) -> None:
    assert (_matmul_parameters(hidden, layers) <= RULE["max_model_parameters"]) == kept
    folder = _model_folder(tmp_path, hidden, layers)
    study_file = yaml.safe_load(EXAMPLE.read_text())
    study_file["model"] = {"name": "mine", "source": "local", "path": str(folder), "max_context": 4096}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study_file))
    study = load_study(tmp_path / "study.yaml", site="local")
    chosen = study.config.model
    if kept:
        assert (chosen.source, chosen.path, chosen.max_context) == ("local", str(folder), 4096)
    else:
        assert (chosen.source, chosen.path) == ("tiny", None)


def test_a_conflict_with_a_value_the_site_set_names_the_site_and_the_key_to_change() -> None:
    with pytest.raises(ConfigError) as refused:
        load_study(EXAMPLE, site="local", sets=["datasets.math.max_response_length=2048"])
    message = str(refused.value)
    assert "must fit the model's context model.max_context = 1024" in message
    assert (
        "[site 'local' set this in its study_overrides: model.max_context is the site's 1024 (yours: 40960)" in message
    )
    assert "set model.max_context with --set]" in message


def test_the_sites_replacements_are_the_leaves_that_differ() -> None:
    study = load_study(site="local")  # the default study: gsm8k and dapo_math scaled by the site's own entries
    for replaced in study.site_replaced:
        assert replaced.yours != replaced.site and not isinstance(replaced.yours, dict), replaced
    defaults = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    site = LOCAL_SITE["study_overrides"]
    expected = {
        f"datasets.{name}.memory.{key}"
        for name in ("gsm8k", "dapo_math")
        for key, value in site["datasets"][name]["memory"].items()
        if defaults["datasets"][name]["memory"][key] != value
    }
    keys = {r.key for r in study.site_replaced}
    assert {k for k in keys if ".memory." in k} == expected and "datasets.gsm8k.memory" not in keys


def test_a_build_line_without_an_account_has_no_account_option() -> None:
    without = build_line(load_study(site="nvidia-example", sets=["slurm_account="]))
    assert without is not None and "--account" not in without and "sbatch --partition=gpu --nodes=1" in without
    with_account = build_line(load_study(site="nvidia-example", sets=["slurm_account=proj_1"]))
    assert with_account is not None and "sbatch --partition=gpu --account=proj_1 --nodes=1" in with_account


SECOND = """
study: {name: second-layer}
only_datasets: [my_problems]
scaling: {weak_nodes: [1, 2], strong_nodes: [2, 4]}
"""


@pytest.mark.heavy
def test_two_study_files_are_read_in_order_by_plan_as_by_snakemake(workdir: Path, tmp_path: Path) -> None:
    second = tmp_path / "second.yaml"
    second.write_text(SECOND)
    account = {"RLVR_SLURM_ACCOUNT": "proj_1"}
    planned = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--config", str(EXAMPLE), "--config", str(second)],
        capture_output=True,
        text=True,
        cwd=workdir,
        env={**__import__("os").environ, **account},
    )
    assert planned.returncode == 0, planned.stderr
    header = planned.stdout.splitlines()[0]
    # The second file's name and series over the first's datasets: my_problems' sweep of 2 points, then
    # pending weak 1 (x1), weak+strong 2 (x2, the example's reference nodes), strong 4 (x2): 2 + 3 runs.
    assert header == "Study second-layer on site 'nvidia-4gpu-example': 5 runs (3 pending the sweep's selection)"
    dry = snakemake(workdir, "-n", "--configfile", str(EXAMPLE), str(second), env=account)
    datasets = next(line for line in planned.stdout.splitlines() if line.startswith("Datasets: "))
    assert f"rlvr-scaling: {header}. {datasets}" in dry.stderr.splitlines(), dry.stderr


def test_plan_says_which_jobs_run_on_the_login_node_on_a_slurm_site() -> None:
    from rlvr_scaling.plan_view import jobs_line

    line = jobs_line(load_study(site="lumi", sets=["slurm_account=p"]))
    assert line is not None and line.startswith("Jobs: the data, the model and every analysis step run where")
    assert "the image build, the preflight and the runs as Slurm jobs" in line
    assert jobs_line(load_study(site="local")) is None  # everything runs here: nothing to tell apart


def test_the_rules_values_are_caps_a_small_dataset_keeps_its_own() -> None:
    from rlvr_scaling.study.toy_scale import shrunk_dataset

    rule = {**RULE, "sweep": [1, 2], "token_budget": 2048, "max_prompt_length": 256, "max_response_length": 32}
    small = {"max_prompt_length": 96, "max_response_length": 16, "memory": {"token_budget": 1024}, "sweep": [1, 4]}
    assert shrunk_dataset(small, rule) == {
        "max_prompt_length": 96,
        "max_response_length": 16,
        "memory": {"offload": False, "token_budget": 1024},
        "sweep": [1],  # 4 is over the rule's largest point
        "estimate": {"seconds_per_trajectory": RULE["seconds_per_trajectory"]},
    }
    large = {"max_prompt_length": 300, "max_response_length": 4096, "memory": {"token_budget": 100}, "sweep": [8]}
    shrunk = shrunk_dataset(large, rule)
    # 256 + 32 = 288: a budget below one whole trajectory is raised to it; no point of 2 or fewer: the rule's.
    assert (shrunk["max_prompt_length"], shrunk["max_response_length"]) == (256, 32)
    assert shrunk["memory"]["token_budget"] == 288 and shrunk["sweep"] == [1, 2]
