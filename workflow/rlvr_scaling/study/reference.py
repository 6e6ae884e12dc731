"""A published study's numbers (config/references/<name>.yaml), read and checked before anything runs."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.study.validate import check_schema
from rlvr_scaling.study.yaml_file import parse_yaml_bytes

REFERENCES_DIR = paths.CONFIG_DIR / "references"
REFERENCE_SCHEMA = paths.SCHEMA_DIR / "reference.schema.yaml"


def reference_path(name: str) -> Path:
    return REFERENCES_DIR / f"{name}.yaml"


def check_reference(document: Any, source: str) -> dict[str, Any]:
    """The document if it is a reference: the schema, then one id per number and relation."""
    check_schema(document, REFERENCE_SCHEMA, source=source)
    seen: set[str] = set()
    for kind in ("numbers", "relations"):
        for position, entry in enumerate(document.get(kind, [])):
            if entry["id"] in seen:
                raise ConfigError(
                    f"{kind}[{position}].id", entry["id"], "each number and relation needs its own id", source
                )
            seen.add(entry["id"])
    return document


def citation_text(reference: dict[str, Any]) -> str:
    """The published study as the reports cite it: title, publisher (and series), date and address,
    each missing one said to be so rather than left out."""
    citation = reference["citation"]
    publisher = citation["publisher"] + (f", {citation['series']}" if citation.get("series") else "")
    published = citation["published"] or "date not on record"
    where = citation["url"] or "address not on record"
    return f'"{reference["title"]}", {publisher}, {published}, {where}'


def load_reference(name: str) -> dict[str, Any]:
    """`study.reference`'s file, checked; a ConfigError naming the key otherwise."""
    path = reference_path(name)
    try:
        content = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        known = sorted(p.stem for p in REFERENCES_DIR.glob("*.yaml"))
        raise ConfigError(
            "study.reference", name, f"it must name a file config/references/<name>.yaml (there: {known})"
        ) from None
    # A copy: the caller may change what it is given, the next caller gets the file's numbers.
    return copy.deepcopy(_checked_reference(name, path, content))


# The plan reads the reference once per run's estimate: a Snakefile's parse read and checked the same
# file 23 times (0.6 of its 1.5 s). Kept by the file's bytes, which are what is checked, so an edited
# file is checked again; a file that fails is never kept (lru_cache keeps only what returns).
@functools.lru_cache(maxsize=8)
def _checked_reference(name: str, path: Path, content: bytes) -> dict[str, Any]:
    try:
        document = parse_yaml_bytes(content, path)
    except StudyError as error:
        raise ConfigError("study.reference", name, f"its file must be a usable YAML file ({error})") from error
    return check_reference(document, f"reference {path.name}")
