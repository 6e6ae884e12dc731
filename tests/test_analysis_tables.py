"""The analysis tables, cell by cell, against figures this test computes from the per-step numbers it wrote.

The expected values use only the study's definitions (docs/study.md) and the statistics
module: mean and sample std (ddof=1) of steps 2..20, throughput per GPU = tokens / (step time x GPUs),
weak efficiency = thr_N / thr_1, strong speedup = t_ref / t_N, ideal = N / ref. Nothing from
rlvr_scaling.measured.stats, .scaling or .tables is used to compute them.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rlvr_scaling.analysis.across_runs.engine_fill import fill_rows
from rlvr_scaling.analysis.per_run import summary
from rlvr_scaling.analysis.per_run.summary import failed_summary, summarize_run
from rlvr_scaling.analysis.shown.table_files import write_tables
from rlvr_scaling.analysis.shown.tables import (
    extra_time_rows,
    invalid_rows,
    phase_rows,
    strong_rows,
    sweep_rows,
    table1_rows,
    weak_rows,
)
from rlvr_scaling.measured import stats

from .study_runs import PUBLISHED, FabricatedRun, FabricatedStudy, fabricate_study

# The study's fixed facts (study.md), written here rather than read from the plan under test.
GPUS_PER_NODE = 8
RESPONSES_PER_PROMPT = 8
ENGINES_PER_NODE = 2  # vLLM TP4 x DP2 on 8 GPUs
NODES = (1, 2, 4, 8, 16)
REFERENCE_NODES = 4
STEPS, WARMUP = 20, 1
RESPONSE_CAP = {"gsm8k": 1024, "dapo_math": 8192}
# GSM8K: no recomputation, no offload, larger token budget; DAPO: both on, smaller budget.
MEMORY_MODE = {"gsm8k": (False, False), "dapo_math": (True, True)}
MEMORY_CAP_GB = 0.98 * 64
SELECTION_TOLERANCE = 0.02
PHASES = ("gen", "old_log_prob", "update_actor", "update_weights")
ALL_PHASES = (*PHASES, "other")
# Tables and test sum in different orders: agreement to 1e-9 is exact for these purposes, while the
# mistakes below (warm-up counted, ddof=0) move figures by 1e-3 and more.
REL = 1e-9


class _Interval:
    """Placeholder for a bootstrap bound: checked for bracketing and width by the interval tests."""

    def __repr__(self) -> str:
        return "<interval bound>"


CI = _Interval()


class Contains:
    """A text cell that must name these facts (its wording is the selection's, not the table's)."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __repr__(self) -> str:
        return f"<text containing {self.parts}>"


@pytest.fixture(scope="module")
def fabricated(tmp_path_factory: pytest.TempPathFactory) -> FabricatedStudy:
    return fabricate_study(tmp_path_factory.mktemp("study"))


@pytest.fixture(scope="module")
def constant(tmp_path_factory: pytest.TempPathFactory) -> FabricatedStudy:
    """Every measured step identical (the warm-up step still differs)."""
    return fabricate_study(tmp_path_factory.mktemp("constant"), jitter=0.0)


# --- the test's own figures from the fabricated steps ---------------------------------------------


def measured(run: FabricatedRun) -> list[dict[str, Any]]:
    steps = [s for s in run.steps if s["step"] > WARMUP]
    assert [s["step"] for s in steps] == list(range(WARMUP + 1, STEPS + 1))
    return steps


def step_times(run: FabricatedRun) -> list[float]:
    return [s["timing_s/step"] for s in measured(run)]


def throughputs(run: FabricatedRun) -> list[float]:
    gpus = run.run.nodes * GPUS_PER_NODE
    return [s["perf/total_num_tokens"] / (s["timing_s/step"] * gpus) for s in measured(run)]


def phase_values(run: FabricatedRun, phase: str) -> list[float]:
    if phase == "other":
        return [s["timing_s/step"] - sum(s[f"timing_s/{p}"] for p in PHASES) for s in measured(run)]
    return [s[f"timing_s/{phase}"] for s in measured(run)]


def phase_mean(run: FabricatedRun, phase: str) -> float:
    return statistics.fmean(phase_values(run, phase))


def peak_memory(run: FabricatedRun) -> float:
    # A cap must hold in every step, the warm-up included.
    return max(s["perf/max_memory_allocated_gb"] for s in run.steps)


