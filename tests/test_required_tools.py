"""The required-tool switch, proven the hard way: with sbatch, apptainer, verl and the login-node
environment hidden in a private mount namespace and RLVR_REQUIRE_*=1, every test that needs them fails
at setup, at once, with one clear line."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO, WORKFLOW_PYTHON

REQUIRE = {
    "RLVR_REQUIRE_SLURM": "1",
    "RLVR_REQUIRE_APPTAINER": "1",
    "RLVR_REQUIRE_VERL": "1",
    "RLVR_REQUIRE_WORKFLOW_ENV": "1",
}
GUARDED = (
    "tests/test_slurm.py",
    "tests/test_apptainer.py",
    "tests/test_verl_compose.py",
    "tests/test_local_study.py",
    "tests/test_run_faults.py",
    "tests/test_workflow_reruns.py",
    "tests/test_workflow_env.py",
)


def _hide_commands(empty_dir: Path) -> list[str]:
    """Shell commands that hide each tool inside the namespace (bind mounts over what is installed)."""
    commands = []
    for binary in ("sbatch", "apptainer"):
        found = shutil.which(binary)
        if found:  # /dev/null has no execute bit, so `which` no longer finds it
            commands.append(f"mount --bind /dev/null {found}")
    spec = importlib.util.find_spec("verl")
    if spec is not None and spec.origin:  # an empty directory over the package is a namespace package, not verl
        commands.append(f"mount --bind {empty_dir} {Path(spec.origin).parent}")
    # The whole login-node environment: its python is a link to the interpreter this test runs on.
    venv = WORKFLOW_PYTHON.parent.parent
    if venv.is_dir():
        commands.append(f"mount --bind {empty_dir} {venv}")
    return commands


@pytest.mark.heavy
def test_missing_required_tools_fail_every_guarded_test_at_setup_in_one_line(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        reason = "needs root and unshare(1) for a private mount namespace"
        if any(os.environ.get(v) == "1" for v in REQUIRE):
            pytest.fail(f"RLVR_REQUIRE_*=1 but this check cannot run: {reason}")
        pytest.skip(reason)
    empty = tmp_path / "empty"
    empty.mkdir()
    script = "; ".join([*_hide_commands(empty), 'exec "$@"'])
    command = [
        "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rE", "--no-header", *GUARDED,
    ]  # fmt: skip
    # The inner sessions' output is read line by line: options from the caller's PYTEST_ADDOPTS (a -v,
    # a --durations) would change its form, so they run with pytest's defaults and the flags above.
    own = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env={**own, **REQUIRE})
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    print(f"guarded tests with the tools hidden: {seconds:.1f} s")
    assert result.returncode == 1, output[-3000:]
    summary = output.strip().splitlines()[-1]
    errors = int(re.search(r"(\d+) errors?", summary).group(1))
    assert "passed" not in summary and "skipped" not in summary and "failed" not in summary, summary
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--co", *GUARDED],
        cwd=REPO, capture_output=True, text=True, check=True, env=own,
    ).stdout  # fmt: skip
    assert errors == len([line for line in collected.splitlines() if "::" in line]), (summary, collected)
    # Each error is the one line of the hook: the variable and the tool, no traceback.
    for line in ("RLVR_REQUIRE_SLURM=1 but sbatch not found", "RLVR_REQUIRE_APPTAINER=1 but apptainer not found",
                 "RLVR_REQUIRE_VERL=1 but verl is not importable",
                 f"RLVR_REQUIRE_WORKFLOW_ENV=1 but {WORKFLOW_PYTHON} is missing"):  # fmt: skip
        assert line in output, output[-3000:]
    assert "Traceback" not in output and "FileNotFoundError" not in output, output[-3000:]
