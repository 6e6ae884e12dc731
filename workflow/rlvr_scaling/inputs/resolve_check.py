"""Whether the site's image install resolves on its base, before any build: the exact install that
containers/add-verl.sh runs (verl with the site's extras and requirements, the base's accelerator
stack kept as constraints), resolved by pip for the base's Python against the base's package set
(container.base_packages) seen as installed.

The base's packages are ROCm (or CUDA) builds that are not on the package index: each becomes an
installed distribution's metadata (a stub .dist-info) in an empty environment of the base's Python
version, so pip leaves them alone where they satisfy a requirement and must replace them where they
do not. Nothing is installed; pip downloads only the metadata of what it would add (range requests).

A problem is named, with the package: a version that does not exist, a conflict with what the base
keeps (torch, vLLM, Megatron-Core, TransformerEngine, numpy...), a CUDA-side package on a ROCm base,
or a package with no wheel for the base's Python (a build from source, which for an accelerator
extension means nvcc).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.image_identity import ADD_VERL

PYTHON_LINE = re.compile(r"^#\s*python\s+(\d+)\.(\d+)(?:\.\d+)?\s*$")
KEEP_LINE = re.compile(r"^keep='(.+)'$", re.MULTILINE)
# Packages published only as source that build without an accelerator toolchain (pure Python).
PURE_PYTHON_SOURCES = {
    "antlr4-python3-runtime": "hydra-core's parser runtime, pure Python, published only as a source archive",
}
# On a ROCm base these are CUDA builds or need one (nvcc, CUDA libraries): none can sit on it.
CUDA_SIDE = re.compile(
    r"^(nvidia-.*|cupy.*|cuda-.*|flashinfer.*|triton|flash-attn|transformer-engine.*|fast-hadamard-transform"
    r"|mamba-ssm|causal-conv1d|apex|deep-ep)$"
)
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

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "ok": self.ok}


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


def write_stubs(site_packages: Path, base: BasePackages) -> None:
    """One installed distribution per base package: its metadata, nothing else."""
    for name, version in base.versions.items():
        folder = site_packages / f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
        folder.mkdir(parents=True)
        (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
        (folder / "INSTALLER").write_text("rlvr-scaling resolve check\n")
        (folder / "RECORD").write_text("".join(f"{folder.name}/{f},,\n" for f in ("METADATA", "INSTALLER", "RECORD")))


def requested(study: Study) -> list[str]:
    """What add-verl.sh installs for this site (containers/verl-venv.def.in's %post)."""
    container = study.require_container()
    extras = ",".join(container.verl_extras)
    verl = f"verl[{extras}]=={study.config.software.verl}" if extras else f"verl=={study.config.software.verl}"
    return [verl, *container.requirements]


def pip_environment() -> dict[str, str]:
    """pip as a user's clean machine runs it: the package index only (no site config's wheel folders,
    extra indexes or constraints, which would change the answer)."""
    env = {key: value for key, value in os.environ.items() if key not in PIP_SETTINGS}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def pip_problems(stderr: str, stdout: str) -> list[str]:
    """pip's own reasons, each naming the package: a version that does not exist, a conflict, a
    package that had to be built from source to learn its requirements (and who asked for it)."""
    # pip writes a conflict's explanation to stdout, its errors to stderr.
    lines = [line.strip() for line in (stdout + "\n" + stderr).splitlines()]
    asked_by = dict(re.findall(r"^Collecting ([A-Za-z0-9_.\-]+)\S* \(from ([^)]+)\)", stdout, re.MULTILINE))
    found = []
    for index, line in enumerate(lines):
        if line.startswith("The conflict is caused by:"):
            cause = []
            for item in lines[index + 1 : index + 8]:
                if not item or item.startswith(("Additionally", "To fix this")):
                    break
                cause.append(item)
            found.append("conflict: " + "; ".join(cause))
        elif line.startswith("ERROR:") and not line.startswith(("ERROR: ResolutionImpossible", "ERROR: Ignored")):
            failed = re.match(r"ERROR: Failed to build '([^']+)'", line)
            if failed:
                parent = asked_by.get(failed.group(1))
                line += " (no wheel: a build from source" + (f", required by {parent})" if parent else ")")
            found.append(line.removeprefix("ERROR: "))
    return found or [stderr.strip()[-800:]]


def judge(report: dict[str, Any], base: BasePackages, kept: dict[str, str], verdict: Verdict) -> None:
    for item in sorted(report.get("install", []), key=lambda i: normalized(i["metadata"]["name"])):
        name, version = normalized(item["metadata"]["name"]), item["metadata"]["version"]
        url = item["download_info"]["url"]
        kind = "wheel" if url.endswith(".whl") else "source"
        if name in base.versions:
            verdict.upgrades.append({"name": name, "base": base.versions[name], "new": version, "kind": kind})
            if name in kept:
                verdict.problems.append(f"{name}: would replace the base's {kept[name]} with {version} from the index")
        else:
            verdict.adds.append({"name": name, "version": version, "kind": kind})
        if base.rocm and CUDA_SIDE.match(name):
            verdict.problems.append(f"{name} {version}: a CUDA-side package, which cannot sit on this ROCm base")
        elif kind == "source" and name not in PURE_PYTHON_SOURCES:
            verdict.problems.append(
                f"{name} {version}: no wheel for Python {verdict.python}, only a source archive to build ({url})"
            )


def resolve_check(study: Study, base_file: Path | None = None, timeout_s: float = 900) -> Verdict:
    container = study.require_container()
    if base_file is None:
        if not container.base_packages:
            raise ConfigError(
                "container.base_packages",
                None,
                "the base image's package list (a file in the repository) for the resolve check",
                f"site '{study.site_name}'",
            )
        base_file = paths.REPO_ROOT / container.base_packages
    if not base_file.is_file():
        raise ConfigError("container.base_packages", str(base_file), "an existing file (`pip list --format=freeze`)")
    base = read_base_packages(base_file)
    pattern = kept_pattern()
    kept = {name: version for name, version in base.versions.items() if pattern.match(f"{name}==")}
    verdict = Verdict(
        site=study.site_name,
        base=str(base_file),
        python=f"{base.python[0]}.{base.python[1]}",
        requested=requested(study),
        kept=kept,
    )
    interpreter = find_python(base.python)
    with tempfile.TemporaryDirectory(prefix="rlvr-resolve-") as work:
        environment = Path(work) / "base"
        subprocess.run([interpreter, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=120)
        site_packages = subprocess.run(
            [str(environment / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        write_stubs(Path(site_packages), base)
        constraints = Path(work) / "keep.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in kept.items()))
        lock = ["--constraint", str(paths.REPO_ROOT / container.constraints)] if container.constraints else []
        report = Path(work) / "report.json"
        command = [
            sys.executable, "-m", "pip", "--python", str(environment / "bin" / "python"),
            "install", "--dry-run", "--report", str(report), "--progress-bar", "off",
            # Metadata by HTTP range requests: the index serves no separate metadata files, and a whole
            # wheel (a CUDA torch: gigabytes) would be downloaded only to read it.
            "--use-feature=fast-deps",
            "--constraint", str(constraints), *lock, *verdict.requested,
        ]  # fmt: skip
        try:
            result = subprocess.run(command, capture_output=True, text=True, env=pip_environment(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            verdict.problems.append(f"pip did not resolve within {timeout_s:.0f} s")
            return verdict
        if result.returncode != 0:
            verdict.problems += pip_problems(result.stderr, result.stdout)
            return verdict
        judge(json.loads(report.read_text()), base, kept, verdict)
    return verdict


def verdict_text(verdict: Verdict) -> str:
    lines = [
        f"site {verdict.site}: {' '.join(verdict.requested)} on {Path(verdict.base).name} (Python {verdict.python})",
        f"kept from the base: {', '.join(f'{n} {v}' for n, v in verdict.kept.items()) or 'nothing'}",
    ]
    if verdict.adds or verdict.upgrades:
        lines.append(f"adds {len(verdict.adds)} packages; replaces {len(verdict.upgrades)} of the base's:")
        lines += [f"  {u['name']} {u['base']} -> {u['new']}" for u in verdict.upgrades]
        added = {a["name"]: a["version"] for a in verdict.adds}
        lines += [f"  + {name} {added[name]}" for name in ("verl", "mbridge", "megatron-bridge") if name in added]
    lines += [f"PROBLEM: {problem}" for problem in verdict.problems]
    lines.append("verdict: resolves" if verdict.ok else f"verdict: does not resolve ({len(verdict.problems)} problems)")
    # The stubs declare no requirements of their own: what the base's packages need of what this
    # install replaces is for the build's `pip check` and the preflight's imports to show.
    lines.append("(not checked: the base's own packages' requirements; the build's pip check and the preflight do)")
    return "\n".join(lines) + "\n"
