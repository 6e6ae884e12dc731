"""Metrics ingestion (file logger and console), statistics and the scaling relations."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
from rlvr_scaling.analysis.across_runs import scaling
from rlvr_scaling.measured.console_log import parse_value, read_console
from rlvr_scaling.measured.metrics import read_steps, summarize_steps
from rlvr_scaling.measured.metrics_file import read_metrics_jsonl
from rlvr_scaling.measured.stats import bootstrap_ci, mean, row_mean_ratio, sample_std, t_quantile

from .conftest import PYTHON

ESC = "\x1b"


def step_fields(step: int, step_s: float, tokens: int = 1000, gen: float = 1.0) -> dict[str, float]:
    return {
        "timing_s/gen": gen,
        "timing_s/old_log_prob": 0.5,
        "timing_s/update_actor": 0.75,
        "timing_s/update_weights": 0.25,
        "timing_s/step": step_s,
        "perf/total_num_tokens": tokens,
        "perf/throughput": tokens / step_s / 8,
        "response_length/mean": 100.0,
        "response_length/clip_ratio": 0.5,
        "actor/lr": 0.0,
        "training/global_step": step,
    }


def console_line(step: int, fields: dict[str, float], numpy: bool = False) -> str:
    parts = [f"{k}:np.float64({v})" if numpy and isinstance(v, float) else f"{k}:{v}" for k, v in fields.items()]
    return f"{ESC}[36m(TaskRunner pid=3165){ESC}[0m step:{step} - " + " - ".join(parts)


def realistic_console() -> str:
    lines = [
        f"{ESC}[36m(WorkerDict pid=4802){ESC}[0m [rank0]:W1129 23:17:56 torch/fx/_symbolic_trace.py:56] is_fx_tracing",
        console_line(1, step_fields(1, 9.0)),
        f"{ESC}[36m(TaskRunner pid=3165){ESC}[0m Training Progress:  25%|##5       | 1/4 [00:18<00:56, 18.87s/it]\r"
        + console_line(2, step_fields(2, 2.0), numpy=True),
        "(AgentLoopWorker pid=5058) step:7 is not a metric line but mentions step:",
        console_line(3, step_fields(3, 2.5)),
        "(raylet) A worker died or was killed while executing a task",
        # a restart repeats step 3 with new figures: the last complete record wins
        console_line(3, step_fields(3, 3.0)),
        console_line(4, step_fields(4, 2.0)),
    ]
    return "\n".join(lines) + "\n" + console_line(5, step_fields(5, 2.0))[:60]


def test_console_reader_copes_with_real_output() -> None:
    steps, problems = read_console(realistic_console())
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert steps[1]["timing_s/step"] == 2.0  # np.float64(2.0) unwrapped
    assert steps[2]["timing_s/step"] == 3.0  # the repeated step keeps its last record
    assert any("repeated" in p for p in problems)
    assert any("truncated" in p for p in problems)


def test_parse_value_unwraps_numpy_and_tensor_reprs() -> None:
    assert parse_value("np.float64(1.23)") == 1.23
    assert parse_value("np.int64(7)") == 7
    assert parse_value("tensor(0.5000)") == 0.5
    assert math.isnan(parse_value("nan"))
    assert parse_value("abc") == "abc"


def test_jsonl_reader_keeps_the_last_of_repeated_steps(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    records = [
        {"step": 1, "data": step_fields(1, 9.0)},
        {"step": 2, "data": step_fields(2, 2.0)},
        {"step": 2, "data": step_fields(2, 4.0)},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + '\n{"step": 3, "da')
    steps, problems = read_metrics_jsonl(path)
    assert [s["timing_s/step"] for s in steps] == [9.0, 4.0]
    assert len(problems) == 2


def test_summary_against_hand_computed_values() -> None:
    steps = [{"step": i + 1, **step_fields(i + 1, t, tokens=800)} for i, t in enumerate([10.0, 2.0, 4.0])]
    summary = summarize_steps(steps, n_gpus=8, warmup_steps=1)
    assert summary["steps_used"] == 2
    assert summary["step_time_s"]["mean"] == pytest.approx(3.0)
    assert summary["step_time_s"]["std"] == pytest.approx(math.sqrt(2.0))  # sample std of 2 and 4
    # 800 tokens / 2 s / 8 GPUs = 50; / 4 s = 25
    assert summary["throughput_per_gpu"]["mean"] == pytest.approx(37.5)
    assert summary["throughput_per_gpu"]["std"] == pytest.approx(math.sqrt(((50 - 37.5) ** 2 + (25 - 37.5) ** 2) / 1))
    assert summary["phases_s"]["gen"]["mean"] == pytest.approx(1.0)
    assert summary["phases_s"]["other"]["mean"] == pytest.approx(3.0 - 2.5)
    assert summary["throughput_cross_check"]["disagreements"] == []


def test_cross_check_reports_a_disagreement() -> None:
    fields = step_fields(2, 2.0)
    fields["perf/throughput"] *= 1.5
    summary = summarize_steps([{"step": 1, **step_fields(1, 2.0)}, {"step": 2, **fields}], 8, 1)
    assert [d["step"] for d in summary["throughput_cross_check"]["disagreements"]] == [2]


def test_statistics() -> None:
    assert mean([1.0, 2.0, 3.0]) == 2.0
    assert sample_std([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert math.isnan(sample_std([1.0]))
    series = [10.0, 11.0, 9.0, 10.5, 9.5, 10.2, 9.8, 10.1, 10.4, 9.6, 10.0, 10.3, 9.7, 10.2, 9.9, 10.1]
    low, high = bootstrap_ci([series])
    assert low < mean(series) < high and high - low < 2.0
    # Four steps: two moving blocks of two ([1, 2], [2, 3] or [3, 4], means 1.5, 2.5, 3.5), so the
    # resampled mean is 1.5, 2, 2.5, 3 or 3.5 with chances 1, 2, 3, 2, 1 in 9; the standard deviation of its
    # log is 0.24334 (by hand) and the interval 2.5 x/ exp(t(0.975, 1 degree) x it) (t = 12.706): on the log
    # scale, centred on log 2.5; 2000 resamples estimate that spread to a few percent.
    low, high = bootstrap_ci([[1.0, 2.0, 3.0, 4.0]])
    assert math.sqrt(low * high) == pytest.approx(2.5) and math.log(high / 2.5) == pytest.approx(
        12.706 * 0.24334, rel=0.05
    )
    assert low > 0  # a linear interval, 2.5 +- 12.706 x 0.577, would reach -4.8
    assert all(math.isnan(v) for v in bootstrap_ci([[1.0, 2.0, 0.0, 3.0]]))  # not positive: no log-scale interval
    assert all(math.isnan(v) for v in bootstrap_ci([[1.0, 2.0]]))  # one block: no interval
    # a constant series has a degenerate interval; a ratio of equal series is 1
    assert bootstrap_ci([[5.0] * 10]) == (5.0, 5.0)
    assert bootstrap_ci([[2.0] * 5, [2.0] * 7], row_mean_ratio) == (1.0, 1.0)


def test_scaling_relations_reproduce_the_published_ones() -> None:
    # GSM8K strong scaling: 204 s at 4 nodes, 72 s at 16 nodes
    assert scaling.strong_speedup(204, 72) == pytest.approx(2.83, abs=0.005)
    assert scaling.strong_efficiency(204, 72, 16, 4) == pytest.approx(0.708, abs=0.0005)
    assert scaling.ideal_speedup(16, 4) == 4
    assert scaling.weak_efficiency(77.9, 100.0) == pytest.approx(0.779)
    shares = scaling.extra_time_shares({"gen": 30.0, "update": 10.0}, {"gen": 20.0, "update": 8.0})
    assert shares["gen"]["share"] == pytest.approx(10 / 12)


def test_cli_metrics_json_on_a_console_log(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text(realistic_console())
    result = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "metrics", str(log), "--n-gpus", "8", "--json"],
        capture_output=True,
        text=True,
    )
    # The figures are there, and the verdict: a restart repeated step 3, so this is no measurement.
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["valid"] is False
    assert any("step 3 repeated" in p for p in document["problems"]), document["problems"]
    summary = document["summary"]
    assert set(summary) >= {
        "n_steps",
        "steps_used",
        "step_time_s",
        "tokens_per_step",
        "throughput_per_gpu",
        "phases_s",
        "response_clip_ratio",
        "peak_memory_gb",
    }
    assert set(summary["phases_s"]) == {"gen", "old_log_prob", "update_actor", "update_weights", "other"}
    assert summary["n_steps"] == 4 and summary["steps_used"] == 3
    assert read_steps(log)[2] == "console"


@pytest.mark.parametrize(
    ("p", "df", "tabulated"),
    [(0.975, 1, 12.7062047), (0.975, 2, 4.3026527), (0.975, 3, 3.1824463), (0.975, 9, 2.2621572),
     (0.975, 18, 2.1009220), (0.9, 4, 1.5332063), (0.995, 5, 4.0321430)],
)  # fmt: skip
def test_t_quantile_matches_the_tables(p: float, df: int, tabulated: float) -> None:
    assert t_quantile(p, df) == pytest.approx(tabulated, abs=1e-6)
