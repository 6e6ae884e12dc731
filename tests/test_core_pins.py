"""Fast pins on the analysis core (measured/, analysis/): each test fails under a named wrong change to
the code that a mutation run found no test noticing. Every expected value is written out or computed
here from first principles; no subprocess, no trainer, no workflow."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rlvr_scaling.analysis.across_runs.scaling import ideal_phase_time, strong_efficiency
from rlvr_scaling.analysis.across_runs.selection import select, sweep_step
from rlvr_scaling.analysis.per_run.summary import measurement_check, summarize_run
from rlvr_scaling.measured.console_log import parse_step_line, parse_value, read_console
from rlvr_scaling.measured.metrics import read_steps, summarize_steps
from rlvr_scaling.measured.metrics_file import measurement_problems, read_metrics_jsonl
from rlvr_scaling.measured.models import Check, Measured, RunSummary, Spread
from rlvr_scaling.measured.stats import block_count, block_length, bootstrap_ci, row_mean_ratio
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan, known_runs

# --- helpers ---------------------------------------------------------------------------------------


def good_step(step: int, **values: Any) -> dict[str, Any]:
    """A step record as the readers return it, every required figure finite and positive. "step" comes
    first, as the console reader puts it."""
    return {
        "step": step,
        "timing_s/gen": 1.0,
        "timing_s/old_log_prob": 0.5,
        "timing_s/update_actor": 0.75,
        "timing_s/step": 3.0,
        "perf/total_num_tokens": 1200,
        "perf/throughput": 50.0,
        **values,
    }


def good_steps(count: int) -> list[dict[str, Any]]:
    return [good_step(n) for n in range(1, count + 1)]


def jsonl(tmp_path: Path, lines: list[bytes | str], name: str = "metrics.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(line.encode() if isinstance(line, str) else line for line in lines) + b"\n")
    return path


def record(step: int, **data: Any) -> str:
    return json.dumps({"step": step, "data": data})


def console_line(step: int, *parts: str) -> str:
    required = [
        "timing_s/gen:1.0",
        "timing_s/old_log_prob:0.5",
        "timing_s/update_actor:0.75",
        "timing_s/step:3.0",
        "perf/total_num_tokens:1200",
        "perf/throughput:50.0",
    ]
    return f"(TaskRunner pid=3165) step:{step} - " + " - ".join([*required, *parts])


# --- a required figure of exactly zero ----------------------------------------------------------


def test_a_required_figure_of_exactly_zero_is_refused_naming_the_step_and_key() -> None:
    steps = good_steps(3)
    steps[1]["perf/total_num_tokens"] = 0
    assert measurement_problems(steps, [], 3) == [
        "step 2: perf/total_num_tokens = 0 (expected a finite positive number)"
    ]
    steps[1]["perf/total_num_tokens"] = 1200
    steps[2]["timing_s/step"] = 0.0
    assert measurement_problems(steps, [], 3) == ["step 3: timing_s/step = 0.0 (expected a finite positive number)"]


def test_a_tiny_positive_required_figure_is_accepted() -> None:
    steps = good_steps(3)
    steps[1]["perf/total_num_tokens"] = 1e-9
    steps[2]["timing_s/gen"] = 1e-9
    assert measurement_problems(steps, [], 3) == []


# --- an optional duration -----------------------------------------------------------------------


def test_a_negative_optional_duration_is_refused_naming_the_step_and_key() -> None:
    steps = good_steps(2)
    steps[0]["timing_s/reward"] = -0.5
    steps[1]["timing_per_token_ms/gen"] = -0.5
    assert measurement_problems(steps, [], 2) == [
        "step 1: timing_s/reward = -0.5 (expected a finite duration, 0 or more)",
        "step 2: timing_per_token_ms/gen = -0.5 (expected a finite duration, 0 or more)",
    ]


def test_an_optional_duration_of_exactly_zero_is_accepted() -> None:
    steps = good_steps(2)
    steps[0]["timing_s/reward"] = 0
    steps[1]["timing_per_token_ms/gen"] = 0.0
    assert measurement_problems(steps, [], 2) == []


def test_an_optional_duration_that_is_not_finite_is_refused() -> None:
    steps = good_steps(2)
    steps[0]["timing_s/reward"] = math.nan
    steps[1]["timing_s/reward"] = math.inf
    assert measurement_problems(steps, [], 2) == [
        "step 1: timing_s/reward = nan (expected a finite duration, 0 or more)",
        "step 2: timing_s/reward = inf (expected a finite duration, 0 or more)",
    ]


def test_a_negative_or_non_finite_figure_that_is_no_duration_is_accepted() -> None:
    # A loss or an advantage is negative; verl logs NaN for a score when every sample aborted.
    steps = good_steps(2)
    steps[0]["actor/pg_loss"] = -0.5
    steps[1]["critic/score/mean"] = math.nan
    steps[1]["actor/grad_norm"] = math.inf
    assert measurement_problems(steps, [], 2) == []


# --- the summary's energy figures ---------------------------------------------------------------

NODES, GPUS_PER_NODE, PROMPTS, RESPONSES = 3, 4, 2, 5  # 12 GPUs, 10 trajectories: no two counts alike
TRAJECTORIES = PROMPTS * RESPONSES
PROMPT_MEAN, RESPONSE_MEAN = 20.0, 80.0  # 100 tokens a trajectory
# Step 1 is the warm-up; its tokens (10.49 trajectories' worth, still 10 rounded) would move every mean.
TOKENS = [1049, 1000, 1020, 980, 1040]
STEP_S = [9.0, 2.0, 2.5, 2.0, 3.0]
JOB_START, JOB_END = "2025-11-29T21:00:00+00:00", "2025-11-29T22:10:00+00:00"


def summary_steps() -> list[dict[str, Any]]:
    return [
        {
            "step": n,
            "timing_s/gen": 1.0,
            "timing_s/old_log_prob": 0.25,
            "timing_s/update_actor": 0.5,
            "timing_s/step": seconds,
            "perf/total_num_tokens": tokens,
            "perf/throughput": tokens / seconds / (NODES * GPUS_PER_NODE),
            "perf/max_memory_allocated_gb": 40.0 + n,
            "prompt_length/mean": PROMPT_MEAN,
            "response_length/mean": RESPONSE_MEAN,
            "response_length/max": 150,
            "actor/lr": 1e-6,
            "perf/mfu/actor": 0.9 if n == 1 else 0.1 * n,
            "perf/mfu/actor_infer": 0.05,
        }
        for n, (tokens, seconds) in enumerate(zip(TOKENS, STEP_S, strict=True), 1)
    ]


def run_folder(tmp_path: Path, job: dict[str, Any] | None = None, peak: float | None = 100.0) -> Path:
    """A succeeded run's folder with the least a summary reads: spec.json, job.json, metrics.jsonl."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    spec = {
        "run": {
            "run_id": "ds-n3-p2-pin",
            "dataset": "ds",
            "series": ["weak"],
            "nodes": NODES,
            "gpus_per_node": GPUS_PER_NODE,
            "prompts": PROMPTS,
            "responses_per_prompt": RESPONSES,
            "trajectories": TRAJECTORIES,
            "trajectories_per_engine": 2.5,
            "concurrency": 7,
            "max_response_length": 200,
            "memory": {},
            "warmup_steps": 1,
            "steps": len(TOKENS),
        },
        "site": {"name": "pinsite", "hardware": {"gpu_memory_gb": 64.0, "peak_tflops_bf16": peak}},
        "study": {"algorithm": {"lr": 1e-6}},
        "repository_commit": "c0ffee1234",
    }
    (run_dir / "spec.json").write_text(json.dumps(spec))
    base = {
        "status": "succeeded",
        "slurm_job_id": "4242",
        "container": {"image": "/images/verl.sif", "command": ["apptainer", "exec", "/images/verl.sif"]},
        "versions": {"python": "3.11.7", "verl": "0.5.0"},
        "start": JOB_START,
        "end": JOB_END,
    }
    (run_dir / "job.json").write_text(json.dumps({**base, **(job or {})}))
    (run_dir / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s["step"], "data": {k: v for k, v in s.items() if k != "step"}}) + "\n"
                for s in summary_steps())
    )  # fmt: skip
    return run_dir


