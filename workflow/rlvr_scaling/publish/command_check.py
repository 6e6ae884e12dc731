"""verify's check of each run's command: the verl arguments in spec.json recomputed from the bundled
config, site and the run's shape, and command.sh rendered again from them, line by line.

Some words of a command are the machine's, not the study's, and are taken as recorded: the study's
folder (every path under results/, found from the model's path, `<root>/results/models/<site>/<model>`),
the Python that ran verl (the exec line's interpreter: this host's venv or the image's) and, on a
container site, the image's path and the folders bound in. Every other word must be what the launcher
writes (the trainer verl's own, or the tests' stand-in): an appended line, a changed argument, option or
export is named. A secret's export is compared as the bundle redacted it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import fields
from pathlib import Path
from typing import Any

from rlvr_scaling.execution.launchers import launcher_for
from rlvr_scaling.execution.run_records import TRAINER_MODULE, render_command
from rlvr_scaling.secrets import REDACTED, is_secret_name
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run
from rlvr_scaling.study.sections import Site, StudyConfig
from rlvr_scaling.study.verl_args import build_verl_args

MODEL_ARG = "actor_rollout_ref.model.path="
# The CPU engine's sampler, named by its file in the package where it ran.
SAMPLER_ARG = "trainer.v1.sampler.custom_sampler.path="
SAMPLER_END = "rlvr_scaling/engines/cpu/replay.py"
# The trainers a run may have run: verl's, or the tests' stand-in (run_records.STANDIN_TRAINER_VAR).
TRAINERS = (TRAINER_MODULE, "tests.standin_trainer")
EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
IMAGE_SUFFIXES = (".sif", ".sqsh", ".squashfs", ".img")


def exec_line_matches(recorded: str, rendered: str, trainer: str) -> bool:
    """Word by word; the machine's words (see above) may differ."""
    try:
        ours, theirs = shlex.split(rendered.removesuffix("\\")), shlex.split(recorded.removesuffix("\\"))
    except ValueError:
        return False
    if trainer not in TRAINERS or len(ours) != len(theirs) or theirs[-2:] != ["-m", trainer]:
        return False
    interpreter = len(ours) - 3
    for position, (a, b) in enumerate(zip(ours[:-2], theirs[:-2], strict=True)):
        machine = (
            position == interpreter
            or (position > 0 and ours[position - 1] == "--bind")
            or (a.endswith(IMAGE_SUFFIXES) and b.endswith(IMAGE_SUFFIXES))
        )
        if a != b and not machine:
            return False
    return True


def _as_redacted(lines: list[str]) -> list[str]:
    """A secret-named variable's export with its value as the bundle shows it."""
    shown = []
    for line in lines:
        match = EXPORT.match(line)
        shown.append(f"export {match.group(1)}={REDACTED}" if match and is_secret_name(match.group(1)) else line)
    return shown


def recorded_root(verl_args: list[str], site: str) -> Path | None:
    """The study's folder on the machine that ran it, from the model's path."""
    model = next((a.split("=", 1)[1] for a in verl_args if a.startswith(MODEL_ARG)), None)
    if model is None:
        return None
    path = Path(model)
    if path.parts[-4:-1] == ("results", "models", site):  # one folder per model (#61)
        return path.parents[3]
    return path.parents[2] if path.parts[-3:] == ("results", "models", site) else None


def _as_recorded(expected: list[str], recorded: list[str]) -> list[str]:
    """The sampler's path as the run recorded it, where it names the package's sampler."""
    own = next((a for a in recorded if a.startswith(SAMPLER_ARG) and a.endswith(SAMPLER_END)), None)
    return [own if own and a.startswith(SAMPLER_ARG) else a for a in expected]


def command_problems(
    spec: dict[str, Any], job: dict[str, Any], command: str, config: StudyConfig, site: Site
) -> list[str]:
    """What differs between the run's recorded arguments and command.sh and the ones recomputed."""
    run = spec["run"]
    recorded_args = list(run.get("verl_args") or [])
    root = recorded_root(recorded_args, site.name)
    if root is None:
        return [f"spec.json: no {MODEL_ARG}<folder>/results/models/{site.name}/<model> among the verl arguments"]
    expected = build_verl_args(
        config, site, run["dataset"], run["nodes"], run["prompts"], run["concurrency"], run["run_id"], root
    )
    expected = _as_recorded(expected, recorded_args)
    problems = []
    if expected != recorded_args:
        missing = [a for a in expected if a not in recorded_args]
        extra = [a for a in recorded_args if a not in expected]
        shown = "; ".join([*(f"missing {a!r}" for a in missing[:3]), *(f"not from the study {a!r}" for a in extra[:3])])
        problems.append(
            f"spec.json: verl arguments are not those the bundled config gives with this rlvr-scaling "
            f"({shown or 'order'})"
        )
    study = Study(config=config, site=site)
    shape = Run(**{f.name: run[f.name] for f in fields(Run) if f.name in run})
    rendered = _as_redacted(render_command(study, shape, root, launcher_for(study, root).verl_args()).splitlines())
    lines = _as_redacted(command.splitlines())
    trainer = job.get("trainer") or TRAINER_MODULE
    for number, line in enumerate(rendered):
        if line.startswith("exec ") and number < len(lines):
            ours = line.replace(shlex.quote(TRAINER_MODULE), shlex.quote(trainer)) if trainer in TRAINERS else line
            if exec_line_matches(lines[number], ours, trainer):
                rendered[number] = lines[number]
    for number, (ours, theirs) in enumerate(zip(rendered, lines, strict=False), 1):
        if ours != theirs:
            problems.append(f"command.sh: line {number} is {theirs[:100]!r}, the study gives {ours[:100]!r}")
            break
    if len(lines) != len(rendered):
        more = lines[len(rendered) :]
        count = "one line more" if len(more) == 1 else f"{len(lines) - len(rendered):+d} lines"
        first_extra = f"; first extra line {more[0][:100]!r}" if more else ""
        problems.append(f"command.sh: {count} than the study gives{first_extra}")
    return problems
