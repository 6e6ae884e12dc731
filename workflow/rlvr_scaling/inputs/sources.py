"""Where a dataset's records come from: local files (parquet, JSONL, JSON), or files of a hub
repository at a commit. Reading a file gives records (one mapping per row); checking one reads only
its first row (parquet: its schema), so the plan can check a large file quickly.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any

from rlvr_scaling.errors import StudyError
from rlvr_scaling.study.sections import Dataset

SUFFIXES = (".parquet", ".jsonl", ".json")
GLOB_CHARACTERS = set("*?[")


def local_root(dataset: Dataset, cwd: Path | None = None) -> Path:
    """The file or folder a local source names: relative to the working directory, ~ expanded."""
    path = Path(dataset.source).expanduser()
    return path if path.is_absolute() else (cwd or Path.cwd()) / path


def is_glob(pattern: str) -> bool:
    return bool(GLOB_CHARACTERS & set(pattern))


def matching(names: list[str], pattern: str) -> list[str]:
    """The names (paths inside a repository or folder) a file name or glob selects, sorted."""
    if not is_glob(pattern):
        return [pattern] if pattern in names else []
    return sorted(name for name in names if fnmatch.fnmatchcase(name, pattern))


def local_split_files(name: str, dataset: Dataset, cwd: Path | None = None) -> dict[str, list[Path]]:
    """Per split that has files (train, and val unless held out), the local files it reads;
    StudyError naming the key for a path that is not there or selects nothing."""
    root = local_root(dataset, cwd)
    key = f"datasets.{name}"
    if not root.exists():
        raise StudyError(f"{key}.source: {dataset.source!r} does not exist (looked for {root})")
    wanted = {split: getattr(dataset.files, split) for split in ("train", "val")}
    if root.is_file():
        if wanted["train"] is not None:
            raise StudyError(
                f"{key}.files.train: the source {dataset.source!r} is one file; files.train names a file in a folder"
            )
        found: dict[str, list[Path]] = {"train": [root]}
        if wanted["val"] is not None:
            val = Path(wanted["val"]).expanduser()
            val = val if val.is_absolute() else root.parent / val
            if not val.is_file():
                raise StudyError(f"{key}.files.val: {wanted['val']!r} does not exist (looked for {val})")
            found["val"] = [val]
        return found
    if wanted["train"] is None:
        raise StudyError(
            f"{key}.files.train: the source {dataset.source!r} is a folder: name its training file or glob"
        )
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    found = {}
    for split, pattern in wanted.items():
        if pattern is None:
            continue
        selected = matching(names, pattern)
        if not selected:
            raise StudyError(f"{key}.files.{split}: {pattern!r} selects no file in {root}")
        found[split] = [root / selected_name for selected_name in selected]
    return found


def file_kind(path: Path) -> str:
    for suffix in SUFFIXES:
        if path.name.endswith(suffix):
            return suffix.lstrip(".")
    raise StudyError(f"{path}: not a dataset file this stage reads (its name must end in {', '.join(SUFFIXES)})")


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every row of a parquet, JSONL or JSON (a list of objects) file; StudyError naming the file and
    the line for one that does not parse."""
    kind = file_kind(path)
    if kind == "parquet":
        try:
            import pandas as pd

            return pd.read_parquet(path).to_dict("records")  # type: ignore[return-value]  # parquet column names are str; pandas-stubs says Hashable
        except (OSError, ValueError) as exc:
            raise StudyError(f"{path} is not a readable parquet file: {str(exc).splitlines()[0]}") from None
    text = _text(path)
    if kind == "jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                rows.append(_json_object(path, line, f"line {number}"))
        return rows
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StudyError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(document, list) or not all(isinstance(row, dict) for row in document):
        raise StudyError(f"{path}: a JSON dataset file must be a list of objects, one per row")
    return document


def first_record(path: Path) -> dict[str, Any]:
    """The first row (parquet: its columns, nested ones as mappings), to check fields cheaply."""
    kind = file_kind(path)
    if kind == "parquet":
        try:
            import pyarrow.parquet as pq

            return _schema_record(pq.read_schema(path))
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise StudyError(f"{path} is not a readable parquet file: {str(exc).splitlines()[0]}") from None
    if kind == "jsonl":
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                line = _decoded(path, raw)
                if line.strip():
                    return _json_object(path, line, f"line {number}")
        raise StudyError(f"{path} holds no row")
    rows = read_records(path)
    if not rows:
        raise StudyError(f"{path} holds no row")
    return rows[0]


def _schema_record(schema: Any) -> dict[str, Any]:
    """A parquet schema as a record of placeholders: a struct column a mapping of its fields."""
    import pyarrow as pa

    def value(kind: Any) -> Any:
        if pa.types.is_struct(kind):
            return {kind.field(i).name: value(kind.field(i).type) for i in range(kind.num_fields)}
        return None

    return {item.name: value(item.type) for item in schema}


def _decoded(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StudyError(f"{path} is not UTF-8 text: byte {raw[exc.start]:#04x}") from None


def _text(path: Path) -> str:
    return _decoded(path, path.read_bytes())


def _json_object(path: Path, text: str, where: str) -> dict[str, Any]:
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StudyError(f"{path} {where} is not valid JSON: {exc}") from None
    if not isinstance(row, dict):
        raise StudyError(f'{path} {where} is not an object (one row per line, as {{"question": ...}})')
    return row