ENERGY_JOB = {
    "energy": {"source": "pm_counters", "start": {"node": 0.0}, "end": {"node": 12000.0}},
    "step_clock": {
        "energy_first_step": 1,
        "energy_last_step": 5,
        "first_step_energy_j": {"node": 1000.0, "accel0": 100.0},
        "last_step_energy_j": {"node": 9000.0, "accel0": 2100.0},
    },
}


def test_the_summary_gives_energy_per_step_and_per_trajectory_for_the_runs_nodes_and_trajectories(
    tmp_path: Path,
) -> None:
    summary = summarize_run(run_folder(tmp_path, ENERGY_JOB))
    assert summary.valid, summary.failed_checks()
    energy = summary.figures.energy
    assert energy is not None
    # 8000 J on the read node over steps 2..5 (4 steps): 2000 J a step on it; its 3 nodes drew alike,
    # 6000 J a step for the run, over its 10 trajectories 600 J each; accelerator 0: 2000 J / 4 steps.
    assert energy["steps"] == [2, 5]
    assert energy["joules_per_step_per_node"] == 2000.0
    assert energy["accelerator_joules_per_step_per_node"] == 500.0
    assert energy["joules_per_step"] == 6000.0
    assert energy["joules_per_trajectory"] == 600.0
    assert energy["run_joules_per_node"] == 12000.0
    assert energy["source"] == "pm_counters" and energy["not_measured"] is None


