"""The site's container: its definition (rendered from containers/<template> with the site's pins) and
how the launcher runs commands inside it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.engines.fabric import NCCL_DEBUG_NAMES, SLINGSHOT_VARS
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.identity import digest
from rlvr_scaling.study.image_identity import ADD_VERL
from rlvr_scaling.study.validate import CONTAINER_PLACEHOLDERS
from rlvr_scaling.study.verl_args import CPU_ENGINE_ENV

LOCK_IN_IMAGE = "/opt/rlvr-scaling-lock.txt"
# The install step both ways of building share (run inside the base image).
# The SquashFS way: where the packed venv is bound at run time, and its Python.
VENV_MOUNT = "/user-software"
VENV_PYTHON = f"{VENV_MOUNT}/venv/bin/python3"
LOCK_IN_VENV = f"{VENV_MOUNT}/rlvr-scaling-lock.txt"
FREEZE_IN_VENV = f"{VENV_MOUNT}/rlvr-scaling-pip-freeze.txt"


def build_kind(study: Study) -> str:
    """`definition`: a derived image built from a definition file (`<runtime> build --fakeroot`).
    `venv-squashfs`: a venv made inside the base image, packed into SquashFS and bound at run time,
    for sites where image builds are not possible (LUMI documents both)."""
    return study.site.container.build if study.site.container else "definition"


def squashfs(study: Study) -> bool:
    return build_kind(study) == "venv-squashfs"


def recipe_path(study: Study, root: Path) -> Path:
    """What the build follows: the definition file, or the SquashFS way's build script. Named by its
    content: a changed recipe is a new input of the image's rule, which then rebuilds the image."""
    stem, suffix = ("verl-venv-squashfs", ".sh") if squashfs(study) else ("verl", ".def")
    name = f"{stem}-{digest(render_definition(study), 12)}{suffix}"
    return paths.results_dir(root) / "containers" / study.site_name / name


def render_definition(study: Study) -> str:
    container = study.require_container()
    template = (paths.REPO_ROOT / container.definition).read_text()
    lock = container.constraints
    common = {
        "base_image": container.base_image,
        "verl_version": study.config.software.verl,
        "python": container.python,
        "verl_extras": ",".join(container.verl_extras),
        "requirements": " ".join(shlex.quote(r) for r in container.requirements),
    }
    if squashfs(study):
        return template.format(
            **{**common, "base_image": shlex.quote(container.base_image)},
            runtime=runtime(study),
            exec_args=" ".join(shlex.quote(a) for a in container.build_args),
            constraint=LOCK_IN_VENV if lock else "-",
            lock_note=" and rlvr-scaling-lock.txt" if lock else "",
        )
    return template.format(
        **common,
        add_verl=paths.REPO_ROOT / ADD_VERL,
        lock_file=f"\n    {paths.REPO_ROOT / lock} {LOCK_IN_IMAGE}" if lock else "",
        constraint=LOCK_IN_IMAGE if lock else "-",
    )


def runtime(study: Study) -> str:
    """The container runtime's command for building, inspecting and running the image: LUMI provides
    SingularityCE (`singularity`), the test machines Apptainer. Named once per site."""
    return study.site.container.runtime if study.site.container else "apptainer"


def require_runtime(study: Study, env: dict[str, str] | None = None) -> None:
    """Before a build or a run: the site's runtime is a command in the environment the commands get
    (after the site's module commands), a clear error rather than a traceback."""
    name = runtime(study)
    search = (env or os.environ).get("PATH")
    if shutil.which(name, path=search) is None:
        found = [n for n in ("apptainer", "singularity") if shutil.which(n, path=search)]
        raise ConfigError(
            "container.runtime",
            name,
            f"a command on this host's PATH (found: {', '.join(found) or 'neither apptainer nor singularity'})",
            f"site '{study.site_name}'",
        )


def build_command(study: Study, definition: str, image: str) -> list[str]:
    """`<runtime> build` with the site's build options (e.g. a CA bundle bound in): `--fakeroot`
    where the site has user namespaces; with proot (container.build_privileges), no option at all:
    SingularityCE builds unprivileged through the proot it finds on PATH (LUMI's way: fakeroot is
    disabled there)."""
    container = study.require_container()
    privileges = ["--fakeroot"] if container.build_privileges == "fakeroot" else []
    return [runtime(study), "build", *privileges, "--force", *container.build_args, image, definition]


def expand(template: str) -> str:
    """Fill the placeholders of container.binds / container.python (checked by validate): where the
    workflow's own Python lives, for a test image that binds the host's environment in."""
    values = (sys.prefix, sys.base_prefix, str(paths.REPO_ROOT))
    return template.format(**dict(zip(CONTAINER_PLACEHOLDERS, values, strict=True)))


def image_path(study: Study, root: Path) -> Path:
    """The built image: a SIF, or the SquashFS of the venv (bound into the base image at run time)."""
    return paths.results_dir(root) / "containers" / study.site_name / ("verl.sqsh" if squashfs(study) else "verl.sif")


def record_path(study: Study, root: Path) -> Path:
    """The build's record of the image (rlvr_scaling.inputs.container_build)."""
    return image_path(study, root).with_suffix(".json")


