"""Shared fixtures; tests that need Slurm or Apptainer skip without them unless CI requires them."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from rlvr_scaling.paths import link_workflow

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
REQUIREMENTS = {
    "slurm": ("RLVR_REQUIRE_SLURM", "sbatch", "no Slurm cluster here (sbatch not found)"),
    "apptainer": ("RLVR_REQUIRE_APPTAINER", "apptainer", "no Apptainer here (apptainer not found)"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker, (variable, binary, reason) in REQUIREMENTS.items():
            if marker in item.keywords and shutil.which(binary) is None:
                if os.environ.get(variable) == "1":
                    # A required tool that is missing is a failure, not a skip.
                    item.add_marker(pytest.mark.usefixtures("_missing_required_tool"))
                else:
                    item.add_marker(pytest.mark.skip(reason=f"{reason}; set {variable}=1 to make this a failure"))


@pytest.fixture
def _missing_required_tool(request: pytest.FixtureRequest) -> None:
    missing = [f"{var}=1 but {reason}" for m, (var, _, reason) in REQUIREMENTS.items() if m in request.keywords]
    pytest.fail("; ".join(missing))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory that sees the repository's workflow but keeps its own results/."""
    return link_workflow(tmp_path)


# The account tests submit under on the test cluster (tests/slurm/cluster.sh creates it).
SLURM_TEST_ACCOUNT = os.environ.get("RLVR_SLURM_TEST_ACCOUNT", "rlvr-test")


@pytest.fixture
def slurm_workdir(workdir: Path) -> Path:
    """A workdir that also sees the LUMI profile and the Slurm test profile layered on it."""
    (workdir / "lumi").symlink_to(REPO / "lumi")
    (workdir / "tests").mkdir()
    (workdir / "tests" / "slurm").symlink_to(REPO / "tests" / "slurm")
    return workdir
