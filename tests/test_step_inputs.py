"""What defines each derived step and each run: a changed setting or module names exactly the steps
and runs that read it (the workflow wiring is checked by dry runs in test_local_study.py)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
from rlvr_scaling import paths
from rlvr_scaling.step_inputs import SETTINGS_STEPS, _imported_modules, settings_path, settings_steps, step_code
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan, known_runs

from .conftest import PYTHON
from .study_edits import edited


def _changed_steps(**changes: dict) -> set[str]:
    study = load_study(site="lumi")
    other = edited(study, **changes)
    steps = settings_steps(study)
    return {step for step in steps if settings_path(study, step) != settings_path(other, step)}


def _run_ids(study) -> set[str]:  # noqa: ANN001
    return {run.run_id for run in known_runs(build_plan(study, {"gsm8k": 100, "dapo_math": 10}, Path("/r")))}


def test_a_changed_setting_names_new_settings_files_for_exactly_the_steps_that_read_it() -> None:
    assert _changed_steps(config={"selection_rule": {"tolerance": 0.5}}) == {"selection", "bundle"}
    assert _changed_steps(config={"algorithm": {"warmup_steps": 2}}) == {"summary", "report", "bundle"}
    assert _changed_steps(config={"scaling": {"strong_reference_nodes": 8}}) == {
        "preflight",
        "index",
        "tables",
        "figures",
        "report",
        "bundle",
    }
    # Time-limit estimates: only the bundle, which holds the config (the runs do not change).
    assert _changed_steps(config={"estimate": {"time_limit_factor": 4.0}}) == {"bundle"}
    # The budget decides what is submitted, the title and authors what the bundle cites.
    assert _changed_steps(config={"budget": {"node_hours": 200}}) == {"bundle"}
    assert _changed_steps(config={"study": {"name": "qwen3-8b-grpo-verl", "title": "T"}}) == {"bundle"}
    # An input's own settings: that input is made again, and what checks or holds them.
    assert _changed_steps(config={"datasets": {"gsm8k": {"revision": "v2"}}}) == {
        "dataset@gsm8k",
        "preflight",
        "bundle",
    }
    assert _changed_steps(config={"model": {"revision": "abc123"}}) == {"model", "preflight", "report", "bundle"}
    assert _changed_steps(site={"slurm": {"partition": "other-g"}}) == {"preflight"}
    assert _changed_steps() == set()


def test_each_step_runs_its_module_and_what_it_imports_and_no_other_steps() -> None:
    def names(step: str) -> set[str]:
        return {str(Path(path).relative_to(paths.PACKAGE_DIR)) for path in step_code(step)}

    assert {"analysis/shown/tables.py", "measured/stats.py", "measured/models.py"} <= names("tables")
    assert "analysis/shown/figures.py" not in names("tables") and "publish/report.py" not in names("tables")
    assert {"analysis/shown/figures.py", "analysis/shown/tables.py"} <= names(
        "figures"
    )  # figures are drawn from tables
    assert "analysis/shown/tables.py" not in names("summary") and "analysis/per_run/summary.py" in names("summary")
    for step in ("summary", "selection", "index", "tables", "figures", "report", "bundle"):
        assert "cli.py" not in names(step) and "execution/launch.py" not in names(step), step
        assert all(Path(path).is_file() for path in step_code(step))


def _imported_by_syntax_tree(source: Path) -> frozenset[str]:
    """Python's own reading of a module's module-level imports from the package."""
    names = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rlvr_scaling"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("rlvr_scaling"))
    return frozenset(names)


def test_the_imports_read_from_lines_are_pythons_own_for_every_module(tmp_path: Path) -> None:
    modules = sorted(paths.PACKAGE_DIR.rglob("*.py"))
    assert len(modules) > 100
    for module in modules:
        assert _imported_modules(module) == _imported_by_syntax_tree(module), module
    # The shapes the package does not use today: aliases, comments, several lines, an import inside a
    # function or a block (not at module level), a plain import of the package beside another; then
    # those the patterns leave to Python's parser (a backslash, a semicolon, a comment in parentheses).
    shapes = {
        "read": (
            "import os, rlvr_scaling.paths as p  # why (not)\n"
            "from rlvr_scaling.study import (\n    config as c,\n    plan,\n)\n"
            "from rlvr_scaling.errors import StudyError, ConfigError\n"
            "from rlvr_scaling import(fsutil)\n"
            "def f():\n    from rlvr_scaling.publish import bundle\n"
            "try:\n    import rlvr_scaling.cli\nexcept ImportError:\n    pass\n"
        ),
        "backslash": "from rlvr_scaling.study import config, \\\n    plan\nimport os, \\\n    rlvr_scaling.paths\n",
        "semicolon": "import os; import rlvr_scaling.paths\nimport rlvr_scaling.errors; x = 1\n",
        "comment": "from rlvr_scaling.study import (  # the (old) names\n    config,\n    plan,\n)\n",
    }
    expected = {
        "read": {"paths", "study", "study.config", "study.plan", "errors", "errors.StudyError", "errors.ConfigError"}
        | {"rlvr_scaling.fsutil"},
        "backslash": {"study", "study.config", "study.plan", "paths"},
        "semicolon": {"paths", "errors"},
        "comment": {"study", "study.config", "study.plan"},
    }
    for name, text in shapes.items():
        module = tmp_path / f"{name}.py"
        module.write_text(text)
        wanted = {n if n.startswith("rlvr_scaling") else f"rlvr_scaling.{n}" for n in expected[name]}
        if name == "read":
            wanted.add("rlvr_scaling")  # `from rlvr_scaling import(fsutil)` names the package itself
        assert _imported_modules(module) == _imported_by_syntax_tree(module) == wanted, name


def test_what_a_run_measures_names_a_new_run_and_how_it_starts_does_not() -> None:
    study = load_study(site="lumi")
    base = _run_ids(study)
    for changes in (
        {"site": {"environment": {"NCCL_NET_GDR_LEVEL": "SYS"}}},
        {"site": {"engine_options": {"rollout_enforce_eager": False}}},
        {"config": {"algorithm": {"lr": 1e-6}}},
    ):
        assert _run_ids(edited(study, **changes)).isdisjoint(base), changes
    for changes in (
        {"site": {"slurm": {"partition": "other-g", "max_walltime_minutes": 4000}}},
        {"site": {"launch": {"ray_port": 6400, "join_timeout_seconds": 900}}},
        {"site": {"storage": {"results": "/flash/{account}/results"}}},
        {"config": {"selection_rule": {"tolerance": 0.5}, "estimate": {"time_limit_factor": 3.0}}},
        {"config": {"algorithm": {"warmup_steps": 2}}},
    ):
        assert _run_ids(edited(study, **changes)) == base, changes


def test_the_settings_command_writes_only_the_file_its_name_promises(tmp_path: Path) -> None:
    study = load_study()
    good = tmp_path / Path(settings_path(study, "figures")).name
    command = [PYTHON, "-m", "rlvr_scaling", "step-settings", "--step", "figures"]
    subprocess.run([*command, "--output", str(good)], check=True, capture_output=True)
    assert good.read_text().strip() == '{"strong_reference_nodes":2}'
    stale = tmp_path / "figures-000000000000.json"
    result = subprocess.run([*command, "--output", str(stale)], capture_output=True, text=True)
    assert result.returncode != 0 and "is not the name of the figures settings" in result.stderr
    assert not stale.exists()


@pytest.mark.parametrize("step", SETTINGS_STEPS)
def test_settings_files_live_under_results_steps(step: str) -> None:
    path = Path(settings_path(load_study(), step))
    assert path.parent == Path("results") / "steps" and path.name.startswith(f"{step}-")
