"""The base image's package set as the resolve check sees it (container.base_packages): the list read
and checked, the packages the build keeps (add-verl.sh's keep line), the base's Python found on this
machine, and an empty environment where each base package is an installed stub (its metadata only).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.image_identity import ADD_VERL

PYTHON_LINE = re.compile(r"^#\s*python\s+(\d+)\.(\d+)(?:\.\d+)?\s*$")


KEEP_LINE = re.compile(r"^keep='(.+)'$", re.MULTILINE)


# The base's packages that the build keeps and that everything added must fit: a base list without
# one of them is refused.
REQUIRED_BASE_PACKAGES = ("torch", "numpy")


# Where this machine's pip configuration would add indexes, wheel folders or constraints of its own.
PIP_SETTINGS = ("PIP_CONFIG_FILE", "PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class BasePackages:
    path: Path
    python: tuple[int, int]
    versions: dict[str, str]  # normalized name -> version

    @property
    def rocm(self) -> bool:
        return "rocm" in self.versions.get("torch", "")


def read_base_packages(path: Path) -> BasePackages:
    """A `pip list --format=freeze` file with a `# python X.Y[.Z]` line for the base's Python."""
    python = None
    versions = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = PYTHON_LINE.match(line.strip())
        if match:
            python = (int(match.group(1)), int(match.group(2)))
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        name, sep, version = text.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ConfigError("container.base_packages", f"{path}:{number}: {text}", "NAME==VERSION lines")
        versions[normalized(name.strip())] = version.strip()
    if python is None:
        raise ConfigError("container.base_packages", str(path), "a '# python X.Y' line naming the base's Python")
    # What the build keeps and every other package is resolved against: without their versions pip
    # would pick its own (a numpy 1.x base under a numpy 2 resolve fails inside the build job).
    missing = [name for name in REQUIRED_BASE_PACKAGES if name not in versions]
    if missing:
        raise ConfigError(
            "container.base_packages",
            str(path),
            f"a line NAME==VERSION for each of {', '.join(REQUIRED_BASE_PACKAGES)} (missing: {', '.join(missing)}): "
            "the base's own `pip list --format=freeze`",
        )
    return BasePackages(path, python, versions)


def kept_pattern() -> re.Pattern[str]:
    """add-verl.sh's own pattern of what the base keeps (`keep=` line), as its grep -iE applies it."""
    match = KEEP_LINE.search((paths.REPO_ROOT / ADD_VERL).read_text())
    if match is None:
        raise StudyError(f"{ADD_VERL} has no keep='...' line")
    return re.compile(match.group(1), re.IGNORECASE)


def find_python(version: tuple[int, int]) -> str:
    """An interpreter of the base's Python version: RLVR_RESOLVE_PYTHON, python3.X on PATH, or a pyenv
    one. Each candidate is asked its version (a pyenv shim may answer for another)."""
    wanted = f"{version[0]}.{version[1]}"
    candidates = [os.environ.get("RLVR_RESOLVE_PYTHON"), shutil.which(f"python{wanted}")]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{wanted}.*/bin/python{wanted}")))
    candidates.append(f"/usr/bin/python{wanted}")
    for candidate in filter(None, candidates):
        try:
            answer = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError:
            continue
        if answer.returncode == 0 and answer.stdout.strip() == wanted:
            return candidate
    raise StudyError(
        f"the resolve check needs a Python {wanted} interpreter (the base's): none found as python{wanted}, "
        f"in ~/.pyenv/versions/ or /usr/bin; name one with RLVR_RESOLVE_PYTHON"
    )


def write_stubs(site_packages: Path, versions: dict[str, str], requires: dict[str, list[str]] | None = None) -> None:
    """One installed distribution per package: its metadata (with its requirements where known),
    nothing else."""
    requires = requires or {}
    for name, version in versions.items():
        folder = site_packages / f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
        folder.mkdir(parents=True)
        lines = "".join(f"Requires-Dist: {line}\n" for line in requires.get(name, []))
        (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{lines}\n")
        (folder / "INSTALLER").write_text("rlvr-scaling resolve check\n")
        (folder / "RECORD").write_text("".join(f"{folder.name}/{f},,\n" for f in ("METADATA", "INSTALLER", "RECORD")))


def pip_environment() -> dict[str, str]:
    """pip as a user's clean machine runs it: the package index only (no site config's wheel folders,
    extra indexes or constraints, which would change the answer)."""
    env = {key: value for key, value in os.environ.items() if key not in PIP_SETTINGS}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def base_file_of(study: Study) -> Path:
    container = study.require_container()
    if not container.base_packages:
        raise ConfigError(
            "container.base_packages",
            None,
            "the base image's package list (a file in the repository) for the resolve check",
            f"site '{study.site_name}'",
        )
    return paths.REPO_ROOT / container.base_packages


def kept_of(base: BasePackages) -> dict[str, str]:
    pattern = kept_pattern()
    return {name: version for name, version in base.versions.items() if pattern.match(f"{name}==")}


def stub_environment(interpreter: str, folder: Path, versions: dict[str, str], requires: dict[str, list[str]]) -> Path:
    """An empty environment of the base's Python in which `versions` are installed (stubs): its python."""
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    write_stubs(Path(site_packages), versions, requires)
    return python


# On a ROCm base these are CUDA builds or need one (nvcc, CUDA libraries): none can sit on it.
CUDA_SIDE = re.compile(
    r"^(nvidia-.*|cupy.*|cuda-.*|flashinfer.*|triton|flash-attn|transformer-engine.*|fast-hadamard-transform"
    r"|mamba-ssm|causal-conv1d|apex|deep-ep)$"
)


@dataclass
class Verdict:
    site: str
    base: str
    python: str
    requested: list[str]
    kept: dict[str, str]
    adds: list[dict[str, str]] = field(default_factory=list)
    upgrades: list[dict[str, str]] = field(default_factory=list)  # base packages pip would replace
    problems: list[str] = field(default_factory=list)
    # Per kept package: where its requirements came from (the wheel's URL and sha256 on the index, via
    # the snapshot file), the lines honoured and those dropped as the CUDA build's, or why there are none.
    requirements: dict[str, dict[str, Any]] = field(default_factory=dict)
    snapshot: str | None = None
    notes: list[str] = field(default_factory=list)  # what was judged and needs no change

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "ok": self.ok}
