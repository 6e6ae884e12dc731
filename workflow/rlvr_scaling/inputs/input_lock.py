"""Locked inputs, as package managers lock versions: the first download of a hub input (the model, a
dataset) resolves its revision (a branch such as `main`) to a commit and writes that commit and the
downloaded files' digests to a lock file in the repository (config/inputs.lock.json); every later
download takes the locked commit, and a file whose content no longer matches its digest stops the
stage, naming the file. Committing the lock is how a study's inputs are frozen: without it the same
config prepares whatever `main` is on the day.

Local inputs (a dataset's files, a model's folder) are locked the same way under the revision
`local`: their first preparation records the files' digests, and a later one refuses a changed file.
Inputs built here (the tiny model, synthetic data: named by a seed) are not locked; they are
reproducible by construction.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.fsutil import json_text, write_text_atomically
from rlvr_scaling.study.config import Study

LOCK_FILE = "config/inputs.lock.json"
# Another lock file (tests; a site that keeps locks apart): a path, relative to the repository.
LOCK_FILE_VAR = "RLVR_INPUTS_LOCK"
LOCAL_SOURCES = {"tiny", "synthetic"}
# The revision and commit under which a local input's files are locked.
LOCAL_REVISION = "local"


def lock_path() -> Path:
    path = Path(os.environ.get(LOCK_FILE_VAR) or LOCK_FILE)
    return path if path.is_absolute() else paths.REPO_ROOT / path


def key(kind: str, source: str) -> str:
    return f"{kind}:{source}"


def read_lock(path: Path | None = None) -> dict[str, Any]:
    path = path or lock_path()
    if not path.exists():
        return {}
    try:
        found = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise StudyError(f"{path} is not a readable inputs lock ({exc}): restore it from git") from exc
    if not isinstance(found, dict) or not isinstance(found.get("inputs"), dict):
        raise StudyError(f"{path} is not an inputs lock (no 'inputs' object): restore it from git")
    return found["inputs"]


def locked_entry(kind: str, source: str, revision: str) -> dict[str, Any] | None:
    """The lock's entry for this input at this revision, or None (not locked yet, or locked at
    another revision: a changed revision in the config is a new input)."""
    entry = read_lock().get(key(kind, source))
    return entry if entry is not None and entry.get("revision") == str(revision) else None


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """The data and model stages run side by side and add to one lock file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.writing"), "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(guard, fcntl.LOCK_UN)


def record(kind: str, source: str, revision: str, commit: str, files: dict[str, str]) -> None:
    """Add this input's entry, unless another writer locked it first at another commit (then the
    download it made is not the locked one: an error, nothing written)."""
    path = lock_path()
    with _exclusive(path):
        inputs = read_lock(path)
        name = key(kind, source)
        earlier = inputs.get(name)
        if earlier is not None and earlier.get("revision") == str(revision) and earlier.get("commit") != commit:
            raise StudyError(
                f"{path}: {name} at revision {revision} was locked at commit {earlier.get('commit')} while this "
                f"download got {commit}; run the stage again (it takes the locked commit)"
            )
        inputs[name] = {"revision": str(revision), "commit": commit, "files": dict(sorted(files.items()))}
        write_text_atomically(path, json_text({"inputs": dict(sorted(inputs.items()))}))


def check_files(kind: str, source: str, entry: dict[str, Any], files: dict[str, str]) -> None:
    """The downloaded files are the locked ones: same names, same digests."""
    locked = entry.get("files", {})
    where = f"{lock_path()} ({key(kind, source)} at commit {entry.get('commit')})"
    for name in sorted(set(locked) | set(files)):
        if name not in files:
            raise StudyError(f"{where} locks the file {name}, which the download no longer has")
        if name not in locked:
            raise StudyError(f"the download has the file {name}, which {where} does not lock")
        if files[name] != locked[name]:
            raise StudyError(
                f"the file {name} does not match {where}: sha256 {files[name]}, locked {locked[name]}. "
                "The source changed under the locked commit; delete the entry only if the new content is meant"
            )


def unlocked_inputs(study: Study) -> list[str]:
    """The downloaded or local inputs of this study that the lock does not hold yet, e.g.
    'model Qwen/Qwen3-8B@main', 'dataset ./data/mine.jsonl@local'."""
    wanted = []
    model = study.config.model
    if model.source == "local":
        wanted.append(("model", str(model.path), LOCAL_REVISION))
    elif model.source not in LOCAL_SOURCES:
        wanted.append(("model", model.name, str(model.revision)))
    for name in study.datasets:
        spec = study.dataset(name)
        if spec.kind == "local":
            wanted.append(("dataset", spec.source, LOCAL_REVISION))
        elif spec.kind == "hub":
            wanted.append(("dataset", spec.source, str(spec.revision)))
    return [
        f"{kind} {source}@{revision}" for kind, source, revision in wanted if not locked_entry(kind, source, revision)
    ]
