"""The workflow environment of a cluster's login node (envs/workflow.txt, `make workflow-env`): without
torch, verl or Ray it plans the LUMI study, dry-runs it through the LUMI profile, and analyses and
reports a completed study. Marker `workflow_env`; `make test` builds the environment first and CI
sets RLVR_REQUIRE_WORKFLOW_ENV=1."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from rlvr_scaling import paths

from .conftest import REPO, WORKFLOW_PYTHON
from .study_runs import STUDY_SETS, fabricate_study, study_args

pytestmark = pytest.mark.workflow_env
ACCOUNT = {"RLVR_SLURM_ACCOUNT": "project_465000000"}
ENGINE = ("torch", "verl", "ray", "vllm", "transformers", "tensordict", "hydra")


def light(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A command of the workflow environment, with nothing of the test's own environment on its path."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environment["PATH"] = f"{WORKFLOW_PYTHON.parent}:{environment['PATH']}"
    result = subprocess.run(
        list(args), cwd=cwd, capture_output=True, text=True, timeout=600, env={**environment, **(env or {})}
    )
    assert result.returncode == 0, f"{' '.join(args)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return light(str(WORKFLOW_PYTHON), "-m", "rlvr_scaling", *args, **kwargs)


def test_the_workflow_environment_holds_no_engine() -> None:
    code = f"import importlib.util as u, json; print(json.dumps([m for m in {ENGINE!r} if u.find_spec(m)]))"
    assert json.loads(light(str(WORKFLOW_PYTHON), "-c", code).stdout) == []


def test_it_plans_and_dry_runs_the_lumi_study(workdir: Path) -> None:
    plan = cli("plan", "--site", "lumi", env=ACCOUNT).stdout
    assert "gsm8k" in plan and "dapo_math" in plan
    (workdir / "lumi").symlink_to(REPO / "lumi")
    snakemake = str(WORKFLOW_PYTHON.with_name("snakemake"))
    # LUMI keeps results on /scratch/<account>/ (storage.results); here, beside the workdir.
    scratch = {"RLVR_RESULTS_ROOT": str(workdir.parent / f"{workdir.name}-scratch")}
    output = light(snakemake, "--profile", "lumi", "-n", cwd=workdir, env={**ACCOUNT, **scratch}).stdout
    assert "preflight" in output and "container_image" in output and "run" in output
    # A dry run writes nothing but the link to the results' storage (and its mark of this clone).
    assert (workdir / "results").resolve() == Path(scratch["RLVR_RESULTS_ROOT"]).resolve()
    assert [p.name for p in (workdir / "results").iterdir()] == [".clone"]


def test_it_analyses_and_reports_a_completed_study(tmp_path: Path) -> None:
    # The run directories of a completed LUMI study, written by the full environment (as verl's runs
    # leave them); everything after the runs is the workflow environment's.
    study = fabricate_study(tmp_path)
    results = paths.results_dir(tmp_path)
    args = study_args(STUDY_SETS, tmp_path)
    one = next(r for r in study.runs.values() if not r.failed)
    again = tmp_path / "summary-again.json"
    cli("summarize", str(one.run_dir), "--output", str(again))
    assert json.loads(again.read_text()) == json.loads(one.summary_path.read_text())
    indexes = [str(p) for p in study.index_paths]
    tables, figures, report = results / "tables", results / "figures", results / "report" / "study.md"
    cli("tables", *args, "--output", str(tables), *indexes)
    cli("figures", *args, "--output", str(figures), *indexes)
    cli("report", *args, "--tables", str(tables), "--figures", str(figures), "--output", str(report), *indexes)
    cli(
        "bundle", *args, "--output", str(results / "bundle"), "--report", str(report),
        "--tables", str(tables), "--figures", str(figures), *indexes,
    )  # fmt: skip
    assert any(tables.glob("*.csv")) and any(figures.glob("*.png")) and "Weak scaling" in report.read_text()
    [bundle] = (results / "bundle").glob("*.tar.gz")
    with tarfile.open(bundle) as archive:
        assert any(name.endswith("study.md") for name in archive.getnames())
    # The crate is written with `rocrate`, which this environment holds; the bundle verifies in it.
    assert "verified" in cli("verify", str(bundle)).stdout
