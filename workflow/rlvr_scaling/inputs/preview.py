"""`rlvr-scaling data-preview`: a dataset's prepared rows as the model will see them, before any run.

For a few training rows: the prompt with the model's chat template applied (as verl's dataset renders
it: the template of the model's tokenizer, add_generation_prompt on), the ground truth, and the
reward's score of the row's own reference solution; then the self-check over every row and the
ground-truth warnings the data stage records (inputs.self_check). The rows are built in memory by the
data stage's own code: nothing is written and nothing is locked (a hub dataset is downloaded).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.inputs.chat_template import check_template, own_template, supplied_template
from rlvr_scaling.inputs.data import load_dataset
from rlvr_scaling.inputs.model import CHAT_TEMPLATE, local_model_path
from rlvr_scaling.inputs.rows import PreparedRow
from rlvr_scaling.inputs.self_check import (
    Scorer,
    load_scorer,
    reference_solution,
    score_row,
    self_check_record,
    summary_line,
)
from rlvr_scaling.study.config import Study

# Longest prompt shown whole; a longer one keeps its start and its end.
SHOWN_CHARACTERS = 1200


def chat_template(study: Study, root: Path) -> tuple[str | None, dict[str, Any], str]:
    """(the model's chat template, its tokenizer's special tokens, where it was read); None: not on disk."""
    model = study.config.model
    supplied = supplied_template(model, root)
    if model.source == "tiny":
        return CHAT_TEMPLATE, {}, "the tiny model's (inputs/model.py)"
    if model.source == "local":
        folder = local_model_path(str(model.path), root)
    else:  # where the model stage puts the download
        folder = paths.model_dir(root, study.site_name, study.model_folder)
    config_file = folder / "tokenizer_config.json"
    if not config_file.is_file():
        if supplied:
            return supplied[0], {}, f"model.chat_template: {supplied[1]}"
        return None, {}, f"{folder} (no tokenizer_config.json yet: the model stage downloads it)"
    settings = json.loads(config_file.read_text())
    tokens = {k: v for k, v in settings.items() if k.endswith("_token") and isinstance(v, str)}
    if supplied:
        return supplied[0], tokens, f"model.chat_template: {supplied[1]}"
    check_template(model, folder, root)
    return own_template(folder), tokens, str(folder)


def render_prompt(messages: list[dict[str, Any]], template: str | None, tokens: dict[str, Any]) -> str:
    """The text the model receives: the template rendered as transformers' apply_chat_template does
    (a sandboxed Jinja with trimmed blocks); without a template, the messages by role."""
    if template is None:
        return "\n".join(f"[{m['role']}] {m['content']}" for m in messages)
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = raise_exception
    return environment.from_string(template).render(messages=messages, add_generation_prompt=True, **tokens)


def _shortened(text: str) -> str:
    if len(text) <= SHOWN_CHARACTERS:
        return text
    half = SHOWN_CHARACTERS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters ...]\n{text[-half:]}"


def _indented(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines() or [""])


def row_lines(
    name: str, study: Study, prepared: PreparedRow, scorer: Scorer | None, template: tuple[str | None, dict]
) -> list[str]:
    spec = study.dataset(name)
    prompt = render_prompt(list(prepared.row["prompt"]), *template)
    solution = reference_solution(prepared.record, spec)
    scored = "not scored here"
    if scorer is not None:
        score, error = score_row(scorer, name, spec, prepared)
        scored = error or f"{score:g}"
    return [
        f"  {prepared.split} row {prepared.index}:",
        "   prompt as the model receives it:",
        _indented(_shortened(prompt)),
        f"   ground truth: {prepared.ground_truth!r}",
        f"   reference solution: ...{solution[-100:]!r} -> reward {scored} (full: {spec.self_check.full_score:g})",
    ]


def preview(study: Study, names: list[str], count: int, root: Path) -> list[str]:
    """The preview's lines for each named dataset."""
    template, tokens, where = chat_template(study, root)
    lines = [f"Chat template: {where}" if template else f"Chat template: not found in {where}; messages shown"]
    for name in names:
        loaded = load_dataset(study, name)
        spec = loaded.spec
        scorer, _ = load_scorer(name, spec, loaded.reward_file)
        counts = {split: len(split_rows) for split, split_rows in loaded.rows.items()}
        lines += ["", f"{name} ({spec.source}): {counts['train']} train rows, {counts['val']} val rows"]
        for prepared in loaded.rows["train"][:count]:
            lines += row_lines(name, study, prepared, scorer, (template, tokens))
        check = self_check_record(name, spec, loaded.all_rows(), loaded.reward_file)
        lines.append(f"  self-check: {summary_line(name, check)}")
        for failing in check.get("failing", []):
            lines.append(
                f"    fails: {failing['split']} row {failing['index']}: ground truth {failing['ground_truth']!r}, "
                f"reference ...{failing['reference'][-60:]!r} -> {failing.get('error') or failing['score']}"
            )
        if check["ran"] and check["share"] < check["min_share"]:
            lines.append(f"  the data stage will refuse it: below self_check.min_share = {check['min_share']:g}")
        lines += [f"  warning: {warning}" for warning in check["warnings"]]
    return lines
