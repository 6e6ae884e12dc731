"""A dataset whose questions are chats (a system message, then the user's) with fraction answers, as a
lab brought it (#61): the study's `prompt` goes into the last user message, not dropped in silence,
and `{rule: number}` keeps "5/8" and "-1/3" whole, not their denominators; the preview shows both."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from rlvr_scaling.errors import StudyError
from rlvr_scaling.inputs.data import load_dataset
from rlvr_scaling.inputs.preview import preview
from rlvr_scaling.inputs.rows import prompt_messages
from rlvr_scaling.study.config import load_study

from .conftest import REPO

SYSTEM = {"role": "system", "content": "You are a careful mathematician."}


def test_a_prompt_goes_into_the_chats_last_user_message_and_the_rest_is_kept() -> None:
    chat = [SYSTEM, {"role": "user", "content": "What is 1/4?"}, {"role": "assistant", "content": "1/4."},
            {"role": "user", "content": "And 1/4 + 3/8?"}]  # fmt: skip
    made = prompt_messages(chat, "{question} End with: Final answer: <fraction>")
    assert made[:3] == chat[:3]
    assert made[3] == {"role": "user", "content": "And 1/4 + 3/8? End with: Final answer: <fraction>"}
    assert chat[3]["content"] == "And 1/4 + 3/8?"  # the source record is not changed
    assert prompt_messages(chat, "{question}") == chat  # the identity template: kept as published
    with pytest.raises(ValueError, match=r"without a user message .* \(roles: system\)"):
        prompt_messages([SYSTEM], "Solve: {question}")


def _rows(count: int) -> list[dict]:
    rows = []
    for n in range(1, count + 1):
        value = Fraction(1, 4) - Fraction(n, 8)  # negative from n = 3 on
        text = f"{value.numerator}/{value.denominator}" if value.denominator != 1 else str(value.numerator)
        question = [SYSTEM, {"role": "user", "content": f"What is 1/4 - {n}/8?"}]
        rows.append({"id": n, "messages": question, "solution": f"1/4 - {n}/8 = {text}. Final answer: {text}"})
    return rows


def _study(tmp_path: Path, prompt: str):
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _rows(30)))
    study = tmp_path / "study.yaml"
    reward = REPO / "config" / "examples" / "rewards" / "number_match.py"
    study.write_text(
        f"""
site: local
study: {{name: chats, reference: null}}
datasets:
  fractions:
    source: {data}
    held_out: 3
    question: messages
    answer: solution
    ground_truth: {{rule: number, marker: "Final answer:"}}
    prompt: {json.dumps(prompt)}
    ability: math
    reward: {{file: {reward}, function: compute_score}}
    max_prompt_length: 96
    max_response_length: 16
    memory: {{recompute: false, offload: false, token_budget: 2048}}
    sweep: [2]
    estimate: {{seconds_per_trajectory: 0.1}}
"""
    )
    return load_study(study, site="local")


def test_the_preview_shows_the_prompt_in_the_chat_and_fractions_whole(tmp_path: Path) -> None:
    study = _study(tmp_path, "{question} End with: Final answer: <fraction>")
    loaded = load_dataset(study, "fractions")
    truths = [row.ground_truth for row in loaded.all_rows()]
    # Every ground truth is the fraction as the answer wrote it: 1/8, 0, -1/8, -1/4, ... never "8" or "4".
    expected = {str(Fraction(1, 4) - Fraction(n, 8)) for n in range(1, 31)}
    assert set(truths) == expected and "-1/8" in truths and "8" not in truths
    lines = "\n".join(preview(study, ["fractions"], 1, tmp_path))
    # The tiny model's ChatML: the system message as published, the prompt after the user's question.
    assert "<|im_start|>system\n    You are a careful mathematician.<|im_end|>" in lines, lines
    assert "What is 1/4 - " in lines and "? End with: Final answer: <fraction><|im_end|>" in lines, lines
    assert "ground truth: '" in lines and "self-check: " in lines and "fails:" not in lines, lines
    assert "30 of 30" in lines, lines  # every reference solution scores full against its own fraction


def test_a_prompt_a_chat_without_a_user_message_cannot_take_is_refused_naming_the_row(tmp_path: Path) -> None:
    study = _study(tmp_path, "{question} End with: Final answer: <fraction>")
    data = Path(study.dataset("fractions").source)
    rows = _rows(30)
    rows[4]["messages"] = [SYSTEM]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(StudyError, match=r"dataset fractions, train row \d+: the question is a chat without a user"):
        load_dataset(study, "fractions")
