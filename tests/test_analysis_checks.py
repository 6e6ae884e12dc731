"""The checks that guard every number of a run's summary, each pinned where it can go wrong: at its
boundary (exactly at the cap, one over), against hand-computed figures, and through the files a run
leaves (spec.json, job.json, metrics.jsonl or console.log), as the workflow's `summarize` reads them.

A mutation run (#47) found each of these behaviours untested: a wrong change to it passed every test."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from rlvr_scaling import paths
from rlvr_scaling.analysis.across_runs import scaling
from rlvr_scaling.analysis.across_runs.engine_fill import generation_share
from rlvr_scaling.analysis.across_runs.selection import contradictions, point_row, select
from rlvr_scaling.analysis.per_run.energy_use import summarize_energy
from rlvr_scaling.analysis.per_run.summary import summarize_run
from rlvr_scaling.measured.metrics import CROSS_CHECK_TOLERANCE, read_steps, summarize_steps
from rlvr_scaling.measured.models import RunSummary

from .study_runs import lumi_run_folder

# Per trajectory: 100 prompt tokens and 300 response tokens, so a step's tokens / 400 is its trajectory
# count exactly (the trajectories check's own arithmetic, done here by hand).
PROMPT_MEAN, RESPONSE_MEAN = 100.0, 300.0


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One LUMI sweep point's run folder as the launcher leaves it (spec.json, job.json, metrics.jsonl)."""
    return lumi_run_folder(tmp_path_factory.mktemp("template"), lambda r: (r.dataset, r.prompts) == ("gsm8k", 50))


def _copy(template: Path, tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    run_dir = tmp_path / template.name
    shutil.copytree(template, run_dir)
    spec = json.loads((run_dir / "spec.json").read_text())
    job = json.loads((run_dir / "job.json").read_text())
    return run_dir, spec, job


def _step(step: int, trajectories: int, step_s: float = 10.0, longest: float = 100.0, **extra: float) -> dict[str, Any]:
    tokens = trajectories * (PROMPT_MEAN + RESPONSE_MEAN)
    return {
        "step": step,
        "training/global_step": step,
        "timing_s/gen": 4.0,
        "timing_s/old_log_prob": 1.0,
        "timing_s/update_actor": 3.0,
        "timing_s/update_weights": 0.5,
        "timing_s/step": step_s,
        "perf/total_num_tokens": tokens,
        "perf/throughput": tokens / step_s / 8,
        "prompt_length/mean": PROMPT_MEAN,
        "response_length/mean": RESPONSE_MEAN,
        "response_length/max": longest,
        "actor/lr": 1e-6,
        **extra,
    }


def _write_steps(run_dir: Path, steps: list[dict[str, Any]]) -> None:
    (run_dir / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": s["step"], "data": {k: v for k, v in s.items() if k != "step"}}) + "\n" for s in steps
        )
    )


