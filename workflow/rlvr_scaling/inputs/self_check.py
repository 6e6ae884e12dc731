"""The reward's self-check: every prepared row's own reference solution, scored by the reward the runs
will use, against the row's ground truth.

A reference solution is the source's answer field as written (GSM8K's worked answer ending '#### 72',
a file's `output` text), or that answer put into the shape the prompt asks for (`self_check.solution`,
e.g. DAPO-Math-17K's bare answers as 'Answer: 34'). A row whose reference does not earn the full
score is a row the model cannot be rewarded for either: a ground truth that kept a period ('1250.'),
a marker the answers do not carry, a reward that wants another shape. The data stage records the
share that passes and fails below `self_check.min_share`, before anything is written.

The reward is the runs' own: verl's default_compute_score for a built-in data_source (verl must be
importable: the local environment, the engine image), or the dataset's reward file. Where it cannot
be loaded (verl absent from a cluster's workflow environment) the check says so instead of guessing.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr_scaling.errors import StudyError
from rlvr_scaling.inputs.rows import PreparedRow, field_value
from rlvr_scaling.study.sections import Dataset

ANSWER_PLACEHOLDER = "{answer}"
# Beside the rows, where the self-check could not run in the data stage: each row's reference solution
# and ground truth, one JSON object per line, for the preflight to score inside the image.
REFERENCES = "references.jsonl"
# How many failing rows a record and an error name.
SAMPLES = 3
# A ground truth ending in one of these kept the sentence's punctuation ('1250.'), which few scorers forgive.
TRAILING_PUNCTUATION = ".,;:!?"

Scorer = Callable[..., Any]


def reference_solution(record: dict[str, Any], dataset: Dataset) -> str:
    """The row's reference solution: its answer field as written, in the dataset's `self_check.solution` shape."""
    answer = field_value(record, dataset.answer)
    return dataset.self_check.solution.replace(ANSWER_PLACEHOLDER, str(answer))


def load_scorer(name: str, dataset: Dataset, reward_file: Path | None) -> tuple[Scorer | None, str]:
    """(the reward the runs use, what it is); (None, why not) where it cannot be loaded here."""
    if dataset.reward.custom and reward_file is not None:
        described = f"{dataset.reward.file}:{dataset.reward.function}"
        try:
            spec = importlib.util.spec_from_file_location(f"rlvr_reward_{name}", reward_file)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's file: any failure to import is reported
            return None, f"{described} could not be imported here ({type(exc).__name__}: {exc})"
        return getattr(module, dataset.reward.function), described
    try:
        from verl.utils.reward_score import default_compute_score
    except ImportError:
        return None, (
            f"verl's scorer for data_source {dataset.data_source(name)!r} is not importable here (verl is not "
            "in this environment: on a cluster it is in the engine image)"
        )
    return default_compute_score, f"verl.utils.reward_score.default_compute_score({dataset.data_source(name)!r})"


def score_value(result: Any) -> float:
    """A reward's result as a number: verl's scorers return a float, a bool or a dict with 'score'."""
    if isinstance(result, dict):
        result = result.get("score")
    try:
        value = float(result)
    except (TypeError, ValueError):
        return math.nan
    return value


def score_row(scorer: Scorer, name: str, dataset: Dataset, prepared: PreparedRow) -> tuple[float, str | None]:
    """The reward of the row's reference solution (nan and why, where the reward raised)."""
    solution = reference_solution(prepared.record, dataset)
    try:
        result = scorer(
            dataset.data_source(name), solution, prepared.ground_truth, extra_info=prepared.row.get("extra_info")
        )
    except Exception as exc:  # noqa: BLE001 - a reward that raises on its own reference is what is reported
        return math.nan, f"{type(exc).__name__}: {exc}"
    return score_value(result), None


def _sample(prepared: PreparedRow, solution: str, score: float, error: str | None) -> dict[str, Any]:
    return {
        "split": prepared.split,
        "index": prepared.index,
        "ground_truth": prepared.ground_truth,
        "reference": solution[-160:],
        "score": None if math.isnan(score) else score,
        **({"error": error} if error else {}),
    }


