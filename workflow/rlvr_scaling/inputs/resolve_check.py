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

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError
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
    stub_environment,
)
from rlvr_scaling.inputs.kept_requirements import (
    kept_requirements,
    requirement_name,
    requires_snapshot,
)
from rlvr_scaling.study.config import Study

# Packages published only as source that build without an accelerator toolchain (pure Python).
PURE_PYTHON_SOURCES = {
    "antlr4-python3-runtime": "hydra-core's parser runtime, pure Python, published only as a source archive",
}
# pip check's line for a requirement an installed version does not meet.
PIP_CHECK_CONFLICT = re.compile(r"^(\S+) (\S+) has requirement (.+), but you have (\S+) (\S+)\.$", re.MULTILINE)


def requested(study: Study) -> list[str]:
    """What add-verl.sh installs for this site (containers/verl-venv.def.in's %post)."""
    container = study.require_container()
    extras = ",".join(container.verl_extras)
    verl = f"verl[{extras}]=={study.config.software.verl}" if extras else f"verl=={study.config.software.verl}"
    return [verl, *container.requirements]


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


def requirements_on(
    verdict: Verdict, requires: dict[str, list[str]], conflicts: list[tuple[str, str, str, str, str]]
) -> None:
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
