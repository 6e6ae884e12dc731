"""Rows in exactly the schema verl's RL dataset reads, built from any dataset's records as its entry in
the study config says (its `question`, `answer`, `ground_truth`, `prompt`, `reward`, `extra_info`).

The row's data_source selects verl's scorer (verl.utils.reward_score.default_compute_score):
'openai/gsm8k' scores the last '#### n', 'math_dapo' the 'Answer:' line, the MATH sets the last
\\boxed{}; a dataset with its own reward file gets its function instead (study.verl_args).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rlvr_scaling.errors import StudyError
from rlvr_scaling.study.sections import Dataset
from rlvr_scaling.study.validate import PLACEHOLDER

# What a record field holding a chat may be: a list of {role, content}, as parquet gives it back.
SEQUENCES = (list, tuple)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, SEQUENCES) or type(value).__name__ == "ndarray"


def field_value(record: dict[str, Any], path: str) -> Any:
    """The value of a dotted field; KeyError naming the first part that is not there."""
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}), braces matched; None if there is none."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    rest = text[start:]
    if rest.startswith("\\boxed "):  # \boxed 5: up to the end of the formula
        return rest[len("\\boxed ") :].split("$")[0].strip()
    opening = rest.find("{")
    if opening < 0:
        return None
    depth = 0
    for position in range(opening, len(rest)):
        if rest[position] == "{":
            depth += 1
        elif rest[position] == "}":
            depth -= 1
            if depth == 0:
                return rest[opening + 1 : position]
    return None


# A number as answers write it: a sign, thousands separators (1,250), a decimal part (3.50, .5). A
# period not followed by a digit is the sentence's, not the number's ("1,250." is 1250). A fraction of
# two whole numbers ("5/8", "-1 / 12", "\frac{5}{8}") is one number: read as its denominator, "5/3"
# became "3" and a dataset that rewards wrong answers passed every check (#61).
_SIGN = "[-+\u2212]"
FRACTION = re.compile(
    rf"(?P<num>{_SIGN}?\d+)\s*/\s*(?P<den>{_SIGN}?\d+)(?![\d.,]*\d)"
    rf"|(?P<lsign>{_SIGN}?)\\d?frac\{{\s*(?P<lnum>{_SIGN}?\d+)\s*\}}\{{\s*(?P<lden>{_SIGN}?\d+)\s*\}}"
)
NUMBER = re.compile(rf"{FRACTION.pattern}|{_SIGN}?(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?|{_SIGN}?\.\d+")


def canonical_number(text: str) -> str:
    """One written form of a number: no '+', no thousands separators, no trailing zeros of a decimal
    part, no '-0' ('+1,250.00' -> '1250', '3.50' -> '3.5', '-.5' -> '-0.5'); a fraction as
    '<sign><numerator>/<denominator>', not reduced ('-1 / 12' -> '-1/12', '\\frac{5}{-8}' -> '-5/8')."""
    fraction = FRACTION.fullmatch(text.strip())
    if fraction:
        return canonical_fraction(fraction)
    negative = text[0] in "-\u2212"
    digits = text.lstrip("+-\u2212").replace(",", "")
    whole, _, decimals = digits.partition(".")
    whole, decimals = whole.lstrip("0") or "0", decimals.rstrip("0")
    written = f"{whole}.{decimals}" if decimals else whole
    return f"-{written}" if negative and written != "0" else written


def canonical_fraction(match: re.Match[str]) -> str:
    """The written numerator and denominator, the sign in front; ValueError for a zero denominator."""
    sign = match["lsign"] or ""
    numerator, denominator = (match["num"], match["den"]) if match["num"] else (match["lnum"], match["lden"])
    negative = [part[0] in "-\u2212" for part in (sign or "+", numerator, denominator)].count(True) % 2 == 1
    top, bottom = (part.lstrip("+-\u2212").lstrip("0") or "0" for part in (numerator, denominator))
    if bottom == "0":
        raise ValueError(f"the answer's fraction {match.group()!r} divides by zero")
    return f"-{top}/{bottom}" if negative and top != "0" else f"{top}/{bottom}"


def number_in(text: str, after_marker: str | None) -> str:
    """The number rule: the first number (or fraction) after the last marker, or the last number of
    the text; ValueError saying why there is none."""
    if after_marker is not None:
        if after_marker not in text:
            raise ValueError(f"the answer has no {after_marker!r}: {text[-80:]!r}")
        found = NUMBER.search(text.rsplit(after_marker, 1)[1])
    else:
        found = ([None, *NUMBER.finditer(text)])[-1]
    if found is None:
        where = f"after the last {after_marker!r}" if after_marker is not None else ""
        raise ValueError(f"the answer has no number {where}: {text[-80:]!r}".replace("  ", " "))
    return canonical_number(found.group())


def ground_truth(answer: Any, dataset: Dataset) -> str:
    """The ground truth from the answer field by the dataset's rule; ValueError saying why not."""
    rule = dataset.ground_truth
    text = str(answer)
    if rule.rule == "number":
        text = number_in(text, rule.marker)
    elif rule.rule == "after_marker":
        marker = str(rule.marker)
        if marker not in text:
            raise ValueError(f"the answer has no {marker!r}: {text[-80:]!r}")
        text = text.rsplit(marker, 1)[1].strip()
    elif rule.rule == "last_boxed":
        boxed = last_boxed(text)
        if boxed is None:
            raise ValueError(f"the answer has no \\boxed{{}}: {text[-80:]!r}")
        text = boxed.strip()
    elif rule.rule != "whole":
        raise ValueError(f"unknown ground_truth rule {rule.rule!r}")
    for removed in rule.remove:
        text = text.replace(removed, "")
    return text


