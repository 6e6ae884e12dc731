"""The launcher's pieces on their own, without verl: the run's folder, the launcher per `launch.kind`,
and what a run's end means for the study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.execution.failed_runs import LAUNCHER_FILE, NOTE, TOKEN_FILE
from rlvr_scaling.execution.launchers import launcher_for
from rlvr_scaling.execution.launchers.local import LocalLauncher
from rlvr_scaling.execution.launchers.ray_srun import RaySrunLauncher
from rlvr_scaling.execution.outcome import judge
from rlvr_scaling.execution.run_directory import RunDirectory
from rlvr_scaling.measured.metrics_file import REQUIRED_STEP_KEYS
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan, known_runs

from .study_edits import edited


def test_a_run_directory_is_staged_then_committed_whole_without_the_launchs_marks(tmp_path: Path) -> None:
    directory = RunDirectory(tmp_path, "gsm8k-n1-p2-abc", stamp="20261130T120000Z")
    directory.refuse_existing()
    directory.create()
    assert directory.staging.parent == tmp_path / "results" / "runs"
    assert directory.staging.name.startswith(".staging-gsm8k-n1-p2-abc-20261130T120000Z-")
    assert (directory.staging / TOKEN_FILE).read_text().strip() == directory.token
    assert (directory.staging / LAUNCHER_FILE).exists()
    directory.write_json("spec.json", {"run": 1})
    script = directory.write_script("command.sh", "#!/usr/bin/env bash\n")
    assert script.stat().st_mode & 0o111
    final = directory.commit()
    assert final == tmp_path / "results" / "runs" / "gsm8k-n1-p2-abc" and not directory.staging.exists()
    assert sorted(p.name for p in final.iterdir()) == ["command.sh", "spec.json"]
    with pytest.raises(StudyError, match="exists already: runs are never rewritten in place"):
        RunDirectory(tmp_path, "gsm8k-n1-p2-abc").refuse_existing()


def test_a_failed_run_directory_is_filed_with_its_note_and_job_status(tmp_path: Path) -> None:
    directory = RunDirectory(tmp_path, "gsm8k-n1-p2-abc", stamp="20261130T120000Z")
    directory.create()
    directory.write_json("job.json", {"status": "running"})
    filed = directory.file_failed("run gsm8k-n1-p2-abc failed (exit status 1)", status="failed")
    assert filed == tmp_path / "results" / "failed" / "gsm8k-n1-p2-abc" / "20261130T120000Z"
    assert (filed / NOTE).read_text() == "run gsm8k-n1-p2-abc failed (exit status 1)\n"
    assert json.loads((filed / "job.json").read_text())["status"] == "failed"
    assert not directory.staging.exists() and not directory.final.exists()


def test_each_launch_kind_has_its_launcher_and_its_own_verl_arguments(tmp_path: Path) -> None:
    local = launcher_for(load_study(site="local"), tmp_path)
    assert isinstance(local, LocalLauncher) and local.verl_args() == ["+ray_kwargs.ray_init.address=local"]
    slurm = launcher_for(load_study(site="ci-slurm"), tmp_path)
    assert isinstance(slurm, RaySrunLauncher) and slurm.verl_args() == []
    study = load_study(site="local")
    odd = edited(study, site={"launch": {"kind": "mpirun"}})
    with pytest.raises(ConfigError, match="key 'launch.kind' has value 'mpirun', but expected one of local, ray-srun"):
        launcher_for(odd, tmp_path)


def test_the_slurm_launcher_refuses_to_start_outside_a_slurm_job(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    study = load_study(site="ci-slurm")
    run = known_runs(build_plan(study, root=tmp_path))[0]
    with pytest.raises(StudyError, match="launches inside a Slurm job, but SLURM_JOB_ID is not set"):
        RaySrunLauncher(study, tmp_path).start(run, tmp_path / "ray", {}, {})


def _write_steps(run_dir: Path, steps: int) -> None:
    records = [{"step": s, "data": {key: 1.5 for key in REQUIRED_STEP_KEYS}} for s in range(1, steps + 1)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize(
    ("series", "exit_status", "steps_logged", "console", "status", "lands"),
    [
        (["sweep"], "succeeded", 3, "", "succeeded", True),
        (["weak"], "succeeded", 2, "", "invalid metrics", False),  # a short run is no measurement
        (["weak"], "succeeded", None, "", "invalid metrics", False),  # exit 0 without metrics
        (["sweep"], "failed", None, "torch.OutOfMemoryError: HIP out of memory\n", "failed", True),
        (["weak", "strong"], "failed", None, "torch.OutOfMemoryError: HIP out of memory\n", "failed", False),
        # Ray names the OOM killer for any dead worker, a killed one too: not evidence of memory.
        (["sweep"], "failed", None, "killed by SIGKILL by OOM killer ...\n", "failed", False),
        (["sweep"], "timed out", None, "torch.OutOfMemoryError\n", "timed out", False),
        # Exit 0 and too few steps: no measurement, whatever the console says; its evidence is recorded.
        (["sweep"], "succeeded", 2, "torch.OutOfMemoryError\n", "invalid metrics", False),
        # Stopped by the adaptive step count after step 3 (the last step it had to log): a measurement.
        (["weak"], "stopped early", 3, "", "succeeded", True),
        (["weak"], "stopped early", 2, "", "invalid metrics", False),
    ],
)
def test_what_a_runs_end_means_for_the_study(
    tmp_path: Path, series, exit_status, steps_logged, console, status, lands
) -> None:
    if steps_logged is not None:
        _write_steps(tmp_path, steps_logged)
    (tmp_path / "console.log").write_text(console)
    outcome = judge(tmp_path, series, exit_status, last_step=3)
    assert (outcome.status, outcome.lands_in_runs) == (status, lands)
    assert bool(outcome.problems) == (status == "invalid metrics")
    assert (outcome.memory_evidence is not None) == ("OutOfMemoryError" in console and status != "succeeded")