def _steps_of(spec: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    run, lr = spec["run"], float(spec["study"]["algorithm"]["lr"])
    return [{**_step(i, run["trajectories"], **extra), "actor/lr": lr} for i in range(1, run["steps"] + 1)]


def _check(summary: RunSummary, name: str) -> Any:
    [check] = [c for c in summary.checks if c.name == name]
    return check


# --- responses within the cap ----------------------------------------------------------------------


def test_a_response_exactly_at_the_cap_passes_and_one_token_over_fails_naming_both(template, tmp_path) -> None:
    run_dir, spec, _ = _copy(template, tmp_path)
    cap = spec["run"]["max_response_length"]
    _write_steps(run_dir, _steps_of(spec, longest=float(cap)))
    at_cap = summarize_run(run_dir)
    assert _check(at_cap, "responses_within_cap").passed and at_cap.valid
    # One step one token over, its mean response well under the cap: the check reads the longest.
    steps = _steps_of(spec, longest=float(cap))
    steps[-1]["response_length/max"] = float(cap + 1)
    _write_steps(run_dir, steps)
    over = summarize_run(run_dir)
    check = _check(over, "responses_within_cap")
    assert not check.passed and not over.valid
    assert f"longest response {cap + 1} tokens" in check.detail and f"cap {cap}" in check.detail


# --- which reader, and the console log when there is no metrics file -------------------------------


def test_a_jsonl_file_of_another_suffix_is_read_as_jsonl(tmp_path) -> None:
    path = tmp_path / "metrics.log"
    path.write_text("".join(json.dumps({"step": i, "data": _step(i, 8)}) + "\n" for i in (1, 2)))
    steps, problems, reader = read_steps(path)
    assert reader == "jsonl" and problems == [] and [s["step"] for s in steps] == [1, 2]
    assert steps[1]["perf/total_num_tokens"] == 8 * 400


def test_a_console_log_that_is_not_utf8_is_still_read_as_a_console(tmp_path) -> None:
    path = tmp_path / "console.log"
    line = "(TaskRunner pid=1) step:{n} - timing_s/step:{t} - perf/total_num_tokens:800"
    # A stray byte that is no UTF-8 (a progress bar cut mid-character) between the metric lines.
    path.write_bytes(
        line.format(n=1, t=9.0).encode() + b"\n\xff\xfe garbled\n" + line.format(n=2, t=2.5).encode() + b"\n"
    )
    steps, _problems, reader = read_steps(path)
    assert reader == "console"
    assert [(s["step"], s["timing_s/step"]) for s in steps] == [(1, 9.0), (2, 2.5)]


def test_without_a_metrics_file_the_summary_reads_the_console_log_and_says_so(template, tmp_path) -> None:
    run_dir, spec, _ = _copy(template, tmp_path)
    (run_dir / "metrics.jsonl").unlink()
    lines = []
    for step in _steps_of(spec):
        fields = " - ".join(f"{k}:{v}" for k, v in step.items())
        lines.append(f"(TaskRunner pid=7) step:{step['training/global_step']} - {fields}")
    console = run_dir / "console.log"
    console.write_text("\n".join(lines) + "\n")
    summary = summarize_run(run_dir)
    assert summary.provenance["metrics_file"] == "console.log" and summary.provenance["reader"] == "console"
    assert summary.provenance["metrics_sha256"] == hashlib.sha256(console.read_bytes()).hexdigest()
    assert summary.valid and summary.measured.n_steps == spec["run"]["steps"]


# --- a step missing one phase's timing -------------------------------------------------------------


def test_a_phase_a_step_did_not_log_counts_in_that_steps_other_time() -> None:
    with_all = _step(2, 8, step_s=10.0)
    without = _step(3, 8, step_s=12.0)
    del without["timing_s/update_weights"]
    summary = summarize_steps([_step(1, 8), with_all, without], n_gpus=8, warmup_steps=1)
    # step 2: 10 - (4 + 1 + 3 + 0.5) = 1.5; step 3: 12 - (4 + 1 + 3) = 4.0 (its weight transfer unlogged)
    assert summary["phases_s"]["other"]["mean"] == pytest.approx((1.5 + 4.0) / 2)
    assert summary["phases_s"]["other"]["n"] == 2
    # The phase itself is described over the steps that logged it only.
    assert summary["phases_s"]["update_weights"]["n"] == 1


# --- extra time over ideal when there is none ------------------------------------------------------


def test_no_extra_time_over_ideal_gives_no_shares_rather_than_a_division_by_zero() -> None:
    ideal = {"gen": 4.0, "old_log_prob": 1.0, "update_actor": 3.0}
    shares = scaling.extra_time_shares(dict(ideal), ideal)
    assert {p: s["extra_s"] for p, s in shares.items()} == {"gen": 0.0, "old_log_prob": 0.0, "update_actor": 0.0}
    assert all(math.isnan(s["share"]) for s in shares.values())
    # Extra and saved time that cancel: a total of zero too, no share either.
    cancelling = scaling.extra_time_shares({"gen": 5.0, "old_log_prob": 0.0, "update_actor": 3.0}, ideal)
    assert all(math.isnan(s["share"]) for s in cancelling.values())
    # And with extra time, shares of it that add up to one.
    some = scaling.extra_time_shares({"gen": 7.0, "old_log_prob": 2.0, "update_actor": 3.0}, ideal)
    assert some["gen"]["share"] == pytest.approx(0.75) and some["old_log_prob"]["share"] == pytest.approx(0.25)


def test_a_strong_run_at_exactly_ideal_time_has_no_generation_share(template, tmp_path) -> None:
    run_dir, spec, _ = _copy(template, tmp_path)
    _write_steps(run_dir, _steps_of(spec))
    reference = summarize_run(run_dir)
    # Twice the nodes, every part of the step half as long: exactly ideal strong scaling.
    halved = [{**s, **{k: v / 2 for k, v in s.items() if k.startswith("timing_s/")}} for s in _steps_of(spec)]
    _write_steps(run_dir, halved)
    twice = summarize_run(run_dir)
    twice.nodes = 2 * reference.nodes
    extra, share = generation_share(twice, reference)
    assert extra == pytest.approx(0.0, abs=1e-9) and share is None


# --- the sweep's stop and its points over the memory cap ------------------------------------------


def _point(prompts: int, throughput: float, peak_gb: float, gpu_memory_gb: float = 64.0) -> RunSummary:
    measured = {
        "n_steps": 3, "steps_used": 2, "warmup_steps": 1, "n_gpus": 8,
        "step_time_s": {"mean": 10.0, "std": 0.1, "n": 2, "ci95": [9.9, 10.1]},
        "tokens_per_step": {"mean": 1.0, "std": 0.0, "n": 2},
        "throughput_per_gpu": {"mean": throughput, "std": 0.0, "n": 2, "ci95": [throughput, throughput]},
        "phases_s": {}, "response_length": {"mean": 1.0, "std": 0.0, "n": 2},
        "response_clip_ratio": {"mean": 0.0, "std": 0.0, "n": 2},
        "peak_memory_gb": peak_gb, "throughput_cross_check": {"tolerance": 1e-3, "disagreements": []},
    }  # fmt: skip
    return RunSummary.from_json(
        {
            "run_id": f"gsm8k-n1-p{prompts}", "dataset": "gsm8k", "series": ["sweep"], "nodes": 1, "gpus": 8,
            "prompts": prompts, "trajectories": 8 * prompts, "trajectories_per_engine": float(prompts),
            "concurrency": prompts, "max_response_length": 1024, "memory_settings": {}, "site": "lumi",
            "gpu_memory_gb": gpu_memory_gb, "summary": measured, "checks": [], "valid": True,
            "status": "succeeded", "steps": [], "provenance": {},
        }
    )  # fmt: skip


def test_a_sequential_sweep_that_stops_at_its_last_point_skips_nothing_and_says_no_more() -> None:
    # 4 prompts fall 20% below 2's: the sweep stops there, but 4 was its last planned point.
    points = [_point(1, 100.0, 30.0), _point(2, 150.0, 40.0), _point(4, 120.0, 50.0)]
    selection = select("gsm8k", points, 0.9, 0.05, planned=[1, 2, 4], order="sequential")
    assert selection["stopped"]["after_prompts"] == 4 and not selection["stopped"]["over_cap"]
    assert selection["skipped"] == []
    assert "did not run" not in selection["reason"] and "stopped after" not in selection["reason"]
    assert selection["selected"]["prompts"] == 2
    # With a point planned past it, that point is named as skipped, and why.
    past = select("gsm8k", points, 0.9, 0.05, planned=[1, 2, 4, 8], order="sequential")
    assert [p["prompts"] for p in past["skipped"]] == [8]
    assert (
        "the sweep of gsm8k stopped after 4 prompts" in past["reason"] and "so 8 prompts did not run" in past["reason"]
    )


def test_a_peak_exactly_at_the_cap_fits_and_one_just_over_never_does() -> None:
    cap_gb = 0.9 * 64.0
    at_cap = point_row(_point(2, 150.0, cap_gb), cap_gb)
    assert not at_cap["over_cap"] and at_cap["eligible"]
    over = point_row(_point(2, 150.0, cap_gb + 0.01), cap_gb)
    assert over["over_cap"] and not over["eligible"]
    assert over["rejected_because"] == [f"peak memory {cap_gb + 0.01:.2f} GB over the cap {cap_gb:.2f} GB"]


def test_a_point_over_the_cap_below_one_that_fits_is_named_and_not_the_other_way_round() -> None:
    cap_gb = 0.9 * 64.0
    low_over = point_row(_point(2, 150.0, cap_gb + 1), cap_gb)
    high_fits = point_row(_point(4, 160.0, cap_gb - 1), cap_gb)
    assert contradictions([low_over, high_fits]) == [
        "2 prompts (gsm8k-n1-p2) are over the memory cap while 4 prompts (gsm8k-n1-p4) fit: check both runs"
    ]
    # Memory growing with the workload is no contradiction.
    low_fits = point_row(_point(2, 150.0, cap_gb - 1), cap_gb)
    high_over = point_row(_point(4, 160.0, cap_gb + 1), cap_gb)
    assert contradictions([low_fits, high_over]) == []
    # Two points over the cap: the larger is not one that fits, so nothing contradicts.
    assert contradictions([low_over, high_over]) == []
    # A selection among such points carries the warning and never selects the point over the cap.
    selection = select("gsm8k", [_point(2, 150.0, cap_gb + 1), _point(4, 160.0, cap_gb - 1)], 0.9, 0.05)
    assert selection["warnings"] and selection["selected"]["prompts"] == 4


# --- the trajectory count and its zero guard -------------------------------------------------------


def test_steps_whose_token_means_are_zero_fail_the_trajectory_check_without_dividing_by_them(
    template, tmp_path
) -> None:
    run_dir, spec, _ = _copy(template, tmp_path)
    steps = _steps_of(spec)
    for s in steps:
        s["prompt_length/mean"] = s["response_length/mean"] = 0.0
    _write_steps(run_dir, steps)
    check = _check(summarize_run(run_dir), "trajectories")
    expected = spec["run"]["prompts"] * spec["run"]["responses_per_prompt"]
    assert not check.passed and check.detail == f"prompts x responses = {expected}; measured per step []"


def test_one_step_of_another_trajectory_count_fails_the_check_naming_both_counts(template, tmp_path) -> None:
    run_dir, spec, _ = _copy(template, tmp_path)
    steps = _steps_of(spec)
    expected = spec["run"]["trajectories"]
    steps[2]["perf/total_num_tokens"] = (expected - 1) * (PROMPT_MEAN + RESPONSE_MEAN)
    steps[2]["perf/throughput"] = steps[2]["perf/total_num_tokens"] / 10.0 / 8
    _write_steps(run_dir, steps)
    check = _check(summarize_run(run_dir), "trajectories")
    assert not check.passed and f"measured per step {[expected - 1, expected]}" in check.detail


# --- MFU's inputs ----------------------------------------------------------------------------------


def _hand_mfu(shape: dict[str, int], tokens: float, trajectories: int, seconds: float, peak_flops: float) -> float:
    """One step's model FLOPs (five forwards: gen 1, old_log_prob 1, update_actor 3) over the peak, by hand."""
    q = shape["num_attention_heads"] * shape["head_dim"]
    kv = shape["num_key_value_heads"] * shape["head_dim"]
    hidden = shape["hidden_size"]
    matmul = shape["num_hidden_layers"] * (hidden * (2 * q + 2 * kv) + 3 * hidden * shape["intermediate_size"])
    matmul += shape["vocab_size"] * hidden
    length = tokens / trajectories
    attention = (
        2 * shape["num_hidden_layers"] * shape["num_attention_heads"] * shape["head_dim"] * trajectories * length**2
    )
    return 5 * (2 * matmul * tokens + attention) / (seconds * peak_flops)


def test_mfu_counts_the_recorded_shape_against_the_chosen_peak_over_the_measured_steps(template, tmp_path) -> None:
    run_dir, spec, job = _copy(template, tmp_path)
    run = spec["run"]
    steps = _steps_of(spec, step_s=10.0)
    steps[0]["timing_s/step"] = 1000.0  # the warm-up step: counted, it would move the mean a hundredfold
    steps[1]["timing_s/step"] = 20.0  # step 2: the first measured with one warm-up step, excluded with two
    _write_steps(run_dir, steps)
    shape = job["model"]["shape"]
    gpus = run["nodes"] * run["gpus_per_node"]
    tokens = run["trajectories"] * (PROMPT_MEAN + RESPONSE_MEAN)
    site_peak = spec["site"]["hardware"]["peak_tflops_bf16"]

    def per_step(seconds: float, peak_tflops: float) -> float:
        return _hand_mfu(shape, tokens, run["trajectories"], seconds, peak_tflops * 1e12 * gpus)

    one = summarize_run(run_dir, warmup_steps=1).measured.mfu["by_phase"]["step"]
    later = run["steps"] - 2
    assert one["n"] == run["steps"] - 1
    assert one["mean"] == pytest.approx((per_step(20.0, site_peak) + later * per_step(10.0, site_peak)) / (later + 1))
    two = summarize_run(run_dir, warmup_steps=2).measured.mfu["by_phase"]["step"]
    assert two["n"] == later and two["mean"] == pytest.approx(per_step(10.0, site_peak))
    # A peak given by the workflow (the site file corrected) replaces the one the run recorded.
    given = summarize_run(run_dir, warmup_steps=2, peak_tflops_bf16=2 * site_peak).measured.mfu
    assert given["peak_tflops_per_gpu"] == 2 * site_peak
    assert given["by_phase"]["step"]["mean"] == pytest.approx(per_step(10.0, 2 * site_peak))
    # The shape is the one job.json recorded: half the layers, less than half the FLOPs' MFU.
    job["model"]["shape"] = {**shape, "num_hidden_layers": shape["num_hidden_layers"] // 2}
    (run_dir / "job.json").write_text(json.dumps(job))
    halved = summarize_run(run_dir, warmup_steps=2).measured.mfu["by_phase"]["step"]["mean"]
    assert halved == pytest.approx(
        _hand_mfu(job["model"]["shape"], tokens, run["trajectories"], 10.0, site_peak * 1e12 * gpus)
    )
    assert summarize_run(run_dir, peak_tflops_bf16=None).measured.mfu["not_measured"]


# --- energy per step's inputs ----------------------------------------------------------------------


def _energy_job(first_j: dict[str, float], last_j: dict[str, float], first: int, last: int) -> dict[str, Any]:
    return {
        "energy": {"source": "cray_pm", "start": {"node": 0.0}, "end": {"node": 9e6}},
        "step_clock": {
            "energy_first_step": first,
            "energy_last_step": last,
            "first_step_energy_j": first_j,
            "last_step_energy_j": last_j,
        },
    }


def test_energy_per_step_is_the_counters_increase_over_the_steps_between_their_readings() -> None:
    job = _energy_job({"node": 1000.0, "accel0": 100.0}, {"node": 7000.0, "accel0": 2500.0}, first=2, last=5)
    energy = summarize_energy(job, nodes=4, trajectories=256)
    # 6000 J over steps 3..5 (3 steps) on the reading node: 2000 J per step per node, x4 nodes, /256.
    assert energy["steps"] == [3, 5]
    assert energy["joules_per_step_per_node"] == pytest.approx(2000.0)
    assert energy["accelerator_joules_per_step_per_node"] == pytest.approx(800.0)
    assert energy["joules_per_step"] == pytest.approx(8000.0)
    assert energy["joules_per_trajectory"] == pytest.approx(8000.0 / 256)
    assert energy["run_joules_per_node"] == pytest.approx(9e6)


@pytest.mark.parametrize(
    ("first_j", "last_j", "first", "last"),
    [
        ({"node": 1000.0}, {"node": 7000.0}, 5, 5),  # one reading boundary: no step between them
        ({"node": 1000.0}, {"node": 1000.0}, 2, 5),  # no energy spent: a counter that did not move
        ({"node": 7000.0}, {"node": 1000.0}, 2, 5),  # the counter went back (reset)
        (None, {"node": 7000.0}, 2, 5),  # the first boundary was not read
    ],
)
def test_energy_is_not_measured_rather_than_zero_or_negative(first_j, last_j, first, last) -> None:
    energy = summarize_energy(_energy_job(first_j, last_j, first, last), nodes=4, trajectories=256)
    assert energy["not_measured"] == "the cray_pm counters were not read at two step boundaries"
    assert "joules_per_step" not in energy


# --- the throughput cross-check against verl's own figure ------------------------------------------


def _cross_checked(reported: float) -> list[dict[str, Any]]:
    # 1000 tokens in 1 s on 1 GPU: ours is 1000 tokens/s/GPU exactly.
    steps = [_step(1, 1), {**_step(2, 1, step_s=1.0), "perf/total_num_tokens": 1000.0, "perf/throughput": reported}]
    return summarize_steps(steps, n_gpus=1, warmup_steps=1)["throughput_cross_check"]["disagreements"]


def test_the_cross_check_tolerates_exactly_its_tolerance_relative_to_our_figure() -> None:
    assert CROSS_CHECK_TOLERANCE == 1e-3
    assert _cross_checked(1000.0) == []
    assert _cross_checked(1001.0) == []  # 0.1% over ours: at the tolerance
    assert _cross_checked(999.0) == []  # 0.1% under ours (over 0.1% of verl's: the base is ours)
    assert _cross_checked(1001.5) == [{"step": 2, "verl": 1001.5, "computed": 1000.0}]
    assert _cross_checked(998.5) == [{"step": 2, "verl": 998.5, "computed": 1000.0}]


def test_the_cross_check_compares_per_gpu_figures() -> None:
    # verl's perf/throughput is per GPU: 8000 tokens in 1 s on 8 GPUs is 1000, which agrees.
    steps = [_step(1, 1), {**_step(2, 1, step_s=1.0), "perf/total_num_tokens": 8000.0, "perf/throughput": 1000.0}]
    assert summarize_steps(steps, n_gpus=8, warmup_steps=1)["throughput_cross_check"]["disagreements"] == []
    steps[1]["perf/throughput"] = 8000.0  # the whole run's figure, not per GPU
    assert [
        d["step"] for d in summarize_steps(steps, n_gpus=8, warmup_steps=1)["throughput_cross_check"]["disagreements"]
    ] == [2]


# --- the run-level fields a reader relies on -------------------------------------------------------


def test_the_summary_file_carries_validity_status_and_where_each_number_came_from(template) -> None:
    # The summary the workflow's `summarize` step wrote for the template run (study_runs.write_run).
    spec = json.loads((template / "spec.json").read_text())
    job = json.loads((template / "job.json").read_text())
    summary_file = paths.results_dir(template.parents[2]) / "summaries" / f"{spec['run']['run_id']}.json"
    written = json.loads(summary_file.read_text())
    assert written["valid"] is True and written["status"] == "succeeded" and written.get("failure") is None
    assert RunSummary.from_json(written).failure is None
    assert all(c["passed"] for c in written["checks"])
    provenance = written["provenance"]
    assert provenance["metrics_file"] == "metrics.jsonl" and provenance["reader"] == "jsonl"
    assert provenance["metrics_sha256"] == hashlib.sha256((template / "metrics.jsonl").read_bytes()).hexdigest()
    assert provenance["reader_problems"] == []
    for key in ("slurm_job_id", "start", "end", "versions", "container"):
        assert provenance[key] == job[key], key
    assert provenance["repository_commit"] == spec.get("repository_commit")
    assert (
        written["run_id"] == spec["run"]["run_id"]
        and written["gpus"] == spec["run"]["nodes"] * spec["run"]["gpus_per_node"]
    )


def test_a_failed_run_is_summarised_as_failed_with_its_problems_and_no_figures(template, tmp_path) -> None:
    run_dir, _spec, job = _copy(template, tmp_path)
    job.update(status="failed", exit_status=137, problems=["killed by the OOM killer", "no step logged"])
    (run_dir / "job.json").write_text(json.dumps(job))
    summary = summarize_run(run_dir)
    assert summary.status == "failed" and not summary.valid and summary.measured is None
    assert summary.failure == "killed by the OOM killer; no step logged"
    assert [(c.name, c.passed) for c in summary.checks] == [("run_completed", False)]
    assert summary.provenance == {"slurm_job_id": job["slurm_job_id"], "start": job["start"], "end": job["end"]}
    # With no problem recorded, the exit status is the failure.
    job["problems"] = []
    (run_dir / "job.json").write_text(json.dumps(job))
    assert summarize_run(run_dir).failure == "exit status 137"
