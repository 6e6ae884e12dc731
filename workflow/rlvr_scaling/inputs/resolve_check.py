"""Whether the site's image install resolves on its base, before any build: the exact install that
containers/add-verl.sh runs (verl with the site's extras and requirements, the base's accelerator
stack kept as constraints), resolved by pip for the base's Python against the base's package set
(container.base_packages) seen as installed.

The base's packages are ROCm (or CUDA) builds that are not on the package index: each becomes an
installed distribution's metadata (a stub .dist-info) in an empty environment of the base's Python
version, so pip leaves them alone where they satisfy a requirement and must replace them where they
do not. Nothing is installed; pip downloads only the metadata of what it would add (range requests).

The stubs of the packages the build keeps (add-verl.sh's `keep=`: torch, vLLM, Megatron-Core,
TransformerEngine...) carry those packages' own requirements: the Requires-Dist of the same version's
wheel on the package index, read once into a snapshot next to the base list
(containers/bases/<base>.requires.json, `rlvr-scaling resolve-check --write-requires`). On a ROCm
base the CUDA-side pieces of that published metadata are dropped (the base's ROCm builds were built
against its own torch and carry no NVIDIA libraries). After pip's resolve the check runs pip check on
the result, seen the same way, as the build's own `pip check` will: a package the install moves out
of a kept package's range is named with the kept package, its requirement, the version the install
wants and what to do (keep the base's version, when the install resolves with it pinned).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
# pip check's line for a requirement an installed version does not meet.
PIP_CHECK_CONFLICT = re.compile(r"^(\S+) (\S+) has requirement (.+), but you have (\S+) (\S+)\.$", re.MULTILINE)
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


def requires_snapshot(base_file: Path) -> Path:
    """The kept packages' published requirements, next to the base list: <base>.requires.json."""
    return base_file.with_suffix(".requires.json")


def published(version: str) -> str:
    """The index's version of a base build: without its local label (+rocm7.0, +lumi.aif.gfx90a)."""
    return version.split("+", 1)[0]


def requirement_name(line: str) -> str:
    match = REQUIREMENT_NAME.match(line)
    return normalized(match.group(1)) if match else ""


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
        honoured, dropped = [], []
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


def dry_run(python: Path, options: list[str], requested: list[str], report: Path, timeout_s: float) -> Any:
    command = [
        sys.executable, "-m", "pip", "--python", str(python),
        "install", "--dry-run", "--report", str(report), "--progress-bar", "off",
        # Metadata by HTTP range requests: the index serves no separate metadata files, and a whole
        # wheel (a CUDA torch: gigabytes) would be downloaded only to read it.
        "--use-feature=fast-deps",
        *options, *requested,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=pip_environment(), timeout=timeout_s)


def pip_check_after(
    interpreter: str, folder: Path, base: BasePackages, requires: dict[str, list[str]], report: dict[str, Any]
) -> list[tuple[str, str, str, str, str]]:
    """pip check on what the install leaves, seen as the base's stubs with pip's choices put in: the
    conflicts the build's own `pip check` would find among the packages this check knows (the base
    list is partial: a requirement on a package not in it is not judged here)."""
    versions, known = dict(base.versions), dict(requires)
    for item in report.get("install", []):
        name = normalized(item["metadata"]["name"])
        versions[name] = item["metadata"]["version"]
        known[name] = item["metadata"].get("requires_dist", [])
    python = stub_environment(interpreter, folder, versions, known)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "check"],
        capture_output=True,
        text=True,
        env=pip_environment(),
        timeout=300,
    )
    return PIP_CHECK_CONFLICT.findall(result.stdout)


def resolve_check(study: Study, base_file: Path | None = None, timeout_s: float = 900) -> Verdict:
    container = study.require_container()
    base_file = base_file or base_file_of(study)
    if not base_file.is_file():
        raise ConfigError("container.base_packages", str(base_file), "an existing file (`pip list --format=freeze`)")
    base = read_base_packages(base_file)
    kept = kept_of(base)
    verdict = Verdict(
        site=study.site_name,
        base=str(base_file),
        python=f"{base.python[0]}.{base.python[1]}",
        requested=requested(study),
        kept=kept,
    )
    requires = kept_requirements(requires_snapshot(base_file), base, kept, verdict)
    interpreter = find_python(base.python)
    with tempfile.TemporaryDirectory(prefix="rlvr-resolve-") as work_dir:
        work = Path(work_dir)
        python = stub_environment(interpreter, work / "base", base.versions, requires)
        constraints = work / "keep.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in kept.items()))
        options = ["--constraint", str(constraints)]
        options += ["--constraint", str(paths.REPO_ROOT / container.constraints)] if container.constraints else []
        report = work / "report.json"
        try:
            result = dry_run(python, options, verdict.requested, report, timeout_s)
        except subprocess.TimeoutExpired:
            verdict.problems.append(f"pip did not resolve within {timeout_s:.0f} s")
            return verdict
        if result.returncode != 0:
            verdict.problems += pip_problems(result.stderr, result.stdout)
            return verdict
        resolved = json.loads(report.read_text())
        judge(resolved, base, kept, verdict)
        conflicts = pip_check_after(interpreter, work / "after", base, requires, resolved)

        def resolves_with(pin: str) -> tuple[bool, str]:
            """Whether the install resolves with one more package held at the base's version."""
            held = work / "hold.txt"
            held.write_text(pin + "\n")
            try:
                again = dry_run(
                    python, [*options, "--constraint", str(held)], verdict.requested, work / "r.json", timeout_s
                )
            except subprocess.TimeoutExpired:
                return False, f"pip did not resolve within {timeout_s:.0f} s"
            return again.returncode == 0, "; ".join(pip_problems(again.stderr, again.stdout))

        name_conflicts(conflicts, base, resolves_with, verdict)
        requirements_on(verdict, requires, conflicts)
    return verdict


