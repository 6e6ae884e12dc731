"""Energy where the site counts it (#34): HPE Cray's pm_counters read by the launcher at the run's start,
end and step boundaries; joules per step and per trajectory in the summary; "not measured", never 0,
where there are no counters. This machine has no /sys/cray/pm_counters: a folder in its layout stands
in, advanced as a node's would be (on LUMI the kernel advances it; the reader is the same)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rlvr_scaling import paths
from rlvr_scaling.analysis.per_run.energy_use import summarize_energy
from rlvr_scaling.execution.energy import EnergyMeter, joules_between, read_pm_counters
from rlvr_scaling.execution.step_clock import StepClock
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import Run, build_plan
from rlvr_scaling.study.sections import Energy

from .workflow_helpers import STANDIN, assert_no_run_processes


def write_counters(folder: Path, node: int, accelerators: list[int]) -> None:
    """The pm_counters layout: one file per counter, "<joules> J <microseconds> us", and others beside."""
    folder.mkdir(exist_ok=True)
    (folder / "energy").write_text(f"{node} J 1733200000000000 us\n")
    for i, joules in enumerate(accelerators):
        (folder / f"accel{i}_energy").write_text(f"{joules} J 1733200000000000 us\n")
    (folder / "power").write_text("512 W 1733200000000000 us\n")
    (folder / "freshness").write_text("42\n")


def test_pm_counters_are_read_by_name_and_unit(tmp_path: Path) -> None:
    write_counters(tmp_path, 123456, [1000, 2000])
    assert read_pm_counters(tmp_path) == {"node": 123456.0, "accel0": 1000.0, "accel1": 2000.0}
    (tmp_path / "energy").unlink()  # no node total: no reading, not a partial one
    assert read_pm_counters(tmp_path) is None
    assert read_pm_counters(tmp_path / "absent") is None
    # A counter that went back (a reset) gives no figure, rather than a negative one.
    assert joules_between({"node": 10.0}, {"node": 5.0}) is None
    assert joules_between({"node": 5.0, "accel0": 1.0}, {"node": 9.0, "accel0": 3.0}) == {"node": 4.0, "accel0": 2.0}


def test_the_step_clock_reads_the_counters_as_it_stamps_the_first_and_last_steps(tmp_path: Path) -> None:
    counters, metrics = tmp_path / "pm", tmp_path / "metrics.jsonl"
    meter = EnergyMeter("pm_counters", str(counters))
    clock = StepClock(metrics, energy=meter.read)
    node, accel = 1_000_000, 50_000
    for step in range(1, 6):  # each step 3 kJ on the node, 1 kJ of it on accelerator 0
        node, accel = node + 3000, accel + 1000
        write_counters(counters, node, [accel])
        with open(metrics, "a") as handle:
            handle.write(json.dumps({"step": step, "data": {}}) + "\n")
        clock.poll()
    record = clock.record()
    assert record["first_step_energy_j"] == {"node": 1_003_000.0, "accel0": 51_000.0}
    assert record["last_step_energy_j"] == {"node": 1_015_000.0, "accel0": 55_000.0}
    job = {"energy": {"source": "pm_counters"}, "step_clock": record}
    energy = summarize_energy(job, nodes=2, trajectories=400)
    # Steps 2..5: 12 kJ over 4 steps on the node read; the run's 2 nodes drew alike: 6 kJ a step, 15 J
    # a trajectory.
    assert energy["steps"] == [2, 5] and energy["joules_per_step_per_node"] == 3000.0
    assert energy["accelerator_joules_per_step_per_node"] == 1000.0
    assert energy["joules_per_step"] == 6000.0 and energy["joules_per_trajectory"] == 15.0


def test_without_counters_energy_is_not_measured_and_says_why() -> None:
    assert summarize_energy({"energy": {"source": "none"}}, 1, 8) == {
        "not_measured": "the site names no energy counters (energy.source)"
    }
    assert summarize_energy({}, 1, 8)["not_measured"].startswith("the run's job.json has no energy record")
    unread = summarize_energy({"energy": {"source": "pm_counters"}, "step_clock": {"first_step": 1}}, 1, 8)
    assert unread["not_measured"] == "the pm_counters counters were not read at two step boundaries"
    assert "joules_per_step" not in unread


@pytest.mark.standin
def test_the_launcher_reads_the_counters_a_working_node_advances(tmp_path: Path, monkeypatch) -> None:
    # The real launcher runs the stand-in trainer (tests/standin_trainer.py), which adds 2 kJ to the
    # node's counter (250 J to each of 4 accelerators) in each step before logging it, as a working
    # node's counters advance; production reads /sys/cray/pm_counters, which LUMI's kernel advances.
    from rlvr_scaling.execution.launch import launch

    counters = tmp_path / "pm_counters"
    write_counters(counters, 7_000_000, [100_000] * 4)
    for key, value in {
        **STANDIN,
        "RLVR_STANDIN_PM_COUNTERS": str(counters),
        "RLVR_STANDIN_STEP_SECONDS": "0.2",
    }.items():
        monkeypatch.setenv(key, value)
    study = load_study(site="local", sets=["only_datasets=[gsm8k]", "algorithm.steps=20"])
    study = dataclasses.replace(
        study, site=dataclasses.replace(study.site, energy=Energy(source="pm_counters", path=str(counters)))
    )
    root = tmp_path / "root"
    run = next(r for r in build_plan(study, root=root) if isinstance(r, Run))
    data = paths.dataset_dir(root, "local", "gsm8k")
    data.mkdir(parents=True)
    (data / "manifest.json").write_text(json.dumps({"files": {"train": {"rows": 1000}}}))
    model = paths.model_dir(root, "local", study.model_folder)
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    final = launch(study, run, root)
    job = json.loads((final / "job.json").read_text())
    assert job["energy"]["start"]["node"] == 7_000_000.0
    assert job["energy"]["end"]["node"] == 7_000_000.0 + 20 * 2000
    energy = summarize_energy(job, run.nodes, run.trajectories)
    first, last = energy["steps"]
    # The launcher looks once a second; a reading belongs to the last step of its look. It may
    # already hold the next step's energy (the trainer adds it before logging the step), never less
    # than its own: 2 kJ a step, or one step short over the steps between, 2000 x (n - 1) / n.
    steps = last - first + 1
    assert last == 20 and 2000 * (steps - 1) / steps <= energy["joules_per_step_per_node"] <= 2000
    assert energy["accelerator_joules_per_step_per_node"] == pytest.approx(energy["joules_per_step_per_node"] / 2)
    assert energy["run_joules_per_node"] == 20 * 2000
    assert_no_run_processes()
