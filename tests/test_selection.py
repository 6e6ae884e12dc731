"""The sweep's selection rule on constructed sweep summaries."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from rlvr_scaling.analysis.across_runs.selection import SelectionError, select
from rlvr_scaling.analysis.per_run.summary import failed_summary
from rlvr_scaling.execution.outcome import lands_in_runs, memory_evidence
from rlvr_scaling.execution.run_records import spec_document
from rlvr_scaling.measured.models import Check, Measured, RunSummary, Spread
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan


@cache
def lumi_sweep_specs() -> dict[tuple[str, int], dict]:
    """spec.json of every LUMI sweep run, as launch writes it."""
    study = load_study(site="lumi")
    plan = build_plan(study, {"gsm8k": None, "dapo_math": None}, Path("/nonexistent"))
    return {(r.dataset, r.prompts): spec_document(study, r) for r in plan if "sweep" in r.series}


def failed_point(dataset: str, prompts: int, console: str, tmp_path: Path) -> RunSummary:
    """A failed sweep point's summary from the code that writes it (summarize_run hands failed runs to it),
    with the memory evidence launch finds in its console output."""
    log = tmp_path / f"console-{prompts}.log"
    log.write_text(console)
    job = {"status": "failed", "exit_status": 1, "problems": [], "memory_evidence": memory_evidence(log)}
    return failed_summary(lumi_sweep_specs()[(dataset, prompts)], job)


OOM = "(WorkerDict pid=4802) torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB\n"
# What Ray prints for any dead worker, one killed by hand included: not evidence of running out of memory.
KILLED = (
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. "
    "End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due "
    "to high memory usage. (2) ray stop --force is called.\n"
)


def point(prompts: int, throughput: float, memory: float = 40.0, valid: bool = True) -> RunSummary:
    """A sweep point's summary with the figures the selection reads; the rest plausible."""

    def spread(mean: float) -> Spread:
        return Spread(mean, 0.0, 19)

    measured = Measured(
        n_steps=20,
        steps_used=19,
        warmup_steps=1,
        n_gpus=8,
        step_time_s=spread(100.0),
        tokens_per_step=spread(1e6),
        throughput_per_gpu=spread(throughput),
        phases_s={},
        response_length=spread(300.0),
        response_clip_ratio=spread(0.0),
        peak_memory_gb=memory,
        throughput_cross_check={},
    )
    return RunSummary(
        run_id=f"ds-n1-p{prompts}-x",
        dataset="ds",
        series=["sweep"],
        nodes=1,
        gpus=8,
        prompts=prompts,
        trajectories=prompts * 8,
        trajectories_per_engine=prompts * 8 / 8,
        concurrency=prompts * 8,
        max_response_length=1024,
        memory_settings={},
        site="lumi",
        gpu_memory_gb=64,
        measured=measured,
        checks=[Check("steps_reached", valid, "20 of 20" if valid else "7 of 20")],
        valid=valid,
        status="succeeded",
        steps=[],
        provenance={},
    )


def test_saturation_picks_the_smallest_point_within_tolerance() -> None:
    # the GSM8K pattern: throughput saturates at 100 prompts
    sweep = [point(25, 300), point(50, 400), point(100, 440), point(150, 445), point(200, 446)]
    chosen = select("gsm8k", sweep, 0.98, 0.02)
    assert chosen["selected"]["prompts"] == 100
    assert "tie" in chosen["reason"]


def test_memory_bound_excludes_points_over_the_cap_and_points_out_of_memory(tmp_path: Path) -> None:
    # the DAPO pattern: throughput keeps growing until memory runs out
    sweep = [
        point(5, 150, 50),
        point(10, 200, 62.0),
        point(15, 230, 63.5),
        failed_point("dapo_math", 20, OOM, tmp_path),
    ]
    chosen = select("dapo_math", sweep, 0.98, 0.02)
    assert chosen["selected"]["prompts"] == 10
    rejected = {p["prompts"]: p["rejected_because"] for p in chosen["points"]}
    assert "over the cap" in rejected[15][0]
    assert rejected[20][0].startswith("ran out of memory (") and "HIP out of memory" in rejected[20][0]
    assert chosen["rule"]["memory_cap_gb"] == pytest.approx(62.72)
    assert chosen["warnings"] == []


