"""What defines a derived step's output besides its data: the study's settings it reads and the code
that computes it.

Both are inputs of the step's rule. The settings are a file named by their content,
results/steps/<step>-<digest>.json (made by the rule step_settings): a changed setting names another
file, so the rule's input set changes and Snakemake's `input` trigger reruns it. The code is the
package's module files the step runs: an edited module is newer and has other contents, so the
`mtime` trigger reruns the step (Snakemake compares checksums before it believes a newer time stamp,
so a checkout that only touches files reruns nothing). A setting or module a step does not read
leaves it, and everything made from it, alone.

The runs are not steps here: what defines a run's result is its identity (study.plan), and a run is
redone only when that changes, never for a changed launcher module or an unread setting.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.inputs.chat_template import template_record
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.identity import canonical_json, digest

STEPS_DIR = "steps"
# The module each derived step's command runs; the code it depends on is what that imports (at
# module level) from the package. cli.py and commands/ only read arguments and call it, so they are
# no step's code. The preflight (a Slurm job on a cluster) and the inputs are redone for a changed
# setting, not for an edited module.
STEP_MODULES = {
    "summary": "analysis.per_run.summary",
    "selection": "analysis.across_runs.selection",
    "index": "analysis.per_run.results_io",
    "tables": "analysis.shown.table_files",
    "figures": "analysis.shown.figures",
    "report": "publish.report",
    "bundle": "publish.bundle",
}


def preflight_settings(study: Study) -> dict[str, Any]:
    # What the preflight checks: the study and the site, but not the selection rule or the warm-up
    # the analysis leaves out (nor the raw overrides, which the config holds applied). Nor the
    # estimates: a run over a job's time limit stops the planning with an error naming the key
    # anyway, and a preflight made again would hide the other steps' changes in that invocation
    # (snakemake#4166: the runs take it as ancient), e.g. the bundle that holds the estimates.
    # Nor the budget, which decides what is submitted, not how it runs, nor the study's title and
    # authors, which only the bundle cites, nor the published study it is judged against. Nor the
    # adaptive step count: the launcher's, not verl's.
    unseen = ("estimate", "selection_rule", "overrides", "budget", "adaptive_steps")
    checked = {key: value for key, value in study.config.to_dict().items() if key not in unseen}
    checked["algorithm"].pop("warmup_steps", None)
    for key in ("title", "authors", "reference"):
        checked["study"].pop(key, None)
    site = study.site.to_dict()
    site["hardware"].pop("peak_tflops_bf16", None)  # MFU's divisor, the summaries'
    site.pop("energy", None)  # read beside the run, not by it
    site.pop("billing", None)  # what the runs cost, not how they run
    site.pop("toy_scale", None)  # applied to the config, which is checked
    return {"config": checked, "site": site}


def step_settings(study: Study, step: str) -> dict[str, Any]:
    """The settings of the study `step` reads, and nothing else. `dataset@<name>`: one dataset's."""
    config = study.config
    reference = {"strong_reference_nodes": config.scaling.strong_reference_nodes}
    kind, _, part = step.partition("@")
    if kind == "dataset" and part in config.datasets:
        data = config.datasets[part]
        return {"name": part, **data.build_settings(), "self_check": data.self_check.to_dict()}
    if step == "model":
        model = config.model
        return {
            "name": model.name,
            "source": model.source,
            "revision": model.revision,
            "max_context": model.max_context,
            # Another folder is another model, under the same name as much as under another.
            **({"path": str(model.path)} if model.source == "local" else {}),
            # A changed template file makes the model folder again (it holds the template).
            **({"chat_template": template_record(model)} if model.chat_template else {}),
        }
    if step == "preflight":
        return preflight_settings(study)
    if step == "summary":
        return {"warmup_steps": config.algorithm.warmup_steps, "peak_tflops_bf16": study.site.hardware.peak_tflops_bf16}
    if step == "selection":
        # The planned points too: the selection lists those a sequential sweep skipped.
        sweeps = {name: config.datasets[name].sweep for name in study.datasets}
        return {"selection_rule": config.selection_rule.to_dict(), "sweeps": sweeps}
    if step == "index":  # which runs belong to which series
        return {"selection": config.selection, "scaling": config.scaling.to_dict()}
    if step == "figures":
        return reference
    if step == "tables":  # the reproduction table judges against the published numbers
        return {**reference, "published": study.reference()}
    if step == "report":
        algorithm = config.algorithm
        return {
            "study": study.name,
            "site": study.site_name,
            "model": {"name": config.model.name, "source": config.model.source, "revision": config.model.revision},
            "algorithm": {
                "responses_per_prompt": algorithm.responses_per_prompt,
                "lr": algorithm.lr,
                "steps": algorithm.steps,
                "warmup_steps": algorithm.warmup_steps,
            },
            # Only when on: its section names the rule. Off, the report is as it was.
            **({"adaptive_steps": config.adaptive_steps.rule()} if config.adaptive_steps.enabled else {}),
            **reference,
            "published": study.reference(),
        }
    if step == "bundle":  # it holds the config
        return config.to_dict()
    raise StudyError(f"no settings are defined for step {step!r} (steps: {', '.join(settings_steps(study))})")


