"""Finding and ending every process a run started, by a token in their environment.

Ray daemons and workers do not stay in the launcher's process group, but they inherit its
environment; a per-run token there finds them all, also after a crash.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

TOKEN_VAR = "RLVR_RUN_TOKEN"
# An optional prefix for the tokens of this environment's runs, so that whoever starts several
# workflows side by side (two test workers, two studies) can tell their processes apart. It is part
# of the token because Ray and Python retitle their processes, which may overwrite the start of
# /proc/<pid>/environ, while the token, set last, stays readable.
TOKEN_TAG_VAR = "RLVR_RUN_TOKEN_TAG"


def new_token() -> str:
    tag = os.environ.get(TOKEN_TAG_VAR, "")
    return f"{tag}-{uuid.uuid4().hex}" if tag else uuid.uuid4().hex


def processes_with_token(token: str) -> list[int]:
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def end_processes(token: str, grace_s: float = 10.0) -> list[int]:
    """SIGTERM, wait up to grace_s, then SIGKILL; returns the pids that had to be ended."""
    pids = processes_with_token(token)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and processes_with_token(token):
        time.sleep(0.2)
    for pid in processes_with_token(token):
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and processes_with_token(token):
        time.sleep(0.2)
    return pids


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