def datasets(fs: FabricatedStudy) -> list[str]:
    # Tables list datasets by name (the bundled config keeps its keys sorted, so a reader recomputing
    # the tables could know no other order); the study file lists gsm8k first, so the two differ here.
    assert list(fs.study.datasets) == ["gsm8k", "dapo_math"]
    return ["dapo_math", "gsm8k"]


def expected_weak(fs: FabricatedStudy) -> list[dict[str, Any]]:
    rows = []
    for dataset in datasets(fs):
        base = fs.run(dataset, "weak", 1)
        for nodes in NODES:
            run = fs.run(dataset, "weak", nodes)
            prompts = PUBLISHED[dataset] * nodes
            thr = throughputs(run)
            rows.append(
                {
                    "dataset": dataset,
                    "nodes": nodes,
                    "gpus": nodes * GPUS_PER_NODE,
                    "prompts": prompts,
                    "trajectories": prompts * RESPONSES_PER_PROMPT,
                    "step_time_s": statistics.fmean(step_times(run)),
                    "step_time_std_s": statistics.stdev(step_times(run)),
                    "throughput_per_gpu": statistics.fmean(thr),
                    "throughput_per_gpu_std": statistics.stdev(thr),
                    "throughput_per_gpu_ci_low": CI,
                    "throughput_per_gpu_ci_high": CI,
                    "efficiency": statistics.fmean(thr) / statistics.fmean(throughputs(base)),
                    "efficiency_ci_low": CI,
                    "efficiency_ci_high": CI,
                    # every step within +-3% of its profile (study_runs), far inside analysis.per_run.disturbance's
                    # 20% from the median and 0.3 coefficient of variation: no run is flagged
                    "disturbed": "",
                    "run_id": run.run.run_id,
                    "base_run_id": base.run.run_id,
                }
            )
    return rows


def expected_strong(fs: FabricatedStudy) -> list[dict[str, Any]]:
    rows = []
    for dataset in datasets(fs):
        ref = fs.run(dataset, "strong", REFERENCE_NODES)
        t_ref = statistics.fmean(step_times(ref))
        for nodes in NODES:
            run = fs.run(dataset, "strong", nodes)
            prompts = PUBLISHED[dataset] * REFERENCE_NODES
            t_n = statistics.fmean(step_times(run))
            ideal = nodes / REFERENCE_NODES
            rows.append(
                {
                    "dataset": dataset,
                    "nodes": nodes,
                    "gpus": nodes * GPUS_PER_NODE,
                    "prompts": prompts,
                    "trajectories_per_engine": prompts * RESPONSES_PER_PROMPT / (nodes * ENGINES_PER_NODE),
                    # below the one-node workload's trajectories per engine: past the reference
                    "under_filled": nodes > REFERENCE_NODES,
                    "step_time_s": t_n,
                    "step_time_std_s": statistics.stdev(step_times(run)),
                    "step_time_ci_low_s": CI,
                    "step_time_ci_high_s": CI,
                    "speedup": t_ref / t_n,
                    "speedup_ci_low": CI,
                    "speedup_ci_high": CI,
                    "ideal_speedup": ideal,
                    "efficiency": t_ref / t_n / ideal,
                    "disturbed": "",
                    "run_id": run.run.run_id,
                    "reference_run_id": ref.run.run_id,
                }
            )
    return rows


def expected_phases(fs: FabricatedStudy) -> list[dict[str, Any]]:
    rows = []
    for dataset in datasets(fs):
        for series in ("weak", "strong"):
            for nodes in NODES:
                run = fs.run(dataset, series, nodes)
                row: dict[str, Any] = {"dataset": dataset, "series": series, "nodes": nodes}
                for p in ALL_PHASES:
                    row[f"{p}_s"] = statistics.fmean(phase_values(run, p))
                    row[f"{p}_std_s"] = statistics.stdev(phase_values(run, p))
                row["step_s"] = statistics.fmean(step_times(run))
                row["run_id"] = run.run.run_id
                rows.append(row)
    return rows


