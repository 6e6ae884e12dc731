"""Files written whole or not at all, files rewritten only when their content changes, file digests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def write_text_atomically(path: Path, text: str) -> None:
    """A reader (or a kill in the middle) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(text)
    tmp.replace(path)


def write_json(path: Path, value: Any) -> None:
    write_text_atomically(path, json.dumps(value, indent=1, default=str) + "\n")


def write_text_if_changed(path: Path, text: str) -> str:
    """Rewrite only a changed file: its time stamp is what Snakemake's mtime trigger reads."""
    if not path.exists() or path.read_text() != text:
        write_text_atomically(path, text)
    return str(path)


def sha256_file(path: Path) -> str:
    """A file's sha256, read in pieces (base images are tens of GB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()
