"""The package's type hints are checked, not only written (#55): mypy, configured in pyproject.toml over
both packages, reports no error. `make lint` runs the same command; this test puts it in CI."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import PYTHON, REPO

pytestmark = pytest.mark.heavy


def test_mypy_finds_no_error_in_the_package() -> None:
    done = subprocess.run(
        [PYTHON, "-m", "mypy", "--cache-dir", "/dev/null"], capture_output=True, text=True, cwd=REPO, timeout=900
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success: no issues found in "), done.stdout