# --- the summary's tokens per step, peak memory and MFU's verl figures -------------------------


def test_the_summary_describes_tokens_per_step_over_the_measured_steps_only(tmp_path: Path) -> None:
    measured = summarize_run(run_folder(tmp_path)).figures
    # Steps 2..5: 1000, 1020, 980, 1040 tokens; mean 1010, deviations -10, 10, -30, 30.
    assert measured.tokens_per_step.n == 4
    assert measured.tokens_per_step.mean == 1010.0
    assert measured.tokens_per_step.std == pytest.approx(math.sqrt((100 + 100 + 900 + 900) / 3))
    assert (measured.n_steps, measured.steps_used, measured.n_gpus) == (5, 4, 12)


def test_summarize_steps_tokens_per_step_by_hand() -> None:
    steps = [good_step(1, **{"perf/total_num_tokens": 5000}), good_step(2), good_step(3)]
    steps[2]["perf/total_num_tokens"] = 1800
    tokens = summarize_steps(steps, n_gpus=8, warmup_steps=1)["tokens_per_step"]
    # 1200 and 1800: mean 1500, sample std sqrt(2 x 300^2 / 1)
    assert tokens == {"mean": 1500.0, "std": pytest.approx(300.0 * math.sqrt(2)), "n": 2}


def test_peak_memory_is_the_largest_of_either_key_over_every_step_warm_up_included() -> None:
    steps = [
        good_step(1, **{"perf/max_memory_allocated_gb": 61.5}),  # the warm-up step holds the peak
        good_step(2, **{"actor/perf/max_memory_allocated_gb": 50.0}),
        good_step(3, **{"perf/max_memory_allocated_gb": 40.0}),
    ]
    assert summarize_steps(steps, n_gpus=8, warmup_steps=1)["peak_memory_gb"] == 61.5
    steps[0]["perf/max_memory_allocated_gb"] = 30.0
    assert summarize_steps(steps, n_gpus=8, warmup_steps=1)["peak_memory_gb"] == 50.0  # the actor's key
    assert summarize_steps(good_steps(2), n_gpus=8, warmup_steps=1)["peak_memory_gb"] is None


def test_mfu_not_measured_says_why_and_keeps_verls_figures_over_the_measured_steps(tmp_path: Path) -> None:
    # job.json has no model record: no shape to count from. verl's figures over steps 2..5 only (the
    # warm-up's 0.9 excluded): actor 0.2, 0.3, 0.4, 0.5 -> 0.35; actor_infer 0.05.
    run_dir = run_folder(tmp_path)
    mfu = summarize_run(run_dir).figures.mfu
    assert mfu == {
        "not_measured": "no model shape in the run's job.json (not recorded)",
        "by_phase": {},
        "verl": {"update_actor": pytest.approx(0.35), "old_log_prob": pytest.approx(0.05)},
    }
    job = json.loads((run_dir / "job.json").read_text())
    job["model"] = {"shape": None, "reason": "no config.json in the model folder"}
    (run_dir / "job.json").write_text(json.dumps(job))
    assert summarize_run(run_dir).figures.mfu["not_measured"] == (
        "no model shape in the run's job.json (no config.json in the model folder)"
    )
    # No peak, whether the workflow passes none or the site recorded none: that is the reason first.
    no_peak = "the site file gives no hardware.peak_tflops_bf16"
    assert summarize_run(run_dir, peak_tflops_bf16=None).figures.mfu["not_measured"] == no_peak
    assert summarize_run(run_folder(tmp_path / "nopeak", peak=None)).figures.mfu["not_measured"] == no_peak


# --- a summary's provenance and its measurement check -------------------------------------------


def test_the_summary_provenance_names_file_reader_digest_job_container_versions_commit_and_times(
    tmp_path: Path,
) -> None:
    run_dir = run_folder(tmp_path)
    provenance = summarize_run(run_dir).provenance
    assert provenance == {
        "metrics_file": "metrics.jsonl",
        "reader": "jsonl",
        "metrics_sha256": hashlib.sha256((run_dir / "metrics.jsonl").read_bytes()).hexdigest(),
        "reader_problems": [],
        "slurm_job_id": "4242",
        "container": {"image": "/images/verl.sif", "command": ["apptainer", "exec", "/images/verl.sif"]},
        "versions": {"python": "3.11.7", "verl": "0.5.0"},
        "repository_commit": "c0ffee1234",
        "start": JOB_START,
        "end": JOB_END,
    }
    spec = json.loads((run_dir / "spec.json").read_text())
    spec["imported"] = {"from": "elsewhere/console.log"}
    (run_dir / "spec.json").write_text(json.dumps(spec))
    assert summarize_run(run_dir).provenance["imported"] == {"from": "elsewhere/console.log"}
    # No metrics file: the console log, read by the console reader, and its digest.
    (run_dir / "metrics.jsonl").unlink()
    console = run_dir / "console.log"
    console.write_text(console_line(1) + "\n")
    provenance = summarize_run(run_dir).provenance
    assert (provenance["metrics_file"], provenance["reader"]) == ("console.log", "console")
    assert provenance["metrics_sha256"] == hashlib.sha256(console.read_bytes()).hexdigest()