# The image starts with a clean environment (`exec --cleanenv`): the host's LD_LIBRARY_PATH (after
# `module load`, another libfabric), PYTHONPATH and module variables stay outside, where they could
# win over the image's own. A run's processes get these variables, and only these: the run's own
# (its token, the stand-in's, the site's RLVR_*), Ray's, Slurm's, verl's, the GPUs Slurm bound, the
# site's environment and container.pass_environment.
PASSED_PREFIXES = ("RLVR_", "RAY_", "SLURM_", "VERL_")
# SLURMD_NODENAME: which node a task of the step that starts every node's Ray runs on (ray_cluster).
# SLINGSHOT_*: the step's Slingshot credentials (engines.fabric.SLINGSHOT_VARS), for libfabric's cxi
# provider inside the image; the engine hooks record what each rank saw.
PASSED_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "SLURMD_NODENAME",
    *SLINGSHOT_VARS.values(),
)


def passed_variables(study: Study) -> tuple[list[str], list[str]]:
    """The prefixes and the names of the variables that enter the image (see PASSED_PREFIXES)."""
    container = study.require_container()
    names = {*PASSED_NAMES, *study.site.environment, *container.pass_environment}
    if study.site.cpu_engine:
        names.update(CPU_ENGINE_ENV)
    if study.site.fabric.nccl:
        names.update(NCCL_DEBUG_NAMES)  # the launcher's, for the transport's record (engines.fabric)
    return list(PASSED_PREFIXES), sorted(name for name in names if not name.startswith(PASSED_PREFIXES))


def pass_environment_command(study: Study) -> list[str]:
    """A host-side shell that exports each passed variable the caller has as <RUNTIME>ENV_<NAME>,
    which the runtime sets inside the image even with --cleanenv, then becomes the runtime. In the
    command itself, not in the launcher's environment: srun carries it to every node, and command.sh
    stays runnable by hand."""
    prefixes, names = passed_variables(study)
    listed = " ".join([*(f"${{!{prefix}*}}" for prefix in prefixes), *names])
    into = f"{runtime(study).upper()}ENV_"
    script = f'for n in {listed}; do [ -n "${{!n+x}}" ] && export "{into}$n=${{!n}}"; done; exec "$@"'
    return ["bash", "-c", script, "rlvr-scaling-pass-environment"]


def exec_prefix(study: Study, root: Path) -> list[str]:
    """`<runtime> exec --cleanenv --bind ... IMAGE` behind the shell that passes the run's variables
    in, or nothing on a site without a container."""
    container = study.site.container
    if container is None:
        return []
    binds = [expand(bind) for bind in container.binds]
    options = [expand(option) for option in container.exec_args]
    # The results tree holds the data, the model and the run directory the run writes into; it may
    # be a link to the site's storage (storage.results), bound in as well.
    results = paths.results_dir(root)
    binds += [str(root.resolve()), str(results.resolve())]
    if results.is_symlink() and os.path.isabs(os.readlink(results)):
        binds.append(os.readlink(results))  # the path as the link names it, which the run follows
    image = str(image_path(study, root).resolve())
    if squashfs(study):
        # Its own --bind: the options' comma would split a comma-joined list.
        options += ["--bind", squashfs_bind(image)]
        image = container.base_image
    command = [runtime(study), "exec", "--cleanenv", *options, "--bind", ",".join(dict.fromkeys(binds)), image]
    return [*pass_environment_command(study), *command]


def squashfs_bind(image: str) -> str:
    """The SquashFS of the venv, mounted read-only where it was made."""
    return f"{image}:{VENV_MOUNT}:ro,image-src=/"


def python_command(study: Study, root: Path) -> list[str]:
    """The Python that runs verl and Ray: the container's on a container site, else this one."""
    container = study.site.container
    if container is None:
        return [sys.executable]
    python = VENV_PYTHON if squashfs(study) else expand(container.python)
    return [*exec_prefix(study, root), python]


def _login_shell_environment(commands: list[str], base: dict[str, str], key: str) -> dict[str, str]:
    result = subprocess.run(
        ["bash", "-lc", " && ".join([*commands, "env -0"])], capture_output=True, env=base, timeout=120
    )
    if result.returncode != 0:
        raise StudyError(
            f"container.{key} failed (exit {result.returncode}): {commands}\n"
            f"{result.stderr.decode(errors='replace')[-2000:]}"
        )
    return dict(item.split("=", 1) for item in result.stdout.decode(errors="replace").split("\0") if "=" in item)


def module_environment(study: Study, base: dict[str, str], key: str = "modules") -> dict[str, str]:
    """Variables the site's module commands set (container.modules, LUMI: the AIF singularity
    bindings; container.build_modules for a build: LUMI's PRoot), applied to the launcher's
    environment so that every `<runtime>` command sees them. `module` needs a login shell; what the
    login shell sets by itself is left out by comparing with one that runs no commands."""
    commands = getattr(study.site.container, key) if study.site.container else []
    if not commands:
        return {}
    try:
        before = _login_shell_environment([], base, key)
        after = _login_shell_environment(commands, base, key)
    except StudyError as exc:
        raise StudyError(f"site '{study.site_name}' {exc}") from exc
    return {key: value for key, value in after.items() if before.get(key) != value and not key.startswith("BASH_FUNC")}