def expected_extra(fs: FabricatedStudy) -> list[dict[str, Any]]:
    rows = []
    for dataset in datasets(fs):
        for series, base_nodes in (("weak", 1), ("strong", REFERENCE_NODES)):
            base = fs.run(dataset, series, base_nodes)
            for nodes in (n for n in NODES if n > base_nodes):
                run = fs.run(dataset, series, nodes)
                # weak: the same work per node, so ideally the same time; strong: the work divided by N / base
                factor = 1.0 if series == "weak" else base_nodes / nodes
                extra = {p: phase_mean(run, p) - phase_mean(base, p) * factor for p in ALL_PHASES}
                total = sum(extra.values())
                # the phases' extra times add up to the step time's extra over ideal
                step_extra = statistics.fmean(step_times(run)) - statistics.fmean(step_times(base)) * factor
                assert total == pytest.approx(step_extra, rel=1e-9, abs=1e-9)
                row: dict[str, Any] = {"dataset": dataset, "series": series, "from_nodes": base_nodes, "nodes": nodes}
                for p in ALL_PHASES:
                    row[f"{p}_extra_s"] = extra[p]
                    row[f"{p}_share"] = extra[p] / total
                row["run_id"], row["base_run_id"] = run.run.run_id, base.run.run_id
                rows.append(row)
    return rows


def expected_fill(fs: FabricatedStudy) -> list[dict[str, Any]]:
    """A strong run is under-filled when its engines get fewer trajectories than the published
    one-node workload gives them (GSM8K's chosen by the sweep, DAPO's pinned); generation's share of
    the time over ideal scaling from the reference is worked out from the phase means."""
    rows = []
    for dataset in datasets(fs):
        saturated = math.ceil(PUBLISHED[dataset] * RESPONSES_PER_PROMPT / ENGINES_PER_NODE)
        ref = fs.run(dataset, "strong", REFERENCE_NODES)
        for nodes in NODES:
            run = fs.run(dataset, "strong", nodes)
            per_engine = PUBLISHED[dataset] * REFERENCE_NODES * RESPONSES_PER_PROMPT / (nodes * ENGINES_PER_NODE)
            extra, gen_share = None, None
            if nodes > REFERENCE_NODES:
                factor = REFERENCE_NODES / nodes
                extra = statistics.fmean(step_times(run)) - statistics.fmean(step_times(ref)) * factor
                gen_share = (phase_mean(run, "gen") - phase_mean(ref, "gen") * factor) / extra
            rows.append(
                {
                    "dataset": dataset,
                    "nodes": nodes,
                    "trajectories_per_engine": per_engine,
                    "concurrency": saturated,
                    "under_filled": per_engine < saturated,
                    "extra_over_ideal_s": extra,
                    "gen_share_of_extra": gen_share,
                    "run_id": run.run.run_id,
                }
            )
    return rows


def expected_table1(fs: FabricatedStudy) -> list[dict[str, Any]]:
    rows = []
    for dataset in datasets(fs):
        one = fs.run(dataset, "weak", 1)
        prompts = PUBLISHED[dataset]
        trajectories = prompts * RESPONSES_PER_PROMPT
        recompute, offload = MEMORY_MODE[dataset]
        rows.append(
            {
                "dataset": dataset,
                "prompts": prompts,
                "trajectories": trajectories,
                "response_cap": RESPONSE_CAP[dataset],
                "mean_response_length": statistics.fmean(s["response_length/mean"] for s in measured(one)),
                "share_at_cap": statistics.fmean(s["response_length/clip_ratio"] for s in measured(one)),
                # all of the one-node workload's trajectories generated at once
                "concurrency_per_engine": trajectories // ENGINES_PER_NODE,
                "recompute": recompute,
                "offload": offload,
                "token_budget": fs.study.config.datasets[dataset].memory.token_budget,
                "step_time_s": statistics.fmean(step_times(one)),
                "throughput_per_gpu": statistics.fmean(throughputs(one)),
                "peak_memory_gb": peak_memory(one),
                "run_id": one.run.run_id,
            }
        )
    return rows


def expected_selection(points: list[FabricatedRun]) -> int:
    """The study's rule: the best mean throughput under the memory cap; within 2% of it, fewest prompts."""
    eligible = {
        p.run.prompts: statistics.fmean(throughputs(p))
        for p in points
        if not p.failed and peak_memory(p) <= MEMORY_CAP_GB
    }
    best = max(eligible.values())
    return min(prompts for prompts, thr in eligible.items() if thr >= best * (1 - SELECTION_TOLERANCE))