def test_the_measurement_check_names_the_first_five_problems_and_counts_the_rest() -> None:
    passed = measurement_check(good_steps(4), [], 4)
    assert passed == Check("measurement", True, "steps 1..4 once each, every required figure finite and positive")
    steps = good_steps(4)
    for step in steps:
        step["timing_s/reward"] = -1
    reader = ["line 9: not UTF-8 text", "line 10: not UTF-8 text"]
    failed = measurement_check(steps, reader, 5)
    assert failed == Check(
        "measurement",
        False,
        "line 9: not UTF-8 text; line 10: not UTF-8 text; steps must run 1..5: missing 5; "
        "step 1: timing_s/reward = -1 (expected a finite duration, 0 or more); "
        "step 2: timing_s/reward = -1 (expected a finite duration, 0 or more) and 2 more",
    )
    # Exactly five problems: no "more".
    five = measurement_check(steps, reader[:1], 4)
    assert not five.passed and five.detail.endswith(
        "step 4: timing_s/reward = -1 (expected a finite duration, 0 or more)"
    )


# --- models.py: a summary's file, written and read back --------------------------------------------

SUMMARY_KEYS = [
    "run_id", "dataset", "series", "nodes", "gpus", "prompts", "trajectories", "trajectories_per_engine",
    "concurrency", "max_response_length", "memory_settings", "site", "gpu_memory_gb", "summary", "checks",
    "valid", "status",
]  # fmt: skip


def test_a_summary_file_is_read_back_to_the_same_file(tmp_path: Path) -> None:
    summary = summarize_run(run_folder(tmp_path, ENERGY_JOB))
    text = json.dumps(summary.to_json())
    document = json.loads(text)
    assert list(document) == [*SUMMARY_KEYS, "estimated_node_hours", "steps", "provenance"]
    figures = document["summary"]
    assert {"mfu", "energy", "disturbance"} <= set(figures)
    assert list(figures["step_time_s"]) == ["mean", "std", "n", "ci95"] and "ci95" not in figures["tokens_per_step"]
    assert figures["energy"]["joules_per_trajectory"] == 600.0
    again = RunSummary.from_json(document)
    assert json.dumps(again.to_json()) == text
    assert again.measured is not None and again.measured.step_time_s.ci95 == tuple(figures["step_time_s"]["ci95"])


def test_a_failed_summary_file_keeps_its_failure_and_memory_evidence(tmp_path: Path) -> None:
    job = {"status": "failed", "exit_status": 1, "problems": ["ran out of memory"], "memory_evidence": "HIP OOM"}
    summary = summarize_run(run_folder(tmp_path, job))
    document = json.loads(json.dumps(summary.to_json()))
    assert list(document) == [
        *SUMMARY_KEYS,
        "failure",
        "memory_evidence",
        "estimated_node_hours",
        "steps",
        "provenance",
    ]
    assert document["summary"] is None and document["valid"] is False and document["status"] == "failed"
    assert (document["failure"], document["memory_evidence"]) == ("ran out of memory", "HIP OOM")
    assert document["checks"] == [{"name": "run_completed", "passed": False, "detail": "failed: ran out of memory"}]
    assert RunSummary.from_json(document) == summary


# --- every value of every step is checked -------------------------------------------------------


def test_a_console_runs_bad_value_in_the_last_key_of_the_last_step_is_reported() -> None:
    # The console reader puts "step" first in each record: a check that stopped at it would check nothing.
    text = "\n".join([console_line(1), console_line(2), console_line(3, "actor/entropy:0.5", "actor/kl:oops")]) + "\n"
    steps, problems = read_console(text)
    assert problems == [] and list(steps[0])[0] == "step"
    assert measurement_problems(steps, problems, 3) == ["step 3: actor/kl = 'oops' (expected a number)"]


def test_a_bad_value_after_a_null_is_reported(tmp_path: Path) -> None:
    lines = [record(n, **{k: v for k, v in good_step(n).items() if k != "step"}) for n in (1, 2)]
    data = {k: v for k, v in good_step(2).items() if k != "step"}
    lines[1] = json.dumps({"step": 2, "data": {"critic/score/mean": None, **data, "actor/entropy": "x"}})
    steps, problems = read_metrics_jsonl(jsonl(tmp_path, lines))
    assert measurement_problems(steps, problems, 2) == ["step 2: actor/entropy = 'x' (expected a number)"]
    # and after a null in a required figure's place, the figures after it are still read
    required_null = [good_step(1, **{"timing_s/gen": None, "timing_s/reward": -2})]
    assert measurement_problems(required_null, [], 1) == [
        "step 1: timing_s/gen = None (expected a finite positive number)",
        "step 1: timing_s/reward = -2 (expected a finite duration, 0 or more)",
    ]


