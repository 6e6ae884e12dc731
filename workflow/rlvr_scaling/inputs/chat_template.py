"""The model's chat template: the one its tokenizer brings, or the one the study supplies
(`model.chat_template`: a Jinja file or a named common template), checked before anything runs (#61).

verl renders every prompt with the tokenizer's template (apply_chat_template); a tokenizer without
one failed only inside verl, a minute into the first run, the cause line 972 of its console. A model
folder with neither its own template nor a supplied one is refused by `plan`, the preview, Snakemake's
start and the data stage; a supplied one is written into the prepared model folder
(`chat_template.jinja`, which transformers reads over tokenizer_config.json's key), recorded in the
model's manifest and used by the preview and verl alike.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.study.sections import Model

JINJA_FILE = "chat_template.jinja"
# ChatML, as Qwen's models write it (<|im_start|>role ... <|im_end|>), with the generation prompt verl
# asks for; the tiny model's template (inputs/model.py) is the same.
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
NAMED = {"chatml": CHATML}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def own_template(folder: Path) -> str | None:
    """The template a model folder brings: chat_template.jinja, else tokenizer_config.json's key."""
    if (folder / JINJA_FILE).is_file():
        return (folder / JINJA_FILE).read_text()
    config_file = folder / "tokenizer_config.json"
    try:
        template = json.loads(config_file.read_text()).get("chat_template") if config_file.is_file() else None
    except (ValueError, UnicodeDecodeError):
        return None
    return template if isinstance(template, str) and template.strip() else None


def supplied_template(model: Model, cwd: Path | None = None) -> tuple[str, str] | None:
    """(the template text, where it comes from) of model.chat_template; ConfigError naming the key."""
    given = model.chat_template
    if given is None:
        return None
    if given in NAMED:
        return NAMED[given], f"the named template {given!r}"
    path = Path(given).expanduser()
    path = path if path.is_absolute() else (cwd or Path.cwd()) / path
    if not path.is_file():
        raise ConfigError(
            "model.chat_template",
            given,
            f"a Jinja file of the template (looked for {path}) or a named template: {', '.join(sorted(NAMED))}",
        )
    text = path.read_text()
    if "messages" not in text:
        raise ConfigError("model.chat_template", given, f"a chat template renders `messages`; {path} never names it")
    return text, str(path)


def check_template(model: Model, folder: Path, cwd: Path | None = None) -> None:
    """StudyError for a model folder without a template when the study supplies none."""
    if supplied_template(model, cwd) is None and own_template(folder) is None:
        raise StudyError(
            f"model: {folder} has no chat template (no {JINJA_FILE}, no chat_template in tokenizer_config.json), "
            "and verl renders every prompt with it (apply_chat_template): the run would fail in verl's start-up. "
            f"Set model.chat_template to a Jinja file or to a named template ({', '.join(sorted(NAMED))}), "
            "or use the model's instruct (chat) version"
        )


def template_record(model: Model, cwd: Path | None = None) -> dict[str, str] | None:
    """What the model's manifest and settings keep of a supplied template: where from, its digest."""
    supplied = supplied_template(model, cwd)
    if supplied is None:
        return None
    text, source = supplied
    return {"from": source, "sha256": sha256_text(text)}


def install_template(model: Model, folder: Path, cwd: Path | None = None) -> dict[str, str] | None:
    """Write a supplied template into a prepared model folder (over the model's own); refuse a folder
    left without one. The manifest's record of it, or None when the model's own serves."""
    supplied = supplied_template(model, cwd)
    if supplied is None:
        check_template(model, folder, cwd)
        return None
    text, source = supplied
    # transformers reads chat_template.jinja over tokenizer_config.json's key: the model's own files
    # stay as they were fetched (their digests are the lock's).
    (folder / JINJA_FILE).write_text(text)
    return {"from": source, "sha256": sha256_text(text), "file": JINJA_FILE}
