"""Reading the sweep's selection artifacts (results/selection/<dataset>.json)."""

from __future__ import annotations

import json
from pathlib import Path

from . import paths
from .errors import StudyError


def read_selection(root: Path, dataset: str) -> int | None:
    path = paths.selection_file(root, dataset)
    if not path.exists():
        return None
    return read_selection_file(path)


def read_selection_file(path: Path) -> int:
    try:
        return int(json.loads(path.read_text())["selected"]["prompts"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StudyError(f"{path} is not a selection artifact ({exc}); delete it to recompute the selection") from None


def read_selections(root: Path, datasets: list[str]) -> dict[str, int | None]:
    return {dataset: read_selection(root, dataset) for dataset in datasets}
