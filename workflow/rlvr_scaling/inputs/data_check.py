"""What the data and model stages will need, checked when a study is planned (`rlvr-scaling plan`,
Snakemake's start-up) instead of at their first job: a local file that is not there, does not parse or
lacks a field the dataset's entry names; a reward file without its function; a local model folder
without its config.json, or with a shorter context than model.max_context. Each is one line naming
the key. Hub inputs are not fetched here (the plan works offline): their files are checked when
they are downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.inputs.chat_template import check_template, supplied_template
from rlvr_scaling.inputs.model import local_model_path
from rlvr_scaling.inputs.reward_file import check_reward_file
from rlvr_scaling.inputs.rows import field_value, prompt_messages
from rlvr_scaling.inputs.sources import first_record, local_split_files
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.sections import Dataset


def check_inputs(study: Study, cwd: Path | None = None) -> None:
    """StudyError for the first input of the study the data or model stage could not use."""
    for name in study.datasets:
        check_dataset(name, study.dataset(name), cwd)
    check_model(study, cwd)


def check_dataset(name: str, dataset: Dataset, cwd: Path | None = None) -> None:
    if dataset.reward.custom:
        check_reward_file(name, dataset, cwd)
    if dataset.kind != "local":
        return
    for split, files in local_split_files(name, dataset, cwd).items():
        for path in files:
            try:
                record = first_record(path)
            except StudyError as exc:
                key = "source" if len(files) == 1 and split == "train" else f"files.{split}"
                raise StudyError(f"datasets.{name}.{key}: {exc}") from None
            wanted = [("question", dataset.question), ("answer", dataset.answer)]
            wanted += [("extra_info", field) for field in dataset.extra_info]
            for key, field in wanted:
                try:
                    value = field_value(record, field)
                except KeyError:
                    raise StudyError(
                        f"datasets.{name}.{key}: the field {field!r} is not in the {split} rows of {path} "
                        f"(their fields: {', '.join(sorted(record))})"
                    ) from None
                if key == "question" and value is not None:
                    try:
                        prompt_messages(value, dataset.prompt)
                    except ValueError as exc:
                        raise StudyError(f"datasets.{name}.prompt: {split} rows of {path}: {exc}") from None


def check_model(study: Study, cwd: Path | None = None) -> None:
    model = study.config.model
    supplied_template(model, cwd)  # a named template that is not one, a file that is not there
    if model.source != "local":
        return
    folder = local_model_path(str(model.path), cwd)
    config_file = folder / "config.json"
    if not folder.is_dir():
        raise StudyError(f"model.path: {model.path!r} is not a folder (looked for {folder})")
    if not config_file.is_file():
        raise StudyError(f"model.path: {folder} has no config.json (a Hugging Face model folder has one)")
    try:
        shape = json.loads(config_file.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise StudyError(f"model.path: {config_file} is not valid JSON ({exc})") from None
    check_template(model, folder, cwd)
    longest = shape.get("max_position_embeddings") if isinstance(shape, dict) else None
    if isinstance(longest, int) and model.max_context > longest:
        raise ConfigError(
            "model.max_context",
            model.max_context,
            f"the model's config.json ({config_file}) allows at most max_position_embeddings = {longest}",
        )