# --- console parsing ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "oops", "np.float64(nan)"])
def test_a_console_step_whose_step_time_is_not_a_finite_number_is_reported_and_ignored(value: str) -> None:
    text = console_line(1) + "\n" + f"(TaskRunner pid=3165) step:2 - timing_s/gen:1.0 - timing_s/step:{value}\n"
    steps, problems = read_console(text)
    assert [s["step"] for s in steps] == [1]
    assert problems == ["step 2: incomplete record ignored"]


def test_an_incomplete_repeat_of_a_step_keeps_its_complete_record() -> None:
    text = console_line(1) + "\n(TaskRunner pid=3165) step:1 - timing_s/gen:2.0\n"
    steps, problems = read_console(text)
    assert steps[0]["timing_s/gen"] == 1.0 and problems == ["step 1: incomplete record ignored"]
    again = console_line(1).replace("timing_s/gen:1.0", "timing_s/gen:4.0")
    steps, problems = read_console(console_line(1) + "\n" + again + "\n")
    assert steps[0]["timing_s/gen"] == 4.0
    assert problems == ["step 1 repeated (a restart?); the last complete record is kept"]


def test_a_tensor_value_with_a_device_and_spaces_parses_to_its_number() -> None:
    assert parse_value("tensor(0.5, device='cuda:0')") == 0.5
    assert parse_value("tensor(3, device='cuda:0', dtype=torch.int64)") == 3
    assert parse_value("  np.float64(2.5)  ") == 2.5  # padded: unwrapped all the same
    assert parse_value(" 7 ") == 7 and type(parse_value("7")) is int and type(parse_value("-7")) is int
    assert type(parse_value("2.0")) is float and type(parse_value("1e3")) is float
    parsed = parse_step_line("(TaskRunner pid=1) step:4 - actor/kl:tensor(0.5, device='cuda:0') - timing_s/step:2.0")
    assert parsed == (4, {"actor/kl": 0.5, "timing_s/step": 2.0})


def test_a_value_that_is_no_number_is_kept_as_text_and_reported() -> None:
    # "device:cuda:0" splits at its first colon: key "device", value "cuda:0", which is no number.
    steps, problems = read_console(console_line(1, "device:cuda:0") + "\n")
    assert steps[0]["device"] == "cuda:0"
    assert measurement_problems(steps, problems, 1) == ["step 1: device = 'cuda:0' (expected a number)"]


def test_a_malformed_part_does_not_drop_the_fields_after_it() -> None:
    line = "step:3 - garbage without a colon - :5 - timing_s/gen:1.5 - timing_s/step:2.0"
    assert parse_step_line(line) == (3, {"timing_s/gen": 1.5, "timing_s/step": 2.0})
    # Separators with extra spaces: keys and values are stripped.
    assert parse_step_line("step:3 -  a:1  -   b: 2.5") == (3, {"a": 1, "b": 2.5})


def test_only_a_step_field_of_its_own_starts_a_step_line() -> None:
    assert parse_step_line("(TaskRunner pid=1)step:2 - a:1") == (2, {"a": 1})  # right after Ray's prefix
    assert parse_step_line("step:2 - a:1") == (2, {"a": 1})  # at the start
    assert parse_step_line("training/global_step:2 - a:1") is None  # another key ending in "step"
    assert parse_step_line("step:2 a:1") is None  # no " - " after the number


def test_a_complete_console_log_has_no_problem_and_a_cut_progress_bar_is_none() -> None:
    text = console_line(1) + "\n" + console_line(2) + "\n"
    steps, problems = read_console(text)
    assert [s["step"] for s in steps] == [1, 2] and problems == []
    steps, problems = read_console(text + "Training Progress:  50%|#####     | 2/4")  # no newline at its end
    assert [s["step"] for s in steps] == [1, 2] and problems == []
    steps, problems = read_console(text + console_line(3)[:50])
    assert [s["step"] for s in steps] == [1, 2] and problems == ["the last line is truncated; its step is ignored"]


# --- blank lines, which reader, the magnitude bound, a missing key ------------------------------


def test_a_blank_line_inside_a_metrics_file_is_skipped_without_a_problem(tmp_path: Path) -> None:
    lines = [record(1, a=1), "", "   \t", record(2, a=2), "", record(3, a=3)]
    steps, problems = read_metrics_jsonl(jsonl(tmp_path, lines))
    assert steps == [{"step": 1, "a": 1}, {"step": 2, "a": 2}, {"step": 3, "a": 3}]
    assert problems == []