def expected_sweep(fs: FabricatedStudy) -> list[dict[str, Any]]:
    rows = []
    for dataset in datasets(fs):
        if fs.study.config.selection.get(dataset) is not None:
            continue  # pinned: no sweep ran
        points = fs.sweep(dataset)
        chosen = expected_selection(points)
        for p in points:
            if p.failed:
                figures: dict[str, Any] = {"throughput_per_gpu": None, "step_time_s": None, "peak_memory_gb": None}
                why: Any = Contains("ran out of memory", "HIP out of memory", "over the cap")
            else:
                figures = {
                    "throughput_per_gpu": statistics.fmean(throughputs(p)),
                    "step_time_s": statistics.fmean(step_times(p)),
                    "peak_memory_gb": peak_memory(p),
                }
                over = peak_memory(p) > MEMORY_CAP_GB
                why = Contains(f"peak memory {peak_memory(p):.2f} GB", f"cap {MEMORY_CAP_GB:.2f} GB") if over else ""
            rows.append(
                {
                    "dataset": dataset,
                    "prompts": p.run.prompts,
                    **figures,
                    "memory_cap_gb": MEMORY_CAP_GB,
                    "selected": p.run.prompts == chosen,
                    "rejected_because": why,
                    "run_id": p.run.run_id,
                }
            )
    return rows


def assert_cell(where: str, actual: Any, expected: Any) -> None:
    if expected is CI:
        assert isinstance(actual, float) and math.isfinite(actual), (where, actual)
    elif isinstance(expected, Contains):
        assert isinstance(actual, str) and all(p in actual for p in expected.parts), (where, actual, expected)
    elif isinstance(expected, bool) or expected is None or isinstance(expected, str):
        assert actual == expected and type(actual) is type(expected), (where, actual, expected)
    elif isinstance(expected, float) or isinstance(actual, float):
        assert isinstance(actual, int | float) and not isinstance(actual, bool), (where, actual)
        assert actual == pytest.approx(expected, rel=REL), (where, actual, expected)
    else:
        assert actual == expected and type(actual) is int, (where, actual, expected)


