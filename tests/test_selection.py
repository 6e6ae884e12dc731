"""The sweep's selection rule on constructed sweep summaries."""

from __future__ import annotations

import pytest
from rlvr_scaling.selection import SelectionError, select


def point(
    prompts: int, throughput: float | None, memory: float = 40.0, valid: bool = True, failed: bool = False
) -> dict:
    summary = {
        "run_id": f"ds-n1-p{prompts}-x",
        "prompts": prompts,
        "gpu_memory_gb": 64,
        "checks": [{"name": "steps_reached", "passed": valid, "detail": "20 of 20" if valid else "7 of 20"}],
        "summary": None
        if failed
        else {"throughput_per_gpu": {"mean": throughput}, "step_time_s": {"mean": 100.0}, "peak_memory_gb": memory},
    }
    if failed:
        summary.update(
            status="failed",
            failure="out of memory",
            checks=[{"name": "run_completed", "passed": False, "detail": "failed: out of memory"}],
        )
    return summary


def test_saturation_picks_the_smallest_point_within_tolerance() -> None:
    # the GSM8K pattern: throughput saturates at 100 prompts
    sweep = [point(25, 300), point(50, 400), point(100, 440), point(150, 445), point(200, 446)]
    chosen = select("gsm8k", sweep, 0.98, 0.02)
    assert chosen["selected"]["prompts"] == 100
    assert "tie" in chosen["reason"]


def test_memory_bound_excludes_points_over_the_cap_and_failed_points() -> None:
    # the DAPO pattern: throughput keeps growing until memory runs out
    sweep = [point(5, 150, 50), point(10, 200, 62.0), point(15, 230, 63.5), point(20, None, failed=True)]
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
    sweep = [point(10, 100.0, memory=70.0), point(20, None, failed=True), point(30, 90.0, valid=False)]
    with pytest.raises(SelectionError) as caught:
        select("dapo_math", sweep, 0.98, 0.02)
    message = str(caught.value)
    assert "no valid sweep point for dapo_math" in message
    for prompts, why in ((10, "over the cap"), (20, "failed"), (30, "7 of 20")):
        assert f"{prompts} prompts" in message and why in message