def test_a_jsonl_file_is_read_as_jsonl_whatever_its_first_byte(tmp_path: Path) -> None:
    path = jsonl(tmp_path, ["", record(1, a=1), record(2, a=2)])
    assert path.read_bytes()[:1] == b"\n"
    steps, problems, reader = read_steps(path)
    assert reader == "jsonl" and problems == [] and [s["step"] for s in steps] == [1, 2]
    # Another suffix: the first byte decides.
    log = tmp_path / "out.log"
    log.write_text(console_line(1) + "\n")
    assert read_steps(log)[2] == "console"


def test_the_magnitude_bound_accepts_exactly_1e15_and_refuses_just_beyond() -> None:
    at = 1e15
    beyond = 1e15 * 1.0000001
    steps = good_steps(2)
    steps[0].update({"perf/total_num_tokens": at, "timing_s/reward": at, "perf/max_memory_allocated_gb": at})
    steps[1].update({"actor/pg_loss": -at})
    assert measurement_problems(steps, [], 2) == []
    steps[0].update(
        {"perf/total_num_tokens": beyond, "timing_s/reward": beyond, "perf/max_memory_allocated_gb": beyond}
    )
    steps[1].update({"actor/pg_loss": -beyond})
    assert measurement_problems(steps, [], 2) == [
        "step 1: perf/total_num_tokens = 1000000100000000.0 (expected a finite positive number)",
        "step 1: timing_s/reward = 1000000100000000.0 (expected a finite duration, 0 or more)",
        "step 1: perf/max_memory_allocated_gb = 1000000100000000.0 (beyond 1e+15: no measurement is this large)",
        "step 2: actor/pg_loss = -1000000100000000.0 (beyond 1e+15: no measurement is this large)",
    ]


def test_a_step_missing_a_required_key_is_named() -> None:
    steps = good_steps(3)
    del steps[2]["timing_s/old_log_prob"]
    del steps[2]["perf/throughput"]
    assert measurement_problems(steps, [], 3) == [
        "step 3: timing_s/old_log_prob missing",
        "step 3: perf/throughput missing",
    ]


# --- metrics_file.py, branch by branch ----------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"step": 2, "data": {"\xff\xfe": 1}}', "line 2: not UTF-8 text"),
        (b'{"step": 2, "data": ', "line 2: not a step record (JSONDecodeError)"),
        (b'{"data": {"a": 1}}', "line 2: not a step record (KeyError)"),
        (b'{"step": 2, "data": 5}', "line 2: not a step record (TypeError)"),
        (b"[2, 3]", "line 2: not a step record (TypeError)"),
        (b'{"step": 2, "data": "ab"}', "line 2: not a step record (ValueError)"),
        (b"[" * 100_000, "line 2: not a step record (nested too deeply)"),
        (b'{"step": "2", "data": {}}', "line 2: step '2' is not an integer"),
        (b'{"step": 2.0, "data": {}}', "line 2: step 2.0 is not an integer"),
        (b'{"step": true, "data": {}}', "line 2: step True is not an integer"),
        (b'{"step": null, "data": {}}', "line 2: step None is not an integer"),
    ],
    ids=["utf8", "json", "no-step", "data-int", "list", "data-str", "deep", "step-str", "step-float", "bool", "null"],
)
def test_an_unreadable_line_is_named_by_its_number_and_the_lines_after_it_are_read(
    tmp_path: Path, line: bytes, problem: str
) -> None:
    steps, problems = read_metrics_jsonl(jsonl(tmp_path, [record(1, a=1), line, record(3, a=3)]))
    assert steps == [{"step": 1, "a": 1}, {"step": 3, "a": 3}]
    assert problems == [problem]


def test_a_repeated_step_keeps_its_last_record_and_names_the_line(tmp_path: Path) -> None:
    lines = [record(2, a=1), record(1, a=2), record(2, a=3), record(2, a=4)]
    steps, problems = read_metrics_jsonl(jsonl(tmp_path, lines))
    assert steps == [{"step": 1, "a": 2}, {"step": 2, "a": 4}]  # in step order, not file order
    assert problems == [
        "step 2 appears again at line 3; the last record is kept",
        "step 2 appears again at line 4; the last record is kept",
    ]


def test_the_records_step_wins_over_a_step_key_in_its_data(tmp_path: Path) -> None:
    line = json.dumps({"step": 1, "data": {"step": 99, "a": 1}})
    steps, problems = read_metrics_jsonl(jsonl(tmp_path, [line]))
    assert steps == [{"step": 1, "a": 1}] and problems == []


def test_a_bool_or_text_value_is_no_number() -> None:
    steps = good_steps(2)
    steps[0]["perf/total_num_tokens"] = True
    steps[1]["actor/entropy"] = True
    steps[1]["actor/kl"] = "0.5"
    assert measurement_problems(steps, [], 2) == [
        "step 1: perf/total_num_tokens = True (expected a finite positive number)",
        "step 2: actor/entropy = True (expected a number)",
        "step 2: actor/kl = '0.5' (expected a number)",
    ]