def run_self_check(name: str, dataset: Dataset, rows: list[PreparedRow], scorer: Scorer, described: str) -> dict:
    """The share of rows whose reference solution earns the full score, with the first failing rows."""
    full = dataset.self_check.full_score
    passing, failing = 0, list[dict[str, Any]]()
    for prepared in rows:
        score, error = score_row(scorer, name, dataset, prepared)
        if score >= full:
            passing += 1
        elif len(failing) < SAMPLES:
            failing.append(_sample(prepared, reference_solution(prepared.record, dataset), score, error))
    return {
        "ran": True,
        "scorer": described,
        "solution": dataset.self_check.solution,
        "rows": len(rows),
        "full_score": full,
        "passing": passing,
        "share": passing / len(rows) if rows else 0.0,
        "min_share": dataset.self_check.min_share,
        "failing": failing,
    }


def reference_lines(dataset: Dataset, rows: list[PreparedRow]) -> str:
    """REFERENCES' text: split, index, reference solution and ground truth of every row."""
    return "".join(
        json.dumps(
            {
                "split": p.split,
                "index": p.index,
                "solution": reference_solution(p.record, dataset),
                "ground_truth": p.ground_truth,
            }
        )
        + "\n"
        for p in rows
    )


def not_run(why: str) -> dict[str, Any]:
    return {"ran": False, "why": why}


def ground_truth_warnings(name: str, rows: list[PreparedRow]) -> list[str]:
    """Ground truths that end in punctuation or hold spaces, by count and first example."""
    checks = {
        f"end in punctuation ({TRAILING_PUNCTUATION})": lambda truth: truth[-1:] in TRAILING_PUNCTUATION,
        "hold spaces": lambda truth: any(character.isspace() for character in truth),
    }
    warnings = []
    for what, applies in checks.items():
        found = [prepared for prepared in rows if prepared.ground_truth and applies(prepared.ground_truth)]
        if found:
            first = found[0]
            warnings.append(
                f"datasets.{name}: {len(found)} of {len(rows)} ground truths {what}, e.g. {first.split} row "
                f"{first.index}: {first.ground_truth!r} (datasets.{name}.ground_truth: the number rule writes "
                "numbers in one form)"
            )
    return warnings


def summary_line(name: str, check: dict[str, Any]) -> str:
    """One line: the share, or why the check did not run."""
    if not check["ran"]:
        return f"datasets.{name}: reward self-check not run: {check['why']}"
    return (
        f"datasets.{name}: the reward gives {check['passing']} of {check['rows']} rows' own reference solutions "
        f"the full score {check['full_score']:g} ({check['share']:.1%}; {check['scorer']})"
    )


def failure(name: str, check: dict[str, Any]) -> str | None:
    """The one-line error for a share below self_check.min_share, naming a failing row; None: it passes."""
    if not check["ran"] or check["share"] >= check["min_share"]:
        return None
    example = check["failing"][0] if check["failing"] else None
    shown = ""
    if example:
        scored = example.get("error") or f"scored {example['score']}"
        shown = (
            f"; e.g. {example['split']} row {example['index']}: ground truth {example['ground_truth']!r}, its "
            f"reference ...{example['reference'][-60:]!r} {scored}"
        )
    return (
        f"{summary_line(name, check)}: below datasets.{name}.self_check.min_share = {check['min_share']:g}{shown}. "
        f"Check datasets.{name}.ground_truth and .reward (rlvr-scaling data-preview --dataset {name} shows rows), "
        f"or set self_check.solution to the shape the prompt asks for"
    )


def self_check_record(name: str, dataset: Dataset, rows: list[PreparedRow], reward_file: Path | None) -> dict[str, Any]:
    """The self-check's record with its warnings, whatever its share (the preview shows it as it is)."""
    scorer, described = load_scorer(name, dataset, reward_file)
    check = run_self_check(name, dataset, rows, scorer, described) if scorer else not_run(described)
    check["warnings"] = ground_truth_warnings(name, rows)
    return check


def check_rows(name: str, dataset: Dataset, rows: list[PreparedRow], reward_file: Path | None) -> dict[str, Any]:
    """The self-check's record (with its warnings); StudyError when too few rows pass."""
    check = self_check_record(name, dataset, rows, reward_file)
    problem = failure(name, check)
    if problem:
        raise StudyError(problem)
    return check
