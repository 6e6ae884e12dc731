"""A study of one's own, tried on a small site first (the local site's `toy_scale`, docs/own-study.md).

The site's study_overrides scale down the datasets it names (the default study's gsm8k and
dapo_math). A user's own datasets it cannot name; `toy_scale` is the rule that shrinks them instead,
keeping what defines them (source, fields, answer rule, prompt, reward):

- each dataset's max_prompt_length, max_response_length and token budget at most the rule's (the
  budget at least one whole trajectory), without offload; its sweep its points of at most the rule's
  largest, or the rule's when it has none; its pinned selection dropped (the sweep chooses, as it
  would there);
- the model: a local model folder whose matmul parameters (config.json) are at most
  `max_model_parameters` is kept, as its max_context; any other model (a hub model to download, a
  large folder) becomes the site's own (study_overrides.model), replacing the user's model section
  whole, so no key of the user's model (its path) is left over a model it does not describe.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr_scaling.study.model_shape import ModelShape
from rlvr_scaling.study.section_base import Section


@dataclass(frozen=True)
class ToyScale(Section):
    """The rule, as a site file gives it (applied to the config mapping before it is typed)."""

    max_prompt_length: int = 0
    max_response_length: int = 0
    token_budget: int = 0
    sweep: list[int] = field(default_factory=list)
    seconds_per_trajectory: float = 0.0
    max_model_parameters: int = 0


def shrunk_dataset(entry: dict[str, Any], toy: dict[str, Any]) -> dict[str, Any]:
    """The overrides that take one of the user's datasets to the rule's scale: the rule's values are caps,
    so a dataset already that small keeps its own."""
    prompt = min(int(entry.get("max_prompt_length") or toy["max_prompt_length"]), int(toy["max_prompt_length"]))
    response = min(int(entry.get("max_response_length") or toy["max_response_length"]), int(toy["max_response_length"]))
    memory = _mapping(entry.get("memory"))
    budget = min(int(memory.get("token_budget") or toy["token_budget"]), int(toy["token_budget"]))
    largest = max(toy["sweep"])
    sweep = [p for p in entry.get("sweep") or [] if isinstance(p, int) and p <= largest] or list(toy["sweep"])
    return {
        "max_prompt_length": prompt,
        "max_response_length": response,
        # No offload here: a CPU engine has no device memory to free.
        "memory": {"offload": False, "token_budget": max(budget, prompt + response)},
        "sweep": sweep,
        "estimate": {"seconds_per_trajectory": float(toy["seconds_per_trajectory"])},
    }


def model_parameters(model: dict[str, Any], cwd: Path | None = None) -> int | None:
    """A local model folder's matmul parameters from its config.json; None: not a readable local model."""
    if model.get("source") != "local" or not isinstance(model.get("path"), str):
        return None
    folder = Path(model["path"]).expanduser()
    folder = folder if folder.is_absolute() else (cwd or Path.cwd()) / folder
    try:
        shape = ModelShape.from_hf_config(json.loads((folder / "config.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return shape.matmul_params()


def keeps_model(user: dict[str, Any], toy: dict[str, Any], cwd: Path | None = None) -> bool:
    model = user.get("model")
    parameters = model_parameters(model, cwd) if isinstance(model, dict) else None
    return parameters is not None and parameters <= int(toy["max_model_parameters"])


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def toy_overrides(
    toy: dict[str, Any] | None, overrides: dict[str, Any], user: dict[str, Any], cwd: Path | None = None
) -> dict[str, Any]:
    """The site's study_overrides with the rule applied to the user's datasets the site does not name
    and to the user's model; unchanged without a rule."""
    if not toy:
        return overrides
    extended = copy.deepcopy(overrides)
    datasets = _mapping(user.get("datasets"))
    named = extended.setdefault("datasets", {})
    for name, entry in datasets.items():
        if name not in named and isinstance(entry, dict):
            named[name] = shrunk_dataset(entry, toy)
    pinned = _mapping(user.get("selection"))
    if any(value is not None for name, value in pinned.items() if name in datasets):
        extended["selection"] = {name: None for name in pinned if name in datasets}
    if keeps_model(user, toy, cwd):
        extended.pop("model", None)
    return extended


def replaces_model_whole(config: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A site model that names its source is another model: the user's model keys go with it."""
    model = overrides.get("model")
    if isinstance(model, dict) and "source" in model:
        config = {**config, "model": copy.deepcopy(model)}
    return config
