"""A dataset's own reward function: a Python file of the user's (`reward.file`, `reward.function`),
which verl loads as its custom_reward_function. The data stage copies it beside the rows (REWARD_COPY)
and the runs load that copy; its sha256 enters each run's identity, so a changed reward is another run.

The file is checked without importing it (the workflow's environment need not have what it imports):
it must parse and define the named function at its top level.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rlvr_scaling.errors import StudyError
from rlvr_scaling.fsutil import sha256_file
from rlvr_scaling.study.sections import Dataset
from rlvr_scaling.study.verl_args import REWARD_COPY

__all__ = ["REWARD_COPY", "check_reward_file", "reward_path"]


def reward_path(dataset: Dataset, cwd: Path | None = None) -> Path:
    """The reward file: relative to the working directory (the repository one runs from), ~ expanded."""
    path = Path(str(dataset.reward.file)).expanduser()
    return path if path.is_absolute() else (cwd or Path.cwd()) / path


def check_reward_file(name: str, dataset: Dataset, cwd: Path | None = None) -> str:
    """The file's sha256, once it is there, parses and defines the function; else StudyError naming
    the key, the file and what is wrong."""
    key = f"datasets.{name}.reward"
    path = reward_path(dataset, cwd)
    if not path.is_file():
        raise StudyError(f"{key}.file: {dataset.reward.file!r} does not exist (looked for {path})")
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        raise StudyError(f"{key}.file: {path} is not valid Python ({exc})") from None
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)} | {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    function = dataset.reward.function
    if function not in defined:
        known = ", ".join(sorted(n for n in defined if not n.startswith("_"))) or "none"
        raise StudyError(
            f"{key}.function: {path} defines no function {function!r} at its top level (it defines: {known})"
        )
    return sha256_file(path)
