"""The scaling models: series generated from known forms, with noise, are recovered, and the
prediction intervals hold at a node count left out; the study's models, figure and `plan --nodes`
on the fabricated published study."""

from __future__ import annotations

import contextlib
import io
import math
import random
from pathlib import Path

import pytest
from rlvr_scaling import cli
from rlvr_scaling.analysis.across_runs.phase_models import PARTS, model_rows, part_time, series_model
from rlvr_scaling.analysis.across_runs.scaling_models import choose_model
from rlvr_scaling.analysis.across_runs.selection_io import current_plan
from rlvr_scaling.analysis.cost.calibration import calibrate

from .study_runs import STUDY_SETS, fabricate_study, study_args

TRUTHS = {
    "a + b/N": lambda n: 20 + 300 / n,  # a fixed workload spread over the nodes (strong scaling)
    "a + c log2(N)": lambda n: 60 + 10 * math.log2(n),  # the same work per node, collectives grow (weak)
}
FITTED_AT = [1, 2, 4, 16, 32]
LEFT_OUT = 8
SERIES = 200


@pytest.mark.parametrize("form", list(TRUTHS))
def test_a_known_form_is_recovered_and_its_interval_holds_where_not_measured(form: str) -> None:
    truth = TRUTHS[form]
    recovered = covered = 0
    for seed in range(SERIES):
        rng = random.Random(seed)
        model = choose_model(FITTED_AT, [truth(n) + rng.gauss(0, 1.0) for n in FITTED_AT])
        recovered += model.form == form
        _, low, high = model.predict(LEFT_OUT)
        covered += low <= truth(LEFT_OUT) + rng.gauss(0, 1.0) <= high
    # Measured over these 200 series: 86% and 91% recovered, 92% and 93% covered (a 95% interval
    # of a model chosen from five noisy points covers a little less than 95%).
    assert recovered / SERIES >= 0.8, recovered
    assert covered / SERIES >= 0.88, covered


def test_an_exact_series_gives_its_coefficients_and_no_spread() -> None:
    model = choose_model(FITTED_AT, [TRUTHS["a + b/N"](n) for n in FITTED_AT])
    assert model.form == "a + b/N" and model.coefficients == pytest.approx((20, 300))
    value, low, high = model.predict(64)
    assert value == pytest.approx(20 + 300 / 64) and high - low == pytest.approx(0, abs=1e-6)
    assert choose_model([1, 2, 4, 8], [7.0, 7.0, 7.0, 7.0]).form == "a"
    assert choose_model([1, 2], [3.0, 2.0]) is None  # no point left for an interval


def test_the_study_models_every_part_of_both_series(tmp_path: Path) -> None:
    made = fabricate_study(tmp_path)
    rows = model_rows(made.results)
    assert {(r["dataset"], r["series"], r["part"]) for r in rows} == {
        (d, s, p) for d in ("gsm8k", "dapo_math") for s in ("weak", "strong") for p in PARTS
    }
    # The fixed workload of strong scaling shrinks with the nodes; the model says so.
    strong_step = next(r for r in rows if (r["dataset"], r["series"], r["part"]) == ("gsm8k", "strong", "step"))
    assert "b/N" in strong_step["form"] and strong_step["b_s"] > 0
    runs = made.results.series("gsm8k", "strong")
    model = series_model(runs, "step")
    for run in runs:
        assert model.predict(run.nodes)[0] == pytest.approx(part_time(run, "step"), rel=0.1)


def _plan(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["plan", *argv])
    return code, out.getvalue(), err.getvalue()


def test_plan_predicts_node_counts_not_measured_from_the_measured_series(tmp_path: Path) -> None:
    made = fabricate_study(tmp_path)
    code, out, _ = _plan(*study_args(STUDY_SETS, tmp_path), "--nodes", "32,64")
    assert code == 0, out
    runs = made.results.series("gsm8k", "strong")
    model = series_model(runs, "step")
    time_64, low, high = model.predict(64)
    # An independent expectation of the model's figures: its form for this series is a + b/N, fitted
    # by least squares in x = 1/N with the textbook formulas, and the 95% prediction interval with
    # t(0.975, 3) = 3.1824 from the tables (5 runs, 2 coefficients).
    assert model.form == "a + b/N"
    points = [(1 / r.nodes, part_time(r, "step")) for r in runs]
    n = len(points)
    x_mean, y_mean = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - x_mean) ** 2 for x, _ in points)
    slope = sum((x - x_mean) * (y - y_mean) for x, y in points) / sxx
    intercept = y_mean - slope * x_mean
    residual_std = math.sqrt(sum((y - intercept - slope * x) ** 2 for x, y in points) / (n - 2))
    half = 3.1824 * residual_std * math.sqrt(1 + 1 / n + (1 / 64 - x_mean) ** 2 / sxx)
    assert time_64 == pytest.approx(intercept + slope / 64, rel=1e-9)
    assert (low, high) == (pytest.approx(time_64 - half, rel=1e-4), pytest.approx(time_64 + half, rel=1e-4))
    reference = next(r for r in runs if r.nodes == 4)
    efficiency = part_time(reference, "step") / time_64 / (64 / 4)
    line = next(x for x in out.splitlines() if x.split()[:3] == ["gsm8k", "strong", "64"])
    assert f"{time_64:.1f} [{low:.1f}, {high:.1f}]" in line and f"{efficiency:.2f}" in line.split()
    # Priced outside the steps as plan and the budget price a run not made (analysis.cost.calibration).
    study = made.study
    outside = calibrate(study, current_plan(study, tmp_path), tmp_path).outside_steps_s(study.config.estimate, 64)
    assert f"{64 * (outside + study.config.algorithm.steps * time_64) / 3600:.2f}" in line.split()
    assert len([x for x in out.splitlines() if x.split()[2:3] in (["32"], ["64"])]) == 8


def test_plan_nodes_needs_measured_series_and_sane_counts(tmp_path: Path) -> None:
    code, _, err = _plan(*study_args(STUDY_SETS, tmp_path), "--nodes", "32")
    assert code == 2 and "plan --nodes predicts from measured series" in err
    code, _, err = _plan(*study_args(STUDY_SETS, tmp_path), "--nodes", "0,x")
    assert code == 2 and "--nodes is '0,x'; expected node counts separated by commas" in err


# The models' figure and its caption: tests/test_publish.py (test_the_models_figure_names_its_runs).