def assert_rows(actual: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert [(r.get("dataset"), r.get("series"), r.get("nodes"), r.get("prompts")) for r in actual] == [
        (r.get("dataset"), r.get("series"), r.get("nodes"), r.get("prompts")) for r in expected
    ]
    for a, e in zip(actual, expected, strict=True):
        assert list(a) == list(e), "columns differ"
        for column, value in e.items():
            assert_cell(f"{a.get('dataset')} {a.get('series', '')} n{a.get('nodes')} {column}", a[column], value)


CHECKS: dict[str, tuple[Callable[[FabricatedStudy], list[dict[str, Any]]], Callable[..., list[dict[str, Any]]]]] = {
    "weak_scaling": (lambda fs: weak_rows(fs.results), expected_weak),
    "strong_scaling": (lambda fs: strong_rows(fs.results, REFERENCE_NODES), expected_strong),
    "phase_times": (lambda fs: phase_rows(fs.results), expected_phases),
    "extra_time": (lambda fs: extra_time_rows(fs.results, REFERENCE_NODES), expected_extra),
    "engine_fill": (lambda fs: fill_rows(fs.results, REFERENCE_NODES), expected_fill),
    "table1": (lambda fs: table1_rows(fs.results), expected_table1),
    "sweep": (lambda fs: sweep_rows(fs.results), expected_sweep),
}


# --- every cell ------------------------------------------------------------------------------------


def test_the_fabricated_study_is_the_published_one(fabricated: FabricatedStudy) -> None:
    # the tables below then cover every run of both series and the whole GSM8K sweep
    assert [r.run.prompts for r in fabricated.sweep("gsm8k")] == [25, 50, 100, 150, 200]
    assert fabricated.selections["gsm8k"]["selected"]["prompts"] == expected_selection(fabricated.sweep("gsm8k"))
    assert fabricated.selections["gsm8k"]["selected"]["prompts"] == PUBLISHED["gsm8k"]
    assert [s.run_id for s in fabricated.results.invalid()] == [fabricated.sweep("gsm8k")[-1].run.run_id]
    # valid by the real checks, and verl's own throughput agrees with tokens / (step time x GPUs)
    for run in fabricated.runs.values():
        stored = fabricated.results.summaries[run.run.run_id]
        assert stored.valid is not run.failed, stored.failed_checks()
        assert run.failed or stored.measured.throughput_cross_check["disagreements"] == []
    for dataset in ("gsm8k", "dapo_math"):
        assert [s.nodes for s in fabricated.results.series(dataset, "weak")] == list(NODES)
        assert [s.nodes for s in fabricated.results.series(dataset, "strong")] == list(NODES)


@pytest.mark.parametrize("table", list(CHECKS))
def test_every_cell(fabricated: FabricatedStudy, table: str) -> None:
    build, expect = CHECKS[table]
    assert_rows(build(fabricated), expect(fabricated))


def test_published_shape(fabricated: FabricatedStudy) -> None:
    """The fabricated series come out like the study's results (so the cells above are study-shaped)."""
    weak = {(r["dataset"], r["nodes"]): r for r in weak_rows(fabricated.results)}
    strong = {(r["dataset"], r["nodes"]): r for r in strong_rows(fabricated.results, REFERENCE_NODES)}
    assert weak["gsm8k", 16]["efficiency"] == pytest.approx(0.779, abs=0.01)
    assert weak["dapo_math", 16]["efficiency"] == pytest.approx(0.961, abs=0.01)
    assert strong["gsm8k", 16]["speedup"] == pytest.approx(2.8, abs=0.05)
    assert strong["dapo_math", 16]["speedup"] == pytest.approx(1.9, abs=0.05)
    extra = {(r["dataset"], r["series"], r["nodes"]): r for r in extra_time_rows(fabricated.results, REFERENCE_NODES)}
    assert extra["gsm8k", "strong", 16]["gen_share"] == pytest.approx(0.6, abs=0.05)
    assert sum(extra["gsm8k", "strong", 16][f"{p}_share"] for p in ALL_PHASES) == pytest.approx(1.0)
    # GSM8K spends its spare memory on training speed: the larger gradient-accumulation token budget
    table1 = {r["dataset"]: r for r in table1_rows(fabricated.results)}
    assert table1["gsm8k"]["token_budget"] > table1["dapo_math"]["token_budget"]


def test_invalid_runs_table_lists_the_failed_sweep_point(fabricated: FabricatedStudy) -> None:
    failed = fabricated.sweep("gsm8k")[-1]
    assert failed.failed
    # the failed point's summary is exactly what summary.failed_summary makes of its spec and job
    spec = json.loads((failed.run_dir / "spec.json").read_text())
    job = json.loads((failed.run_dir / "job.json").read_text())
    assert summarize_run(failed.run_dir) == failed_summary(spec, job)
    assert invalid_rows(fabricated.results) == [
        {
            "run_id": failed.run.run_id,
            "dataset": "gsm8k",
            "nodes": 1,
            "reasons": "run_completed: failed: exit status 1",
        }
    ]


# --- confidence intervals --------------------------------------------------------------------------


def interval_columns(fs: FabricatedStudy) -> Iterator[tuple[str, float, float, float, list[float], list[float]]]:
    """(label, low, point, high, numerator steps, denominator steps) of every interval in the tables;
    a one-series interval has no denominator."""
    for row in weak_rows(fs.results):
        run, base = fs.run(row["dataset"], "weak", row["nodes"]), fs.run(row["dataset"], "weak", 1)
        label = f"{row['dataset']} weak n{row['nodes']}"
        yield (
            f"{label} throughput",
            row["throughput_per_gpu_ci_low"],
            row["throughput_per_gpu"],
            row["throughput_per_gpu_ci_high"],
            throughputs(run),
            [],
        )
        yield (
            f"{label} efficiency",
            row["efficiency_ci_low"],
            row["efficiency"],
            row["efficiency_ci_high"],
            throughputs(run),
            throughputs(base),
        )
    for row in strong_rows(fs.results, REFERENCE_NODES):
        run, ref = fs.run(row["dataset"], "strong", row["nodes"]), fs.run(row["dataset"], "strong", REFERENCE_NODES)
        label = f"{row['dataset']} strong n{row['nodes']}"
        yield (
            f"{label} step time",
            row["step_time_ci_low_s"],
            row["step_time_s"],
            row["step_time_ci_high_s"],
            step_times(run),
            [],
        )
        yield (
            f"{label} speedup",
            row["speedup_ci_low"],
            row["speedup"],
            row["speedup_ci_high"],
            step_times(ref),
            step_times(run),
        )


def normal_half_width(numerator: list[float], denominator: list[float]) -> float:
    """1.96 standard errors of the mean, or of the ratio of means (delta method, independent runs)."""
    m1, v1 = statistics.fmean(numerator), statistics.variance(numerator) / len(numerator)
    if not denominator:
        return 1.96 * math.sqrt(v1)
    m2, v2 = statistics.fmean(denominator), statistics.variance(denominator) / len(denominator)
    return 1.96 * (m1 / m2) * math.sqrt(v1 / m1**2 + v2 / m2**2)


def test_intervals_bracket_the_estimate_with_a_plausible_width(fabricated: FabricatedStudy) -> None:
    for label, low, point, high, numerator, denominator in interval_columns(fabricated):
        assert low <= point <= high, (label, low, point, high)
        if not denominator:
            # an interval of the mean lies inside the range of the measured steps
            assert min(numerator) <= low and high <= max(numerator), label
        # a 95% interval is about 2 x 1.96 standard errors wide; the t quantile of 4 blocks (3.18)
        # makes it up to 1.6 times wider, the bootstrap's own noise over 4 blocks moves it either way
        # (0.80 to 2.14 over these 36 intervals). An interval of the steps' spread rather than of
        # their mean would be sqrt(19) = 4.4 times wider, one with 1.96 instead of the t quantile at
        # most 0.62 x 2.14 = 1.3 and as low as 0.5.
        ratio = (high - low) / (2 * normal_half_width(numerator, denominator))
        if "n1 efficiency" in label or "n4 speedup" in label:
            continue  # a run against itself: see test_base_row_interval_is_the_point
        assert 0.7 < ratio < 2.4, (label, ratio)


def test_intervals_are_reproducible(fabricated: FabricatedStudy) -> None:
    # The stored interval is the documented bootstrap (stats.BOOTSTRAP_METHOD, seed 0) of the run's
    # measured steps as fabricated here, not of anything the summary derived; another seed gives
    # another interval, so the seed is what makes it reproducible.
    run = fabricated.run("gsm8k", "weak", 16)
    stored = fabricated.results.summaries[run.run.run_id].measured
    assert stored.throughput_per_gpu.ci95 == pytest.approx(stats.bootstrap_ci([throughputs(run)], seed=0), rel=1e-12)
    assert stored.throughput_per_gpu.ci95 != pytest.approx(stats.bootstrap_ci([throughputs(run)], seed=1), rel=1e-6)
    # summarising a run directory again gives the same stored intervals (fixed seed)
    again = summarize_run(run.run_dir).measured
    assert again.throughput_per_gpu.ci95 == stored.throughput_per_gpu.ci95
    assert again.step_time_s.ci95 == stored.step_time_s.ci95


def test_constant_steps_give_intervals_that_collapse_to_the_point(constant: FabricatedStudy) -> None:
    # the warm-up step differs from the rest, so this also shows that no interval includes it
    for label, low, point, high, _, _ in interval_columns(constant):
        assert low == pytest.approx(point, rel=1e-12) and high == pytest.approx(point, rel=1e-12), label
    for build, expect in CHECKS.values():
        assert_rows(build(constant), expect(constant))


def test_base_row_interval_is_the_point(fabricated: FabricatedStudy) -> None:
    """Efficiency at 1 node and speedup at the reference are 1 by definition (a run against itself),
    so their interval has no width; resampling the same steps twice, independently, gives it one."""
    weak = {(r["dataset"], r["nodes"]): r for r in weak_rows(fabricated.results)}
    strong = {(r["dataset"], r["nodes"]): r for r in strong_rows(fabricated.results, REFERENCE_NODES)}
    for dataset in ("gsm8k", "dapo_math"):
        base, ref = weak[dataset, 1], strong[dataset, REFERENCE_NODES]
        assert base["efficiency"] == 1.0 and ref["speedup"] == 1.0
        assert (base["efficiency_ci_low"], base["efficiency_ci_high"]) == (1.0, 1.0), dataset
        assert (ref["speedup_ci_low"], ref["speedup_ci_high"]) == (1.0, 1.0), dataset


# --- the usual mistakes would be caught ------------------------------------------------------------


def summarize_with_warmup(shift: int) -> Callable[..., dict[str, Any]]:
    real = summary.summarize_steps
    return lambda steps, n_gpus, warmup: real(steps, n_gpus, warmup + shift)


def test_fabricated_series_separate_the_usual_mistakes(fabricated: FabricatedStudy) -> None:
    """Counting the warm-up step or using the population std moves every figure far beyond REL."""
    for run in fabricated.runs.values():
        if run.failed:
            continue
        every = [s["timing_s/step"] for s in run.steps]
        assert abs(statistics.fmean(every) / statistics.fmean(step_times(run)) - 1) > 1e4 * REL, run.run.run_id
        assert statistics.stdev(step_times(run)) / statistics.pstdev(step_times(run)) - 1 > 1e4 * REL
        for phase in ALL_PHASES:
            assert statistics.stdev(phase_values(run, phase)) > 0, (run.run.run_id, phase)


def population_std(values: list[float]) -> float:
    return statistics.pstdev(values) if len(values) >= 2 else math.nan


MUTATIONS: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], tuple[str, ...]]] = {
    # std over n instead of n - 1: every std column is off by sqrt(19/18)
    "population std": (
        lambda mp: mp.setattr(stats, "sample_std", population_std),
        ("weak_scaling", "strong_scaling", "phase_times"),
    ),
    # step 1 counted: every mean moves
    "warm-up counted": (
        lambda mp: mp.setattr(summary, "summarize_steps", summarize_with_warmup(-WARMUP)),
        tuple(CHECKS),
    ),
    # off by one the other way: step 2 dropped as well
    "two steps dropped": (
        lambda mp: mp.setattr(
            summary,
            "summarize_steps",
            lambda steps, n, warmup, real=summary.summarize_steps: real(steps, n, warmup + 1),
        ),
        tuple(CHECKS),
    ),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_a_wrong_summary_fails_these_checks(
    mutation: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fabricated: FabricatedStudy
) -> None:
    apply, caught_by = MUTATIONS[mutation]
    with monkeypatch.context() as mp:
        apply(mp)
        wrong = fabricate_study(tmp_path, sets=["only_datasets=[gsm8k]"])
    # the same runs and the same steps, only their summaries are wrong
    assert {k: r.steps for k, r in wrong.runs.items()} == {
        k: r.steps for k, r in fabricated.runs.items() if r.run.dataset == "gsm8k"
    }
    for table in caught_by:
        build, expect = CHECKS[table]
        with pytest.raises(AssertionError):
            assert_rows(build(wrong), expect(wrong))


# --- the written tables ----------------------------------------------------------------------------


def parse_cell(text: str) -> Any:
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_csv(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [{k: parse_cell(v) for k, v in row.items()} for row in reader]
        return list(reader.fieldnames or []), rows


def markdown_rows(path: Path) -> list[list[str]]:
    """Header, then the data rows (the |---| rule does not start with '| ')."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_written_csv_holds_the_same_numbers(fabricated: FabricatedStudy, tmp_path: Path) -> None:
    written = write_tables(fabricated.results, REFERENCE_NODES, tmp_path)
    assert {p.name for p in written} >= {f"{name}.{ext}" for name in CHECKS for ext in ("csv", "md", "tex")}
    for table, (build, expect) in CHECKS.items():
        columns, rows = read_csv(tmp_path / f"{table}.csv")
        assert columns == list(build(fabricated)[0]), table
        # an empty text cell reads back as None
        assert_rows(rows, [{k: None if v == "" else v for k, v in r.items()} for r in expect(fabricated)])
        # CSV keeps every digit: the cells are the table's numbers exactly, not rounded
        assert rows == [{k: v if v != "" else None for k, v in r.items()} for r in build(fabricated)], table
        # Markdown shows the same cells to 4 significant digits
        shown = markdown_rows(tmp_path / f"{table}.md")
        assert shown[0] == columns
        for md_row, row in zip(shown[1:], rows, strict=True):
            assert md_row == [f"{v:.4g}" if isinstance(v, float) else "" if v is None else str(v) for v in row.values()]
        tex = (tmp_path / f"{table}.tex").read_text()
        assert tex.count(r" \\") == len(rows) + 1, table


def test_the_studys_warmup_wins_over_the_runs_own(fabricated: FabricatedStudy) -> None:
    # The workflow passes the study's warm-up: a changed one re-summarises runs made with another.
    run = fabricated.run("gsm8k", "weak", 16)
    own = summarize_run(run.run_dir).measured
    later = summarize_run(run.run_dir, warmup_steps=own.warmup_steps + 1).measured
    assert later.warmup_steps == own.warmup_steps + 1 and later.steps_used == own.steps_used - 1
    assert later.step_time_s.mean != own.step_time_s.mean