def test_a_peak_equal_to_the_cap_fits_and_one_just_over_it_does_not() -> None:
    # The cap is a limit a workload may reach: 64 GB x 0.5 = 32 GB exactly (no rounding in between).
    sweep = [point(5, 150, 20.0), point(10, 200, 32.0), point(15, 230, 32.01)]
    chosen = select("dapo_math", sweep, 0.5, 0.02)
    assert chosen["rule"]["memory_cap_gb"] == 32.0
    assert chosen["selected"]["prompts"] == 10
    eligible = {p["prompts"]: p["eligible"] for p in chosen["points"]}
    assert eligible == {5: True, 10: True, 15: False}


def test_a_point_that_failed_for_another_reason_stops_the_selection_naming_it(tmp_path: Path) -> None:
    # Killing one Ray worker used to become a permanent "memory bound" verdict for that point.
    sweep = [point(5, 150, 50), failed_point("dapo_math", 10, KILLED, tmp_path), point(15, 230, 60.0)]
    with pytest.raises(SelectionError) as caught:
        select("dapo_math", sweep, 0.98, 0.02)
    message = str(caught.value)
    assert "10 prompts" in message and "failed without running out of memory" in message
    assert sweep[1].run_id in message


def test_a_smaller_point_over_the_cap_than_a_larger_one_that_fits_is_reported(tmp_path: Path) -> None:
    sweep = [point(5, 150, 50), failed_point("dapo_math", 10, OOM, tmp_path), point(15, 230, 60.0)]
    chosen = select("dapo_math", sweep, 0.98, 0.02)
    assert chosen["selected"]["prompts"] == 15
    assert (
        len(chosen["warnings"]) == 1 and "10 prompts" in chosen["warnings"][0] and "15 prompts" in chosen["warnings"][0]
    )
    assert "WARNING" in chosen["reason"]


def test_only_a_sweep_point_out_of_memory_lands_as_a_measurement(tmp_path: Path) -> None:
    oom, killed = tmp_path / "oom.log", tmp_path / "killed.log"
    oom.write_text(OOM)
    killed.write_text(KILLED)
    assert memory_evidence(oom) is not None and memory_evidence(killed) is None
    assert lands_in_runs(["sweep"], "failed", memory_evidence(oom))
    assert not lands_in_runs(["sweep"], "failed", memory_evidence(killed))
    assert not lands_in_runs(["sweep"], "invalid metrics", None)  # fewer steps than configured, say
    assert not lands_in_runs(["weak", "strong"], "failed", memory_evidence(oom))
    assert lands_in_runs(["weak"], "succeeded", None)


def test_exact_ties_go_to_fewer_prompts() -> None:
    chosen = select("x", [point(20, 100.0), point(10, 100.0)], 0.98, 0.0)
    assert chosen["selected"]["prompts"] == 10


def test_invalid_runs_are_never_selected() -> None:
    chosen = select("x", [point(10, 100.0), point(20, 500.0, valid=False)], 0.98, 0.02)
    assert chosen["selected"]["prompts"] == 10


def test_no_valid_point_lists_every_point_and_why(tmp_path: Path) -> None:
    sweep = [
        point(10, 100.0, memory=70.0),
        failed_point("dapo_math", 20, OOM, tmp_path),
        point(30, 90.0, valid=False),
    ]
    with pytest.raises(SelectionError) as caught:
        select("dapo_math", sweep, 0.98, 0.02)
    message = str(caught.value)
    assert "no valid sweep point for dapo_math" in message
    for prompts, why in ((10, "over the cap"), (20, "out of memory"), (30, "7 of 20")):
        assert f"{prompts} prompts" in message and why in message