def settings_steps(study: Study) -> list[str]:
    """Every step with a settings file: one per dataset of the study, then the rest."""
    return [*(f"dataset@{name}" for name in study.datasets), *SETTINGS_STEPS]


SETTINGS_STEPS = ("model", "preflight", "summary", "selection", "index", "tables", "figures", "report", "bundle")


def settings_text(study: Study, step: str) -> str:
    return canonical_json(step_settings(study, step)) + "\n"


def settings_path(study: Study, step: str, root: Path | None = None) -> str:
    """results/steps/<step>-<digest of its settings>.json"""
    name = f"{step}-{digest(settings_text(study, step), 12)}.json"
    return str(paths.results_dir(root or Path(".")) / STEPS_DIR / name)


# A module-level import of the package: at the line's start (an indented one is inside a function, a
# class or a block), its names up to the line's end or, in parentheses, to the closing one.
FROM_IMPORT = re.compile(r"^from[ \t]+(rlvr_scaling[\w.]*)[ \t]+import\b[ \t]*(\([^)]*\)|[^\n]*)", re.M)
PLAIN_IMPORT = re.compile(r"^import[ \t]+([^\n]*)", re.M)
# Import shapes the two patterns do not read: a line continued by a backslash, statements after a
# semicolon, a comment inside parentheses (it may hold one). A module with one is parsed instead.
UNREAD_SHAPES = re.compile(r"^(?:from|import)[ \t][^\n]*(?:\\[ \t]*$|;)|^from[ \t][^\n(]*\([^)]*#", re.M)


def _imported_names(clause: str) -> list[str]:
    """The names an import clause brings: ['a', 'c'] of 'a as b, c  # why', also written in parentheses
    over several lines."""
    lines = (line.split("#", 1)[0] for line in clause.strip().strip("()").splitlines())
    return [part.split()[0] for part in ",".join(lines).split(",") if part.strip()]


@functools.cache  # each step's walk meets the same modules: read each once
def _imported_modules(source: Path) -> frozenset[str]:
    """What the module imports from the package at module level. Read from its lines, not its syntax
    tree, where the module's imports have the shapes the patterns read: every Snakemake start walks
    about 70 modules, and parsing them took 0.2-0.4 s of it (tests/test_step_inputs.py holds both
    readings equal on every module of the package and on each shape)."""
    text = source.read_text()
    if UNREAD_SHAPES.search(text):
        return _imported_by_syntax_tree(text)
    names = set()
    for match in FROM_IMPORT.finditer(text):
        module = match.group(1)
        names.add(module)
        names.update(f"{module}.{name}" for name in _imported_names(match.group(2)))  # from pkg import module
    for match in PLAIN_IMPORT.finditer(text):
        names.update(name for name in _imported_names(match.group(1)) if name.startswith("rlvr_scaling"))
    return frozenset(names)


def _imported_by_syntax_tree(text: str) -> frozenset[str]:
    names = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rlvr_scaling"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # from pkg import module
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("rlvr_scaling"))
    return frozenset(names)


def _module_file(name: str) -> Path | None:
    base = paths.PACKAGE_DIR.parent / name.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None  # a name imported from a module, not a module


def step_code(step: str) -> list[str]:
    """The package's files the step runs: its module and what that imports from the package, at
    module level (imports inside functions are deferred on purpose and left out)."""
    todo, seen = [f"rlvr_scaling.{STEP_MODULES[step]}"], set()
    while todo:
        source = _module_file(todo.pop())
        if source is not None and source not in seen:
            seen.add(source)
            todo += _imported_modules(source)
    return sorted(str(path) for path in seen)
