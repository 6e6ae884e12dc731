"""Files and directories written whole or not at all, file digests, the one JSON layout, paths named
relative to the study's root."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once, before any thread starts: mkstemp makes files 0600, a written file gets open()'s mode.
UMASK = _read_umask()


def write_text_atomically(path: Path, text: str) -> None:
    """A reader (or a kill in the middle) sees the old file or the new one, never half of one. Each
    writer has a partial file of its own (two writers of one output never share one); one that cannot
    be written whole (a full disk) is removed, and the error names the file, with the old one intact."""
    from rlvr_scaling.errors import StudyError

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o666 & ~UMASK)
        tmp.replace(path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise StudyError(f"cannot write {path}: {error.strerror or error}; the file there is unchanged") from None


# The one JSON layout of every record the pipeline writes (files, bundle members, stdout).
JSON_LAYOUT: dict[str, Any] = {"indent": 1, "default": str}


def json_text(value: Any) -> str:
    return json.dumps(value, **JSON_LAYOUT) + "\n"


def print_json(value: Any, stream: IO[str]) -> None:
    """Written piece by piece, as a pipe's reader takes it: a reader that has gone is noticed (a single
    large write into a closed pipe can end without an error in CPython, the output silently cut)."""
    json.dump(value, stream, **JSON_LAYOUT)
    stream.write("\n")


def write_json(path: Path, value: Any) -> None:
    write_text_atomically(path, json_text(value))


def relative_to_root(path: Path, root: Path) -> str:
    """How a record names a file of the study: relative to the study's root (the directory holding
    results/) when it is under it, so the record holds wherever the study is read from; else absolute.
    A relative `path` is relative to the current directory, as on a command line."""
    absolute = Path(os.path.abspath(path))
    base = Path(os.path.abspath(root))
    return str(absolute.relative_to(base)) if absolute.is_relative_to(base) else str(absolute)


def sha256_file(path: Path) -> str:
    """A file's sha256, read in pieces (base images are tens of GB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def staged_directory(output: Path) -> Iterator[Path]:
    """Yield a fresh directory next to `output`; on success it replaces `output`, on failure it goes."""
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if output.exists():
        shutil.rmtree(output)
    staging.rename(output)
