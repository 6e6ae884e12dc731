"""The kept packages' own requirements (vLLM's, TransformerEngine's... at the base's versions), from
their published metadata on the package index, less what only their CUDA builds need; kept as a
snapshot beside the base list (container.base_packages, `.requires.json`), made by
`rlvr-scaling resolve-check --write-requires`, so that the resolve check honours them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.inputs.base_packages import (
    CUDA_SIDE,
    BasePackages,
    Verdict,
    base_file_of,
    find_python,
    kept_of,
    normalized,
    pip_environment,
    read_base_packages,
)
from rlvr_scaling.study.config import Study

# The CUDA build's own requirements in a kept package's published metadata, which its ROCm build does
# not have: vLLM's requirements/cuda.txt (after common.txt: the CUDA wheel's torch pins, FlashInfer,
# CUTLASS DSL...; numba, in both cuda.txt and rocm.txt, stays). Names as the 0.22.1 wheel lists them.
CUDA_BUILD_REQUIREMENTS = {
    "vllm": frozenset(
        {
            "torch", "torchaudio", "torchvision", "flashinfer-python", "flashinfer-cubin", "apache-tvm-ffi",
            "tilelang", "nvidia-cudnn-frontend", "fastsafetensors", "nvidia-cutlass-dsl", "quack-kernels",
            "tokenspeed-mla", "humming-kernels",
        }
    ),
}  # fmt: skip


REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def requires_snapshot(base_file: Path) -> Path:
    """The kept packages' published requirements, next to the base list: <base>.requires.json."""
    return base_file.with_suffix(".requires.json")


def published(version: str) -> str:
    """The index's version of a base build: without its local label (+rocm7.0, +lumi.aif.gfx90a)."""
    return version.split("+", 1)[0]


def requirement_name(line: str) -> str:
    match = REQUIREMENT_NAME.match(line)
    return normalized(match.group(1)) if match else ""


def fetch_requirements(interpreter: str, name: str, version: str, work: Path) -> dict[str, Any]:
    """The Requires-Dist of `name`'s wheel at `version` on the package index, for the base's Python on
    this machine's platform (Linux x86_64, as the sites'): pip reads only the metadata (the index's
    separate metadata file, PEP 658, where it serves one), installs nothing."""
    report = work / f"{name}.json"
    command = [
        sys.executable, "-m", "pip", "--python", interpreter, "install", "--dry-run", "--quiet",
        "--no-deps", "--ignore-installed", "--only-binary=:all:", "--report", str(report), f"{name}=={version}",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env=pip_environment(), timeout=300)
    if result.returncode != 0:
        reason = next(
            (line.removeprefix("ERROR: ") for line in result.stderr.splitlines() if "No matching distribution" in line),
            result.stderr.strip()[-300:],
        )
        return {"published": version, "missing": f"no wheel on the index ({reason})"}
    [item] = json.loads(report.read_text())["install"]
    info = item["download_info"]
    return {
        "published": version,
        "url": info["url"],
        "sha256": info.get("archive_info", {}).get("hashes", {}).get("sha256"),
        "requires_dist": item["metadata"].get("requires_dist", []),
    }


def write_requires(study: Study, base_file: Path | None = None) -> Path:
    """The snapshot of the kept packages' published requirements, next to the base list (network)."""
    base_file = base_file or base_file_of(study)
    base = read_base_packages(base_file)
    interpreter = find_python(base.python)
    pip_version = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    with tempfile.TemporaryDirectory(prefix="rlvr-requires-") as work:
        packages = {
            name: {"base_version": version, **fetch_requirements(interpreter, name, published(version), Path(work))}
            for name, version in kept_of(base).items()
        }
    try:
        shown = base_file.resolve().relative_to(paths.REPO_ROOT)
    except ValueError:
        shown = base_file
    snapshot = {
        "about": (
            f"The published requirements (Requires-Dist) of the packages containers/add-verl.sh keeps from "
            f"the base {shown.name}, each at the base's version without its local label, read from that "
            "version's wheel on the package index (metadata only). The resolve check puts them into its stubs; "
            "on a ROCm base it drops their CUDA-side pieces (rlvr_scaling.inputs.resolve_check)."
        ),
        "command": f"rlvr-scaling resolve-check --site {study.site_name} --write-requires",
        "base_packages": str(shown),
        "index": "https://pypi.org/simple (pip, no site configuration)",
        "python": f"{base.python[0]}.{base.python[1]}",
        "pip": pip_version,
        "made": datetime.now(UTC).strftime("%Y-%m-%d"),
        "packages": packages,
    }
    target = requires_snapshot(base_file)
    target.write_text(json.dumps(snapshot, indent=1) + "\n")
    return target


def kept_requirements(
    snapshot_file: Path, base: BasePackages, kept: dict[str, str], verdict: Verdict
) -> dict[str, list[str]]:
    """The kept packages' requirements the check honours, from the snapshot; on a ROCm base without the
    CUDA build's pieces. Where each came from goes into the verdict."""
    if not snapshot_file.is_file():
        return {}
    verdict.snapshot = str(snapshot_file)
    snapshot = json.loads(snapshot_file.read_text())
    requires = {}
    for name, version in kept.items():
        entry = snapshot.get("packages", {}).get(name)
        if entry is None or entry.get("base_version") != version:
            recorded = entry.get("base_version") if entry else None
            verdict.problems.append(
                f"{name}: the snapshot {snapshot_file.name} records {recorded or 'no version'}, the base list "
                f"{version}: remake it ({snapshot.get('command', 'rlvr-scaling resolve-check --write-requires')})"
            )
            continue
        source = {key: entry.get(key) for key in ("published", "url", "sha256", "missing") if entry.get(key)}
        honoured: list[str] = []
        dropped: list[str] = []
        for line in entry.get("requires_dist", []):
            wanted = requirement_name(line)
            cuda = CUDA_SIDE.match(wanted) or wanted in CUDA_BUILD_REQUIREMENTS.get(name, ())
            (dropped if base.rocm and cuda else honoured).append(line)
        requires[name] = honoured
        verdict.requirements[name] = {
            **source,
            "honoured": len([line for line in honoured if "extra ==" not in line]),
            "dropped": [line for line in dropped if "extra ==" not in line],
        }
    return requires