def name_conflicts(
    conflicts: list[tuple[str, str, str, str, str]],
    base: BasePackages,
    resolves_with: Callable[[str], tuple[bool, str]],
    verdict: Verdict,
) -> None:
    """One line per requirement of a kept package that the install breaks: the kept package, its
    requirement, the version the install wants, and what to do."""
    for owner, owner_version, requirement, wanted, new in conflicts:
        name = normalized(wanted)
        head = f"{normalized(owner)} {owner_version} requires {requirement}, but the install brings {name} {new}"
        old = base.versions.get(name)
        if old is None:
            # Not in the base list (which is partial): the base's own copy, which its kept package
            # accepts, stays unless the install needs another; so it is the range that must resolve.
            held = re.sub(r"\[[^]]*\]", "", requirement.split(";", 1)[0]).strip()
            ok, why = resolves_with(held)
            if ok:
                verdict.notes.append(
                    f"{head}: {name} is not in the base list and the install resolves within '{held}', "
                    f"so the base's own {name} stays"
                )
            else:
                verdict.problems.append(f"{head}; the install does not resolve within '{held}' ({why})")
            continue
        ok, why = resolves_with(f"{name}=={old}")
        if ok:
            verdict.problems.append(
                f"{head} (the base has {old}): keep {old}, add '{name}=={old}' to container.requirements "
                f"(the install resolves with it)"
            )
        else:
            verdict.problems.append(
                f"{head} and does not resolve with the base's {old} ({why}): change the base or the install "
                f"so that one {name} satisfies both"
            )


def requirements_on(verdict: Verdict, requires: dict[str, list[str]], conflicts: list[tuple[str, ...]]) -> None:
    """For each base package the install replaces: what the kept packages require of it, and whether
    the new version meets it (pip check found no conflict)."""
    broken = {(normalized(c[0]), normalized(c[3])) for c in conflicts}
    for upgrade in verdict.upgrades:
        upgrade["kept_require"] = "; ".join(
            f"{owner} {line.split(';', 1)[0].strip()} ({'broken' if (owner, upgrade['name']) in broken else 'met'})"
            for owner, lines in requires.items()
            for line in lines
            if requirement_name(line) == upgrade["name"] and "extra ==" not in line
        )


def verdict_text(verdict: Verdict) -> str:
    lines = [
        f"site {verdict.site}: {' '.join(verdict.requested)} on {Path(verdict.base).name} (Python {verdict.python})",
        f"kept from the base: {', '.join(f'{n} {v}' for n, v in verdict.kept.items()) or 'nothing'}",
    ]
    if verdict.snapshot:
        lines.append(f"their own requirements (published metadata, {Path(verdict.snapshot).name}):")
        for name, source in verdict.requirements.items():
            if "missing" in source:
                lines.append(f"  {name} {source['published']}: none read, {source['missing']}")
                continue
            dropped = f", {len(source['dropped'])} dropped as the CUDA build's" if source["dropped"] else ""
            lines.append(
                f"  {name} {source['published']}: {source['honoured']} honoured{dropped}; "
                f"{source['url'].rsplit('/', 1)[-1]} sha256 {source.get('sha256') or '?'}"
            )
    if verdict.adds or verdict.upgrades:
        lines.append(f"adds {len(verdict.adds)} packages; replaces {len(verdict.upgrades)} of the base's:")
        for u in verdict.upgrades:
            required = f" (kept packages require: {u['kept_require']})" if u.get("kept_require") else ""
            lines.append(f"  {u['name']} {u['base']} -> {u['new']}{required}")
        added = {a["name"]: a["version"] for a in verdict.adds}
        lines += [f"  + {name} {added[name]}" for name in ("verl", "mbridge", "megatron-bridge") if name in added]
    lines += [f"note: {note}" for note in verdict.notes]
    lines += [f"PROBLEM: {problem}" for problem in verdict.problems]
    lines.append("verdict: resolves" if verdict.ok else f"verdict: does not resolve ({len(verdict.problems)} problems)")
    if verdict.snapshot:
        unread = [n for n, s in verdict.requirements.items() if "missing" in s]
        lines.append(
            "(not checked: the requirements of the base's other packages"
            + (f" and of {', '.join(unread)}, which the index does not have" if unread else "")
            + "; the build's pip check and the preflight do)"
        )
    else:
        # Without the snapshot the stubs declare no requirements of their own.
        lines.append(
            "(not checked: the base's own packages' requirements, no snapshot of them next to the base list; "
            "the build's pip check and the preflight do)"
        )
    return "\n".join(lines) + "\n"