def prompt_messages(question: Any, template: str) -> list[dict[str, Any]]:
    """The chat verl renders: a text becomes one user message, the template's {question} replaced by it
    (no other brace is special). A question that is already a chat is kept as published, but for its
    last user message, which takes the template the same way: a prompt beside a chat was dropped in
    silence before (#61). ValueError saying why a chat cannot take it."""
    if not _is_sequence(question):
        return [{"role": "user", "content": template.replace(PLACEHOLDER, str(question))}]
    messages = [dict(message) for message in question]
    if template.strip() == PLACEHOLDER:
        return messages
    users = [i for i, message in enumerate(messages) if isinstance(message, dict) and message.get("role") == "user"]
    if not users:
        roles = ", ".join(str(m.get("role")) for m in messages if isinstance(m, dict)) or "none"
        raise ValueError(f"the question is a chat without a user message for the prompt to go in (roles: {roles})")
    last = messages[users[-1]]
    if not isinstance(last.get("content"), str):
        raise ValueError(f"the chat's last user message has no text content for the prompt: {last.get('content')!r}")
    last["content"] = template.replace(PLACEHOLDER, last["content"])
    return messages


def prompt_text(prompt: Iterable[dict[str, Any]]) -> str:
    return "\n".join(str(message["content"]) for message in prompt)


def build_row(
    name: str, dataset: Dataset, record: dict[str, Any], prompt: list[dict[str, Any]], split: str, index: int
):
    """One verl row; StudyError naming the dataset, split, row and field for a record it cannot use."""
    where = f"dataset {name}, {split} row {index}"
    try:
        truth = ground_truth(field_value(record, dataset.answer), dataset)
        kept = {path: field_value(record, path) for path in dataset.extra_info}
    except KeyError as missing:
        raise StudyError(f"{where}: it has no field {missing.args[0]!r} (datasets.{name})") from None
    except ValueError as exc:
        raise StudyError(f"{where}: {exc} (datasets.{name}.ground_truth)") from None
    return {
        "data_source": dataset.data_source(name),
        "prompt": prompt,
        "ability": dataset.ability,
        "reward_model": {"style": dataset.reward.style, "ground_truth": truth},
        "extra_info": {"split": split, "index": index, **kept},
    }


def prompts_of(name: str, dataset: Dataset, records: list[dict[str, Any]], split: str) -> list[list[dict[str, Any]]]:
    prompts = []
    for index, record in enumerate(records):
        try:
            question = field_value(record, dataset.question)
        except KeyError:
            raise StudyError(
                f"dataset {name}, {split} row {index}: it has no field {dataset.question!r} (datasets.{name}.question)"
            ) from None
        try:
            prompts.append(prompt_messages(question, dataset.prompt))
        except ValueError as exc:
            raise StudyError(f"dataset {name}, {split} row {index}: {exc} (datasets.{name}.prompt)") from None
    return prompts


@dataclass(frozen=True)
class PreparedRow:
    """A row as verl reads it, with the source record it was built from (for the reward's self-check)."""

    split: str
    index: int
    record: dict[str, Any]
    row: dict[str, Any]

    @property
    def ground_truth(self) -> str:
        return str(self.row["reward_model"]["ground_truth"])


def verl_rows(name: str, dataset: Dataset, splits: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """train and val rows from the source's records per split ('val' absent: held out of train)."""
    return {split: [p.row for p in rows] for split, rows in prepared_rows(name, dataset, splits).items()}


def prepared_rows(name: str, dataset: Dataset, splits: dict[str, list[dict[str, Any]]]) -> dict[str, list[PreparedRow]]:
    """verl_rows, each with its record."""
    prepared = {
        split: list(zip(records, prompts_of(name, dataset, records, split), strict=True))
        for split, records in splits.items()
    }
    if dataset.deduplicate:
        prepared = {split: _unique(pairs) for split, pairs in prepared.items()}
    if "val" not in prepared:
        prepared["train"], prepared["val"] = _held_out(prepared["train"], dataset.held_out or 1)
    return {
        split: [
            PreparedRow(split, i, record, build_row(name, dataset, record, prompt, split, i))
            for i, (record, prompt) in enumerate(prepared[split])
        ]
        for split in ("train", "val")
    }


def _unique(pairs: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> list:
    """The first row of each prompt, in file order."""
    seen: set[str] = set()
    kept = []
    for pair in pairs:
        text = prompt_text(pair[1])
        if text not in seen:
            seen.add(text)
            kept.append(pair)
    return kept


def held_out_count(rows: int, asked: int | None) -> int:
    """How many of `rows` are held out of train: the asked count (1 if none), at most a tenth, at least one."""
    return min(asked or 1, max(1, rows // 10))


def _held_out(pairs: list, count: int) -> tuple[list, list]:
    """A fixed hash order of the prompts, not the file order, decides the held-out slice (at most a
    tenth of the rows); both parts keep the file order."""
    order = sorted(range(len(pairs)), key=lambda i: hashlib.sha256(prompt_text(pairs[i][1]).encode()).digest())
    count = held_out_count(len(pairs), count)
    val, train = set(order[:count]), set(order[count:])
    return [pairs[i] for i in sorted(train)], [pairs[i] for i in sorted(val)]