def test_an_integer_too_large_for_a_float_is_refused_wherever_it_is() -> None:
    huge = 10**400
    steps = good_steps(3)
    steps[0]["perf/total_num_tokens"] = huge
    steps[1]["timing_s/reward"] = huge
    steps[2]["actor/entropy"] = huge
    assert measurement_problems(steps, [], 3) == [
        f"step 1: perf/total_num_tokens = {huge} (expected a finite positive number)",
        f"step 2: timing_s/reward = {huge} (expected a finite duration, 0 or more)",
        f"step 3: actor/entropy = {huge} (beyond 1e+15: no measurement is this large)",
    ]
    # An integer a float holds, beyond the bound, is refused too; within it accepted.
    steps = good_steps(1)
    steps[0].update({"actor/entropy": 10**15, "actor/kl": -(10**15) - 1})
    assert measurement_problems(steps, [], 1) == [
        f"step 1: actor/kl = {-(10**15) - 1} (beyond 1e+15: no measurement is this large)"
    ]


def steps_numbered(*numbers: int) -> list[dict[str, Any]]:
    return [good_step(n) for n in numbers]


@pytest.mark.parametrize(
    ("numbers", "expected", "problem"),
    [
        ((1, 2, 3), None, None),  # inferred: 1..3
        ((1, 2, 3), 3, None),
        ((1, 2, 4), None, "steps must run 1..4: missing 3"),  # inferred from the last step logged
        ((1, 2), 3, "steps must run 1..3: missing 3"),  # given: fewer than configured
        ((1, 2, 3), 2, "steps must run 1..2: unexpected 3"),  # given: more than configured
        ((), 3, "steps must run 1..3: missing 1, 2, 3"),
        ((), None, "no steps 1..0"),
        ((1,), 9, "steps must run 1..9: missing 2, 3, 4, 5, 6, 7, 8, 9"),  # eight: all listed
        ((1,), 10, "steps must run 1..10: missing 2, 3, 4, 5, 6, 7, 8, 9 and 1 more"),
        ((1, 50), 12, "steps must run 1..12: missing 2, 3, 4, 5, 6, 7, 8, 9 and 3 more; unexpected 50"),
        ((-1, 0, 1, 2), 2, "steps must run 1..2: unexpected -1, 0"),
        (tuple(range(1, 12)), 1, "steps must run 1..1: unexpected 2, 3, 4, 5, 6, 7, 8, 9 and 2 more"),
        (tuple(range(1, 10)), 1, "steps must run 1..1: unexpected 2, 3, 4, 5, 6, 7, 8, 9"),
        ((1, 5), 3, "steps must run 1..3: missing 2, 3; unexpected 5"),
    ],
)
def test_the_step_sequence_must_be_exactly_one_to_n(numbers, expected, problem) -> None:
    found = measurement_problems(steps_numbered(*numbers), [], expected)
    assert found == ([] if problem is None else [problem])


def test_reader_problems_come_first_then_the_sequence_then_each_steps() -> None:
    steps = steps_numbered(1, 3)
    del steps[1]["timing_s/gen"]
    steps[1]["timing_s/step"] = -1.0
    assert measurement_problems(steps, ["line 2: not UTF-8 text"], None) == [
        "line 2: not UTF-8 text",
        "steps must run 1..3: missing 2",
        "step 3: timing_s/gen missing",
        "step 3: timing_s/step = -1.0 (expected a finite positive number)",
    ]


# --- what the selection and the sweep step record -----------------------------------------------


def sweep_point(prompts: int, throughput: float, peak_gb: float = 20.0) -> RunSummary:
    def spread(mean: float) -> Spread:
        return Spread(mean, 0.0, 4)

    measured = Measured(
        n_steps=5, steps_used=4, warmup_steps=1, n_gpus=8,
        step_time_s=spread(10.0), tokens_per_step=spread(1000.0), throughput_per_gpu=spread(throughput),
        phases_s={}, response_length=spread(100.0), response_clip_ratio=spread(0.0),
        peak_memory_gb=peak_gb, throughput_cross_check={},
    )  # fmt: skip
    return RunSummary(
        run_id=f"ds-n1-p{prompts}", dataset="ds", series=["sweep"], nodes=1, gpus=8, prompts=prompts,
        trajectories=8 * prompts, trajectories_per_engine=float(prompts), concurrency=prompts,
        max_response_length=1024, memory_settings={}, site="lumi", gpu_memory_gb=64.0, measured=measured,
        checks=[], valid=True, status="succeeded", steps=[], provenance={},
    )  # fmt: skip


