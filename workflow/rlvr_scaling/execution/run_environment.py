"""The environment a run's processes get: the site's variables (plus the CPU engine's), with their
${NAME} references to the job's environment (e.g. ${SLURM_JOB_ID}) expanded when the run starts."""

from __future__ import annotations

import json
import re
import shlex

from rlvr_scaling.engines.hooks import AFFINITY_VAR
from rlvr_scaling.errors import StudyError
from rlvr_scaling.secrets import is_secret_name
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.verl_args import CPU_ENGINE_ENV

ENGINE_HOOKS = "rlvr_scaling.engines.hooks"
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def environment_templates(study: Study) -> dict[str, str]:
    """The run's variables as the site writes them (references unexpanded), and what loads the
    engine hooks (rlvr_scaling.engines.hooks: the CPU engine loads them itself) with the site's
    GPU-to-CPU table."""
    env = dict(study.site.environment)
    if study.site.cpu_engine:
        env.update(CPU_ENGINE_ENV)
    else:
        env["VERL_USE_EXTERNAL_MODULES"] = ENGINE_HOOKS
    table = study.site.launch.gpu_cpu_affinity
    if table:
        env[AFFINITY_VAR] = json.dumps({str(gpu): cpu_list(cpus) for gpu, cpus in sorted(table.items())})
    return env


def cpu_list(text: str) -> list[int]:
    """A Linux CPU list ("1-7,9") as its CPUs."""
    cpus: list[int] = []
    for part in str(text).split(","):
        first, _, last = part.strip().partition("-")
        cpus += range(int(first), int(last or first) + 1)
    return cpus


def expanded_environment(study: Study, job_environment: dict[str, str]) -> dict[str, str]:
    """The run's variables with every ${NAME} replaced from the job's environment; a reference to a
    variable the job does not have is an error naming both."""
    expanded = {}
    for key, template in environment_templates(study).items():

        def value_of(match: re.Match[str], key: str = key, template: str = template) -> str:
            name = match.group(1)
            if name not in job_environment:
                raise StudyError(
                    f"site '{study.site_name}' environment {key}={template!r} refers to ${{{name}}}, "
                    "which the job's environment does not have"
                )
            return job_environment[name]

        expanded[key] = REFERENCE.sub(value_of, template)
    return expanded


# The job's variables whose values a run's record may hold where the study or site refers to them:
# Slurm's job facts, who and where (user, home, temporary folder), and paths, thread counts and
# network interfaces by their names' ends. Any other ${NAME} is recorded as written: its name only.
HARMLESS_VARIABLE = re.compile(
    r"^(?:SLURM_[A-Z0-9_]+|USER|LOGNAME|HOME|TMPDIR|HOSTNAME|[A-Z0-9_]*_(?:DIR|HOME|THREADS|IFNAME|INTERFACE))$"
)


def recorded_environment(study: Study, job_environment: dict[str, str]) -> dict[str, str]:
    """The run's variables as job.json records them: what the study and site set, with only the
    harmless ${NAME} references filled in from the job (secrets names the rest)."""
    recorded = {}
    for key, template in environment_templates(study).items():

        def value_of(match: re.Match[str]) -> str:
            name = match.group(1)
            harmless = HARMLESS_VARIABLE.match(name) and not is_secret_name(name)
            return job_environment.get(name, match.group(0)) if harmless else match.group(0)

        recorded[key] = REFERENCE.sub(value_of, template)
    return recorded


def shell_export(key: str, template: str) -> str:
    """An `export` line for command.sh: bash expands the ${NAME} references, and only those (set -u
    makes a missing one an error)."""
    if not REFERENCE.search(template):
        return f"export {key}={shlex.quote(template)}"
    parts = []
    position = 0
    for match in REFERENCE.finditer(template):
        parts.append(shlex.quote(template[position : match.start()]) if match.start() > position else "")
        parts.append(f'"${{{match.group(1)}}}"')
        position = match.end()
    if position < len(template):
        parts.append(shlex.quote(template[position:]))
    return f"export {key}={''.join(parts)}"


JOB_ID_REFERENCE = "${SLURM_JOB_ID}"


def job_folders(study: Study, job_environment: dict[str, str]) -> list[str]:
    """The node-local folders the site names per job (a variable whose value is an absolute path
    built with ${SLURM_JOB_ID}: LUMI's HF, vLLM, Triton, Inductor, torch and MIOpen caches), as this
    job expands them. Each node's launcher removes them at the run's end: on LUMI /tmp is the node's
    memory, and another job's run may follow on the node. A path is taken only if ${SLURM_JOB_ID} is
    in the folder's own name as the site writes it, so no folder shared by jobs can be named."""
    if not job_environment.get("SLURM_JOB_ID"):
        return []
    named = [
        key
        for key, template in environment_templates(study).items()
        if template.startswith("/") and JOB_ID_REFERENCE in template.rstrip("/").rsplit("/", 1)[-1]
    ]
    expanded = expanded_environment(study, job_environment)
    return sorted({expanded[key] for key in named if ":" not in expanded[key]})
