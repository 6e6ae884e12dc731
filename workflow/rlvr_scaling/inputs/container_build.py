"""Building the site's engine image and recording what it is: digests, labels, in-image packages."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.fsutil import sha256_file, write_json
from rlvr_scaling.inputs.container import (
    FREEZE_IN_VENV,
    LOCK_IN_VENV,
    VENV_PYTHON,
    build_command,
    build_kind,
    module_environment,
    require_runtime,
    runtime,
    squashfs,
    squashfs_bind,
)
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.image_identity import ADD_VERL

FREEZE_IN_IMAGE = "/opt/rlvr-scaling-pip-freeze.txt"


def _run(command: list[str], what: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise StudyError(f"{what} failed (exit {result.returncode}): {' '.join(command)}\n{result.stderr[-3000:]}")
    return result.stdout


def labels(study: Study, image: Path) -> dict[str, str]:
    if squashfs(study):
        # A SquashFS has no labels: the same facts a definition build writes into its image.
        return {
            "org.rlvr-scaling.verl": study.config.software.verl,
            "org.rlvr-scaling.base-image": study.require_container().base_image,
            "org.rlvr-scaling.python": VENV_PYTHON,
        }
    found = {}
    command = [runtime(study), "inspect", "--labels", str(image)]
    for line in _run(command, "reading the image's labels").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            found[key.strip()] = value.strip()
    return found


def in_image_packages(study: Study, image: Path) -> dict[str, str]:
    """The package list the build wrote, read the way runs see the image (for the SquashFS way: bound
    into the base image, which also proves the bind works)."""
    if squashfs(study):
        base = study.require_container().base_image
        command = [runtime(study), "exec", "--bind", squashfs_bind(str(image.resolve())), base]
        command += ["cat", FREEZE_IN_VENV]
    else:
        command = [runtime(study), "exec", str(image), "cat", FREEZE_IN_IMAGE]
    text = _run(command, "reading the image's package list")
    return dict(line.split("==", 1) for line in text.splitlines() if "==" in line)


def _base_stat(base: Path) -> dict[str, Any]:
    found = base.stat()
    return {"bytes": found.st_size, "mtime_ns": found.st_mtime_ns}


def base_changed_since_build(study: Study, record: Path) -> str | None:
    """The SquashFS way runs on the base image file itself: one replaced since the build (size or
    time stamp differ from the record) would run the old venv on a new base."""
    if not squashfs(study) or not record.exists():
        return None
    recorded = json.loads(record.read_text())["base_image"]
    base = Path(recorded["path"])
    if not base.exists():
        return f"the base image {base} is missing (container.base_image)"
    now = _base_stat(base)
    if recorded.get("bytes") is not None and now != {k: recorded.get(k) for k in now}:
        return f"the base image {base} changed since the venv was built on it (size or time stamp): rebuild the image"
    return None


def image_record(study: Study, definition: Path, image: Path, base_sha256: str | None = None) -> dict[str, Any]:
    base = Path(study.require_container().base_image)
    if base_sha256 is None and base.exists():
        base_sha256 = sha256_file(base)
    return {
        "site": study.site_name,
        "built": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "build": build_kind(study),
        "definition": definition.read_text(),
        "base_image": {"path": str(base), "sha256": base_sha256, **(_base_stat(base) if base.exists() else {})},
        "image": {"path": str(image.resolve()), "sha256": sha256_file(image), "bytes": image.stat().st_size},
        "labels": labels(study, image),
        "packages": in_image_packages(study, image),
    }


def check_base_pin(study: Study) -> str | None:
    """A site may pin its base image's sha256 (container.base_sha256): a base file replaced at the
    same path then stops the build instead of silently changing every run. Returns the digest it
    computed (a 20 GB base is read once per build, not twice)."""
    container = study.require_container()
    pinned = container.base_sha256
    if not pinned:
        return None
    base = Path(container.base_image)
    where = f"site '{study.site_name}'"
    if not base.is_file():
        raise ConfigError("container.base_sha256", pinned, f"a pin of a local image file, and {base} is not one", where)
    found = sha256_file(base)
    if found != pinned:
        raise ConfigError(
            "container.base_sha256",
            pinned,
            f"the sha256 of container.base_image {base}, which is {found} now: the base image changed "
            "since it was pinned (pin the new digest only if the new image is meant; runs made on it get new ids)",
            where,
        )
    return found


def _run_time_binding(name: str) -> bool:
    """A variable that binds host paths into, or sets variables inside, every container the runtime
    starts: what LUMI's lumi-aif-singularity-bindings module sets for runs. A build must not inherit
    it from the submitting shell: a bound path the base image lacks fails the build ("mount
    /var/spool/slurmd ... doesn't exist in container")."""
    runtimes = ("SINGULARITY", "APPTAINER")
    return name in {f"{r}_{what}" for r in runtimes for what in ("BIND", "BINDPATH")} or name.startswith(
        tuple(f"{r}ENV_" for r in runtimes)
    )


def build_environment(study: Study, base: dict[str, str], tmpdir: Path | None = None) -> dict[str, str]:
    """The environment a build runs in: the job's, without the run-time bindings, after the site's
    build modules (LUMI: `module load LUMI PRoot`), with the runtime's temporary and cache folders in
    `tmpdir` (LUMI's advice: node memory, /tmp, never Lustre, where unpacking the base image has
    "serious performance consequences")."""
    env = {key: value for key, value in base.items() if not _run_time_binding(key)}
    env.update(module_environment(study, env, key="build_modules"))
    if tmpdir is not None:
        prefix = runtime(study).upper()
        env.update({f"{prefix}_TMPDIR": str(tmpdir / "tmp"), f"{prefix}_CACHEDIR": str(tmpdir / "cache")})
    container = study.require_container()
    if (
        container.build_privileges == "proot"
        and not squashfs(study)
        and shutil.which("proot", path=env.get("PATH")) is None
    ):
        raise ConfigError(
            "container.build_privileges",
            "proot",
            "proot on PATH for the build (container.build_modules loads it: on LUMI `module load LUMI PRoot`)",
            f"site '{study.site_name}', build_modules {container.build_modules}",
        )
    return env


def build_image(study: Study, definition: Path, image: Path, record: Path) -> dict[str, Any]:
    """Build next to `image` and move it in only when the build and its record succeed."""
    container = study.require_container()
    # One folder per build (two builds on one node share /tmp), removed whatever happens.
    tmpdir = Path(container.build_tmpdir) / f"rlvr-build-{os.getpid()}" if container.build_tmpdir else None
    env = build_environment(study, dict(os.environ), tmpdir)  # proot's check before the base's digest
    base_sha256 = check_base_pin(study)
    require_runtime(study, env)
    if squashfs(study) and shutil.which("mksquashfs", path=env.get("PATH")) is None:
        raise StudyError("container.build venv-squashfs packs the venv with mksquashfs, which is not on PATH here")
    partial = image.with_name(f".{image.name}.building")
    partial.unlink(missing_ok=True)
    try:
        if tmpdir is not None:
            for sub in ("tmp", "cache"):
                (tmpdir / sub).mkdir(parents=True, exist_ok=True)
        if squashfs(study):
            _build_squashfs(study, definition, partial, env)
        else:
            result = subprocess.run(build_command(study, str(definition), str(partial)), env=env)
            if result.returncode != 0:
                raise StudyError(f"the image build failed (exit {result.returncode}); its output is above")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
    partial.rename(image)
    facts = image_record(study, definition, image, base_sha256)
    write_json(record, facts)
    return facts


def _build_squashfs(study: Study, script: Path, target: Path, env: dict[str, str]) -> None:
    """The venv, made inside the base image by the rendered script in a work directory beside the
    target, then packed into SquashFS; the work directory goes either way."""
    work = target.with_name(f"{target.name}.venv").resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        shutil.copy(paths.REPO_ROOT / ADD_VERL, work / "add-verl.sh")
        lock = study.require_container().constraints
        if lock:
            shutil.copy(paths.REPO_ROOT / lock, work / Path(LOCK_IN_VENV).name)
        result = subprocess.run(["bash", str(script), str(work)], env=env)
        if result.returncode != 0:
            raise StudyError(f"the venv build failed (exit {result.returncode}); its output is above")
        squash = ["mksquashfs", str(work), str(target), "-noappend", *study.require_container().squashfs_args]
        result = subprocess.run(squash, stdout=subprocess.DEVNULL, env=env)
        if result.returncode != 0:
            raise StudyError(f"packing the venv failed (exit {result.returncode}): {' '.join(squash)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def image_facts(record: Path) -> dict[str, Any] | None:
    """What a run records of its image: digest, base digest, labels and the packages it holds."""
    if not record.exists():
        return None
    facts = json.loads(record.read_text())
    return {"sha256": facts["image"]["sha256"], **{k: facts[k] for k in ("base_image", "labels", "packages")}}