def test_the_selection_reason_says_the_best_when_the_chosen_point_is_the_best() -> None:
    chosen = select("ds", [sweep_point(10, 1000.0), sweep_point(20, 1234.567)], 0.5, 0.05)
    # the cap: 0.5 x 64 GB
    assert chosen["reason"] == (
        "20 prompts per node: 1235 tokens/s/GPU, the best among 2 valid point(s) under the 32.00 GB memory cap"
    )
    assert chosen["selected"] == {"prompts": 20, "run_id": "ds-n1-p20", "throughput_per_gpu": 1234.567,
                                  "peak_memory_gb": 20.0}  # fmt: skip


def test_the_selection_reason_says_within_the_tolerance_of_the_best_when_a_smaller_point_ties() -> None:
    # 200 x (1 - 0.25) = 150 exactly: the 10-prompt point ties, at the tolerance's edge.
    chosen = select("ds", [sweep_point(10, 150.0), sweep_point(20, 200.0), sweep_point(30, 149.0)], 0.5, 0.25)
    assert chosen["selected"]["prompts"] == 10
    assert chosen["reason"] == (
        "10 prompts per node: 150 tokens/s/GPU, within 25% of the best 200 among 3 valid point(s) under the "
        "32.00 GB memory cap; 2 points tie within 25%, the smallest prompt count wins"
    )


def test_the_selection_records_its_rule() -> None:
    chosen = select("ds", [sweep_point(10, 100.0)], 0.75, 0.03, planned=[10], order="sequential")
    assert chosen["rule"] == {
        "objective": "max mean throughput per GPU over measured steps",
        "memory_cap_fraction": 0.75,
        "memory_cap_gb": 48.0,
        "tolerance": 0.03,
        "tie_break": "fewest prompts",
        "sweep_order": "sequential",
    }
    assert select("ds", [sweep_point(10, 100.0)], 0.75, 0.03)["rule"]["sweep_order"] == "grid"
    assert chosen["dataset"] == "ds" and chosen["skipped"] == [] and chosen["stopped"] is None


def test_the_sweep_step_records_where_it_is_and_whether_it_goes_on() -> None:
    goes_on = sweep_step("ds", [sweep_point(2, 150.0), sweep_point(1, 100.0)], 0.9, 0.05)
    assert goes_on == {
        "dataset": "ds",
        "after": {"prompts": 2, "run_id": "ds-n1-p2"},
        "goes_on": True,
        "reason": "goes on after 2 prompts",
        "points": [1, 2],
    }
    stops = sweep_step("ds", [sweep_point(1, 100.0), sweep_point(2, 150.0), sweep_point(4, 120.0)], 0.9, 0.05)
    assert stops == {
        "dataset": "ds",
        "after": {"prompts": 4, "run_id": "ds-n1-p4"},
        "goes_on": False,
        "reason": "stops after 4 prompts: throughput at 4 prompts (120 tokens/s/GPU) fell more than 5% below the "
        "best so far (150 at 2 prompts)",
        "points": [1, 2, 4],
    }


# --- stats.py and scaling.py ---------------------------------------------------------------------


def test_bootstrap_blocks_are_ceil_sqrt_n_long_and_cover_the_series() -> None:
    assert [block_length(n) for n in (1, 2, 4, 10, 16, 17, 19)] == [1, 2, 2, 4, 4, 5, 5]
    assert [block_count(n) for n in (2, 3, 4, 10, 19)] == [1, 2, 2, 3, 4]
    # Three values: two blocks of two, so an interval; two values: one block, none.
    assert all(math.isfinite(v) for v in bootstrap_ci([[1.0, 2.0, 3.0]]))
    assert all(math.isnan(v) for v in bootstrap_ci([[1.0, 2.0]]))


def test_a_ratio_of_means_is_not_a_mean_of_ratios() -> None:
    ratio = row_mean_ratio(np.array([[1.0, 4.0]]), np.array([[1.0, 2.0]]))
    assert ratio.tolist() == [2.5 / 1.5]  # the ratios 1 and 2 would average 1.5


def test_ideal_phase_time_is_unchanged_under_weak_scaling_and_divided_under_strong() -> None:
    assert ideal_phase_time(12.0, 2, 8, "weak") == 12.0
    assert ideal_phase_time(12.0, 2, 8, "strong") == 3.0  # 12 s x 2 / 8
    assert strong_efficiency(100.0, 40.0, 8, 2) == 0.625  # speedup 2.5 over an ideal 4


# --- a model revision is part of every run's identity -------------------------------------------

PUBLISHED = ["slurm_account=p", "selection.gsm8k=100", "selection.dapo_math=10"]


def test_a_model_revision_changes_every_runs_id() -> None:
    base = {r.run_id for r in known_runs(build_plan(load_study(site="lumi", sets=PUBLISHED), root=Path("/s")))}
    revised_study = load_study(site="lumi", sets=[*PUBLISHED, "model.revision=abc"])
    revised = {r.run_id for r in known_runs(build_plan(revised_study, root=Path("/s")))}
    assert len(base) == len(revised) == 18
    assert base.isdisjoint(revised)
