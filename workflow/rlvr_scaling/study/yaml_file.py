"""Reading a YAML (or JSON) document the study is made of, bounded: UTF-8, not too deep, no alias that
contains itself, not too many values once aliases are written out. The study's config, its sites and
its published reference (study.reference) are read by it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from rlvr_scaling.errors import StudyError

# Deeper than any config needs (the deepest key of the study is 5 levels): a deeper document is an
# error, not a recursion the checks after it would run out of stack on.
MAX_NESTING = 50
# Far more values than any config has (the study's is about 300): aliases of aliases ("billion
# laughs") would otherwise make every check after reading walk billions of them.
MAX_VALUES = 100_000
# libyaml's parser where PyYAML was built with it: the same values (the same safe constructor), read
# about ten times faster, and every Snakemake start and CLI step reads the config and its schemas.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_text(text: str) -> Any:
    """YAML text read as yaml.safe_load reads it."""
    return yaml.load(text, Loader=SAFE_LOADER)  # noqa: S506 (a safe loader)


def read_yaml(path: Path) -> Any:
    """A YAML file, or a JSON one (the effective config the rules hand to each step) read as JSON:
    YAML 1.1 would read JSON's 1e-05 as text. UTF-8, at most MAX_NESTING levels deep, no alias that
    contains itself: otherwise one line naming the file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise StudyError(f"File not found: {path}") from None
    return parse_yaml_bytes(data, path)


def parse_yaml_bytes(data: bytes, path: Path) -> Any:
    """read_yaml of `path`'s contents, already read."""
    kind = path.suffix.lstrip(".").upper() if path.suffix == ".json" else "YAML"
    too_deep = f"{path} is not a usable {kind} file: nested deeper than {MAX_NESTING} levels"
    try:
        text = data.decode("utf-8")
        document = json.loads(text) if path.suffix == ".json" else load_yaml_text(text)
    except UnicodeDecodeError as exc:
        raise StudyError(f"{path} is not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset {exc.start}") from None
    except RecursionError:  # Python's parser (and json) on a document deeper than the stack
        raise StudyError(too_deep) from None
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        if "maximum nesting depth" in str(exc):  # libyaml's own bound (1000 levels), before ours
            raise StudyError(too_deep) from None
        raise StudyError(f"{path} is not valid {kind}: {exc}") from None
    problem = nesting_problem(document)
    if problem:
        raise StudyError(f"{path} is not a usable {kind} file: {problem}")
    return document


def nesting_problem(document: Any) -> str | None:
    """Why a loaded document cannot be a config: too deep, or an alias that contains itself."""
    stack: list[tuple[Any, int, tuple[int, ...]]] = [(document, 0, ())]
    walked: set[int] = set()  # a value shared by aliases is walked once ("billion laughs")
    while stack:
        value, depth, inside = stack.pop()
        if not isinstance(value, dict | list):
            continue
        if id(value) in inside:
            return "an alias (*name) that refers to the value it is in"
        if depth >= MAX_NESTING:
            return f"nested deeper than {MAX_NESTING} levels"
        if id(value) in walked:
            continue
        walked.add(id(value))
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1, (*inside, id(value))) for child in children)
    sizes: dict[int, int] = {}

    def expanded(value: Any) -> int:
        """Values once every alias is written out, as the checks after this one see them."""
        if not isinstance(value, dict | list):
            return 1
        if id(value) not in sizes:
            children = value.values() if isinstance(value, dict) else value
            sizes[id(value)] = 1 + sum(expanded(child) for child in children)
        return sizes[id(value)]

    if expanded(document) > MAX_VALUES:
        return f"more than {MAX_VALUES:,} values once its aliases are written out"
    return None
