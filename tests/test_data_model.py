"""The data and model stages: verl's schema, verl's real rewards, upstream formats, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from rlvr_scaling.inputs import data
from rlvr_scaling.inputs.data import dapo_frames, gsm8k_frames, prepare_dataset
from rlvr_scaling.study.config import load_study

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


def test_synthetic_data_is_deterministic(tmp_path: Path) -> None:
    study = load_study()
    first = prepare_dataset(study, "gsm8k", tmp_path / "a")
    second = prepare_dataset(study, "gsm8k", tmp_path / "b")
    assert first["files"] == second["files"]


def test_gsm8k_conversion_from_the_upstream_format() -> None:
    upstream = pd.DataFrame(
        {"question": ["Tom has 3 apples and buys 1,200 more. How many?"], "answer": ["3 + 1200 = 1203\n#### 1,203"]}
    )
    frames = gsm8k_frames({"train": upstream, "val": upstream})
    row = frames["train"].iloc[0]
    assert row["data_source"] == "openai/gsm8k"
    assert row["reward_model"] == {"style": "rule", "ground_truth": "1203"}
    assert row["prompt"][0]["content"].endswith('output the final answer after "####".')
    assert score(row, "so #### 1203") == 1.0


def test_dapo_deduplicates_and_holds_out_a_slice() -> None:
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
    upstream = pd.DataFrame(rows * 5)  # the published file repeats every prompt
    frames = dapo_frames(upstream, val_rows=4)
    assert len(frames["train"]) + len(frames["val"]) == 40
    assert len(frames["val"]) == 4
    seen = {r[0]["content"] for r in frames["train"]["prompt"]} | {r[0]["content"] for r in frames["val"]["prompt"]}
    assert len(seen) == 40


def test_download_path_writes_a_manifest_with_the_resolved_commit(tmp_path: Path, monkeypatch) -> None:
    upstream = tmp_path / "upstream.parquet"
    pd.DataFrame({"question": ["q"], "answer": ["#### 4"]}).to_parquet(upstream)
    monkeypatch.setattr(data, "_hub_download", lambda repo, filename, revision: (upstream, "c0ffee"))
    study = load_study(site="lumi")
    manifest = prepare_dataset(study, "gsm8k", tmp_path / "gsm8k")
    assert manifest["commit"] == "c0ffee" and manifest["source"] == "openai/gsm8k"
    assert json.loads((tmp_path / "gsm8k" / "manifest.json").read_text())["files"]["train"]["rows"] == 1


def test_failed_preparation_leaves_nothing_half_written(tmp_path: Path, monkeypatch) -> None:
    def broken(*_args):
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(data, "_hub_download", broken)
    with pytest.raises(ConnectionError):
        prepare_dataset(load_study(site="lumi"), "gsm8k", tmp_path / "gsm8k")
    assert list(tmp_path.iterdir()) == []


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
