"""What a run records about where and with what it ran."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from rlvr_scaling import __version__, paths

PACKAGES = ("verl", "torch", "ray", "transformers", "vllm", "megatron-core", "snakemake")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version(), "rlvr-scaling": __version__}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(repo: Path = paths.REPO_ROOT) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        )
        dirty = subprocess.run(
            # A new module not yet committed makes the tree as unclean as an edited one.
            ["git", "-C", str(repo), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def host_facts() -> dict[str, object]:
    return {"host": socket.gethostname(), "platform": platform.platform(), "executable": sys.executable}
