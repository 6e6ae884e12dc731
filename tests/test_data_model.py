"""The data and model stages: verl's schema, verl's real rewards, upstream formats, determinism."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from rlvr_scaling.errors import StudyError
from rlvr_scaling.inputs import data, input_lock
from rlvr_scaling.inputs import model as model_stage
from rlvr_scaling.inputs.data import prepare_dataset
from rlvr_scaling.inputs.rows import verl_rows
from rlvr_scaling.study.config import load_study

# The own-study example (config/examples/own-study.yaml, test_own_study's): its math dataset's reward
# is checked here, beside the synthetic datasets', so the one import of verl's scorers (3.4 s) is paid
# once by the worker that runs this module.
EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "examples" / "own-study.yaml"
VERL_COLUMNS = {"data_source", "prompt", "ability", "reward_model", "extra_info"}


def score(row: pd.Series, response: str) -> float:
    from verl.utils.reward_score import default_compute_score

    result = default_compute_score(row["data_source"], response, row["reward_model"]["ground_truth"], row["extra_info"])
    return float(result["score"] if isinstance(result, dict) else result)


@pytest.mark.parametrize("dataset", ["gsm8k", "dapo_math"])
def test_synthetic_data_in_verl_schema_scored_by_verl(tmp_path: Path, dataset: str) -> None:
    study = load_study()
    manifest = prepare_dataset(study, dataset, tmp_path / dataset)
    train = pd.read_parquet(tmp_path / dataset / "train.parquet")
    assert set(train.columns) == VERL_COLUMNS
    assert manifest["files"]["train"]["rows"] == len(train) > 0
    assert manifest["files"]["val"]["rows"] > 0
    row = train.iloc[0]
    assert row["prompt"][0]["role"] == "user"
    answer = row["reward_model"]["ground_truth"]
    right = f"... #### {answer}" if dataset == "gsm8k" else f"Some work.\nAnswer: {answer}"
    wrong = "#### 999999" if dataset == "gsm8k" else "Answer: 999999"
    assert score(row, right) == 1.0
    assert score(row, wrong) < 1.0


def test_the_math_example_takes_the_last_boxed_answer_and_verl_scores_it() -> None:
    math = load_study(EXAMPLE).dataset("math")
    solution = "So $x = \\frac{1}{2}$ first, then \\boxed{\\frac{3}{4}}."
    record = {"problem": "What is $x$?", "solution": solution, "level": "Level 2"}
    row = verl_rows("math", math, {"train": [record], "val": [record]})["train"][0]
    assert row["reward_model"] == {"style": "rule", "ground_truth": "\\frac{3}{4}"}
    assert row["data_source"] == "DigitalLearningGmbH/MATH-lighteval"
    assert row["prompt"] == [
        {
            "role": "user",
            "content": "What is $x$? Let's think step by step and output the final answer within \\boxed{}.",
        }
    ]
    from verl.utils.reward_score import default_compute_score

    assert default_compute_score(row["data_source"], "it is \\boxed{\\frac{3}{4}}", "\\frac{3}{4}") == 1.0
    assert default_compute_score(row["data_source"], "it is \\boxed{1}", "\\frac{3}{4}") == 0.0


def test_synthetic_data_is_deterministic(tmp_path: Path) -> None:
    study = load_study()
    first = prepare_dataset(study, "gsm8k", tmp_path / "a")
    second = prepare_dataset(study, "gsm8k", tmp_path / "b")
    assert first["files"] == second["files"]


def test_gsm8k_conversion_from_the_upstream_format_by_its_config_entry() -> None:
    gsm8k = load_study(site="lumi").dataset("gsm8k")
    question = "Tom has 3 apples and buys 1,200 more. How many?"
    upstream = [{"question": question, "answer": "3 + 1200 = 1203\n#### 1,203"}]
    row = pd.DataFrame(verl_rows("gsm8k", gsm8k, {"train": upstream, "val": upstream})["train"]).iloc[0]
    assert row["data_source"] == "openai/gsm8k"
    assert row["reward_model"] == {"style": "rule", "ground_truth": "1203"}
    assert row["prompt"][0]["content"].endswith('output the final answer after "####".')
    assert row["extra_info"] == {"split": "train", "index": 0, **upstream[0]}
    assert score(row, "so #### 1203") == 1.0


def test_dapo_deduplicates_and_holds_out_a_slice_by_its_config_entry() -> None:
    prompts = [[{"role": "user", "content": f"Solve problem {i}. Answer: $Answer"}] for i in range(40)]
    rows = [
        {
            "data_source": "math_dapo",
            "prompt": p,
            "ability": "MATH",
            "reward_model": {"ground_truth": str(i), "style": "rule-lighteval/MATH_v2"},
            "extra_info": {"index": "u"},
        }
        for i, p in enumerate(prompts)
    ]
    dapo = load_study(site="lumi", sets=["datasets.dapo_math.held_out=4"]).dataset("dapo_math")
    frames = verl_rows("dapo_math", dapo, {"train": rows * 5})  # the published file repeats every prompt
    assert len(frames["train"]) + len(frames["val"]) == 40
    assert len(frames["val"]) == 4
    seen = {r["prompt"][0]["content"] for r in frames["train"]} | {r["prompt"][0]["content"] for r in frames["val"]}
    assert len(seen) == 40
    assert frames["val"][0]["reward_model"]["style"] == "rule-lighteval/MATH_v2"
    assert frames["val"][0]["extra_info"] == {"split": "val", "index": 0}


def test_download_path_writes_a_manifest_with_the_resolved_commit(tmp_path: Path, monkeypatch) -> None:
    upstream = tmp_path / "upstream.parquet"
    pd.DataFrame({"question": ["q"], "answer": ["#### 4"]}).to_parquet(upstream)
    monkeypatch.setattr(data, "_resolve_dataset", lambda repo, revision: "c0ffee")
    monkeypatch.setattr(data, "_fetch_dataset_file", lambda repo, filename, commit: upstream)
    study = load_study(site="lumi")
    manifest = prepare_dataset(study, "gsm8k", tmp_path / "gsm8k")
    assert manifest["commit"] == "c0ffee" and manifest["source"] == "openai/gsm8k"
    assert json.loads((tmp_path / "gsm8k" / "manifest.json").read_text())["files"]["train"]["rows"] == 1


def test_failed_preparation_leaves_nothing_half_written_and_locks_nothing(
    tmp_path: Path, monkeypatch, lock_file: Path
) -> None:
    def broken(*_args):
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(data, "_resolve_dataset", lambda repo, revision: "c0ffee")
    monkeypatch.setattr(data, "_fetch_dataset_file", broken)
    # An unreachable hub is one line naming the input, its revision and the local-copy way (#43).
    with pytest.raises(StudyError) as refused:
        prepare_dataset(load_study(site="lumi"), "gsm8k", tmp_path / "gsm8k")
    assert str(refused.value) == (
        "dataset openai/gsm8k at revision main: the hub cannot be reached (ConnectionError: hub unreachable); "
        "download it where the hub is reachable (hf download openai/gsm8k --repo-type dataset --revision main "
        "--local-dir DIR) and set datasets.gsm8k.source: ./DIR (a local folder)"
    )
    assert list(tmp_path.iterdir()) == []
    assert input_lock.locked_entry("dataset", "openai/gsm8k", "main") is None


@pytest.fixture
def lock_file(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "lock" / "inputs.lock.json"
    monkeypatch.setenv(input_lock.LOCK_FILE_VAR, str(path))
    return path


def test_the_first_download_locks_the_commit_and_digests_and_later_ones_take_them(
    tmp_path: Path, monkeypatch, lock_file: Path
) -> None:
    """The hub's `main` moves between two downloads; the second one still gets the locked commit,
    and a file changed under that commit stops the stage, naming it, with the data prepared before
    left as it was."""
    upstream = {
        "main/train-00000-of-00001.parquet": tmp_path / "train.parquet",
        "main/test-00000-of-00001.parquet": tmp_path / "test.parquet",
    }
    for path in upstream.values():
        pd.DataFrame({"question": ["q", "r"], "answer": ["#### 4", "#### 5"]}).to_parquet(path)
    branch = {"main": "c0ffee"}
    fetched: list[str] = []
    monkeypatch.setattr(data, "_resolve_dataset", lambda repo, revision: branch[revision])

    def fetch(repo: str, filename: str, commit: str) -> Path:
        fetched.append(commit)
        return upstream[filename]

    monkeypatch.setattr(data, "_fetch_dataset_file", fetch)
    study = load_study(site="lumi")
    first = prepare_dataset(study, "gsm8k", tmp_path / "gsm8k")
    lock = json.loads(lock_file.read_text())["inputs"]["dataset:openai/gsm8k"]
    digests = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in upstream.items()}
    assert lock == {"revision": "main", "commit": "c0ffee", "files": digests}
    assert first["locked"] is False and first["upstream_sha256"] == digests

    branch["main"] = "beef"  # the branch moved on the hub
    second = prepare_dataset(study, "gsm8k", tmp_path / "again")
    assert fetched[-2:] == ["c0ffee", "c0ffee"] and second["commit"] == "c0ffee" and second["locked"] is True
    assert (tmp_path / "again" / "train.parquet").read_bytes() == (tmp_path / "gsm8k" / "train.parquet").read_bytes()

    prepared = (tmp_path / "gsm8k" / "manifest.json").read_bytes()
    pd.DataFrame({"question": ["other"], "answer": ["#### 1"]}).to_parquet(upstream["main/test-00000-of-00001.parquet"])
    with pytest.raises(StudyError) as refused:
        prepare_dataset(study, "gsm8k", tmp_path / "gsm8k")
    message = str(refused.value)
    assert (
        "main/test-00000-of-00001.parquet does not match" in message
        and digests["main/test-00000-of-00001.parquet"] in message
    )
    assert (tmp_path / "gsm8k" / "manifest.json").read_bytes() == prepared
    # Another revision in the config is another input: not locked yet.
    assert input_lock.locked_entry("dataset", "openai/gsm8k", "refs/pr/1") is None


def test_a_downloaded_model_is_locked_and_a_changed_weight_file_is_refused(
    tmp_path: Path, monkeypatch, lock_file: Path
) -> None:
    content = {
        "config.json": b"{}",
        "model-00001-of-00002.safetensors": b"weights",
        "tokenizer_config.json": b'{"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}',
    }

    def fetch(name: str, commit: str, output: Path) -> None:
        for filename, payload in content.items():
            (output / filename).write_bytes(payload)

    monkeypatch.setattr(model_stage, "_resolve_model", lambda name, revision: "abc123")
    monkeypatch.setattr(model_stage, "_fetch_model", fetch)
    study = load_study(site="lumi")
    assert "model Qwen/Qwen3-8B@main" in input_lock.unlocked_inputs(study)
    manifest = model_stage.prepare_model(study, tmp_path / "model")
    assert manifest["commit"] == "abc123"
    locked = json.loads(lock_file.read_text())["inputs"]["model:Qwen/Qwen3-8B"]
    assert locked["files"] == {name: hashlib.sha256(payload).hexdigest() for name, payload in content.items()}
    # The plan now names only the datasets as not locked.
    assert input_lock.unlocked_inputs(study) == [
        "dataset openai/gsm8k@main",
        "dataset BytedTsinghua-SIA/DAPO-Math-17k@main",
    ]

    content["model-00001-of-00002.safetensors"] = b"other weights"
    with pytest.raises(StudyError, match=r"model-00001-of-00002\.safetensors does not match"):
        model_stage.prepare_model(study, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


def test_the_local_study_has_nothing_to_lock() -> None:
    assert input_lock.unlocked_inputs(load_study(site="local")) == []


def test_tiny_model_is_seeded_and_loads(tmp_path: Path) -> None:
    from rlvr_scaling.inputs.model import prepare_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    study = load_study()
    first = prepare_model(study, tmp_path / "a")
    prepare_model(study, tmp_path / "b")
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "a")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "a")
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "1+1?"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n")
    assert first["architecture"] == "Qwen3ForCausalLM"
