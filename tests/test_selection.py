"""The sweep's selection rule on constructed sweep summaries."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from rlvr_scaling.config import load_study
from rlvr_scaling.launch import spec_document
from rlvr_scaling.plan import build_plan
from rlvr_scaling.selection import SelectionError, select
from rlvr_scaling.summary import failed_summary


@cache
def lumi_sweep_specs() -> dict[tuple[str, int], dict]:
    """spec.json of every LUMI sweep run, as launch writes it."""
    study = load_study(site="lumi")
    plan = build_plan(study, {"gsm8k": None, "dapo_math": None}, Path("/nonexistent"))
    return {(r.dataset, r.prompts): spec_document(study, r) for r in plan if "sweep" in r.series}


def failed_point(dataset: str, prompts: int, problem: str) -> dict:
    """A failed sweep point's summary from the code that writes it (summarize_run hands failed runs to it)."""
    job = {"status": "failed", "exit_status": 1, "problems": [problem]}
    return failed_summary(lumi_sweep_specs()[(dataset, prompts)], job)


def point(prompts: int, throughput: float | None, memory: float = 40.0, valid: bool = True) -> dict:
    return {
        "run_id": f"ds-n1-p{prompts}-x",
        "prompts": prompts,
        "gpu_memory_gb": 64,
        "checks": [{"name": "steps_reached", "passed": valid, "detail": "20 of 20" if valid else "7 of 20"}],
        "summary": {
            "throughput_per_gpu": {"mean": throughput},
            "step_time_s": {"mean": 100.0},
            "peak_memory_gb": memory,
        },
    }


def test_saturation_picks_the_smallest_point_within_tolerance() -> None:
    # the GSM8K pattern: throughput saturates at 100 prompts
    sweep = [point(25, 300), point(50, 400), point(100, 440), point(150, 445), point(200, 446)]
    chosen = select("gsm8k", sweep, 0.98, 0.02)
    assert chosen["selected"]["prompts"] == 100
    assert "tie" in chosen["reason"]


def test_memory_bound_excludes_points_over_the_cap_and_failed_points() -> None:
    # the DAPO pattern: throughput keeps growing until memory runs out
    sweep = [
        point(5, 150, 50),
        point(10, 200, 62.0),
        point(15, 230, 63.5),
        failed_point("dapo_math", 20, "out of memory"),
    ]
    chosen = select("dapo_math", sweep, 0.98, 0.02)
    assert chosen["selected"]["prompts"] == 10
    rejected = {p["prompts"]: p["rejected_because"] for p in chosen["points"]}
    assert "over the cap" in rejected[15][0]
    assert "failed" in rejected[20][0]
    assert chosen["rule"]["memory_cap_gb"] == pytest.approx(62.72)


def test_exact_ties_go_to_fewer_prompts() -> None:
    chosen = select("x", [point(20, 100.0), point(10, 100.0)], 0.98, 0.0)
    assert chosen["selected"]["prompts"] == 10


def test_invalid_runs_are_never_selected() -> None:
    chosen = select("x", [point(10, 100.0), point(20, 500.0, valid=False)], 0.98, 0.02)
    assert chosen["selected"]["prompts"] == 10


def test_no_valid_point_lists_every_point_and_why() -> None:
    sweep = [
        point(10, 100.0, memory=70.0),
        failed_point("dapo_math", 20, "out of memory"),
        point(30, 90.0, valid=False),
    ]
    with pytest.raises(SelectionError) as caught:
        select("dapo_math", sweep, 0.98, 0.02)
    message = str(caught.value)
    assert "no valid sweep point for dapo_math" in message
    for prompts, why in ((10, "over the cap"), (20, "failed"), (30, "7 of 20")):
        assert f"{prompts} prompts" in message and why in message
