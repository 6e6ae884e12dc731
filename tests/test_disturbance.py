"""Disturbed runs (#45): a run whose measured steps vary beyond the stated bound (analysis.per_run.disturbance) is
flagged, never dropped, in its summary, the scaling tables, the report, the reproduction verdict and
`compare`, with the steps that stand out. The bound's numbers are worked by hand here."""

from __future__ import annotations

import contextlib
import io
import json
import statistics
from pathlib import Path

import pytest
from rlvr_scaling import cli
from rlvr_scaling.analysis.per_run import disturbance
from rlvr_scaling.analysis.shown.tables import strong_rows, weak_rows
from rlvr_scaling.analysis.verdict.reproduction import reproduction_findings, reproduction_rows
from rlvr_scaling.measured.stats import bootstrap_ci

from .study_runs import PublishedStudy, fabricate_study, publish_study

# The 2-node GSM8K weak run: steps 5 and 12 of its 20 slowed 2x and 2.5x by a busy machine.
DISTURBED = ("gsm8k", 2, 200)
SLOWED_STEPS = {5: 2.0, 12: 2.5}
# The demo run: 10 measured steps from 1.7 to 7.6 s.
DEMO = [1.7, 3.2, 7.6, 2.5, 4.0, 5.9, 2.2, 6.1, 3.1, 5.8]


def test_a_run_whose_steps_vary_throughout_is_flagged_by_its_coefficient_of_variation() -> None:
    record = disturbance.assess(list(enumerate(DEMO, 2)))
    assert record is not None and record["disturbed"]
    # mean 4.21, sample std 2.000 (by hand): 0.475; median 3.6; slowest 7.6 / 1.7 = 4.47x
    assert record["cv"] == pytest.approx(0.475, abs=0.001)
    assert record["median_s"] == pytest.approx(3.6) and record["max_over_min"] == pytest.approx(4.47, abs=0.01)
    # deviations from the median: median 1.65, x 1.4826 x 5 = 12.2 s: no single step is that far out
    assert record["outliers"] == []
    text = disturbance.describe(record)
    assert "coefficient of variation 0.48 (bound 0.3)" in text and "4.5x the fastest" in text
    assert "no single step stands out" in text
    assert disturbance.short(record) == "cv 0.48"


def test_a_steady_run_with_one_far_step_is_flagged_naming_the_step() -> None:
    steps = [10.0, 10.2, 9.9, 10.1, 10.0, 15.0, 9.8, 10.3, 10.1, 9.9]
    record = disturbance.assess(list(enumerate(steps, 2)))
    assert record is not None and record["disturbed"]
    # median 10.05; the 15 s step (step 7) is 49% above it, beyond 20% and 5 scaled MADs (5 x 1.4826 x 0.15)
    assert [(o["step"], o["time_s"]) for o in record["outliers"]] == [(7, 15.0)]
    assert record["outliers"][0]["from_median"] == pytest.approx(15.0 / 10.05 - 1)
    assert "7 (15 s, +49%)" in disturbance.describe(record)
    assert disturbance.short(record).endswith("; steps 7")


@pytest.mark.parametrize(("far", "flagged"), [(12.0, False), (12.01, True)])
def test_a_step_exactly_at_20_percent_from_the_median_is_within_the_bound(far: float, flagged: bool) -> None:
    # nine steps of 10 s: median 10, MAD 0, so the reach is 20% of the median, 2.0 s; cv 0.06
    record = disturbance.assess(list(enumerate([10.0] * 9 + [far], 2)))
    assert record is not None and record["disturbed"] is flagged
    assert [o["step"] for o in record["outliers"]] == ([11] if flagged else [])


# One step 1.4x among nine whose times sum to exactly 9 s (mean 1 s): the ten steps' mean is 1.04 s, so the
# hiccup moves it +4% from the other steps' mean.
JITTERING = [1.02, 1.05, 0.94, 0.97, 0.95, 1.40, 1.00, 0.98, 1.06, 1.03]  # the nine: +-6% (a CPU machine)
STEADY = [1.00, 1.01, 0.99, 1.02, 0.98, 1.40, 1.01, 0.99, 1.00, 1.00]  # the nine: +-2% (a GPU partition)


def test_a_hiccup_the_other_steps_jitter_covers_is_listed_not_flagged() -> None:
    record = disturbance.assess(list(enumerate(JITTERING, 2)))
    assert record is not None and [o["step"] for o in record["outliers"]] == [7]
    assert record["mean_shift"] == pytest.approx(0.04)
    # The nine's own 95% interval (the study's block bootstrap, measured.stats) reaches further than +4%:
    # the hiccup is jitter the interval covers.
    nine = JITTERING[:5] + JITTERING[6:]
    assert record["allowed_shift"] == pytest.approx(bootstrap_ci([nine])[1] / 1.0 - 1)
    assert 0.04 < record["allowed_shift"] < 0.15 and not record["disturbed"] and disturbance.short(record) == ""
    assert "moving the mean +4.0% (the other steps' 95% interval reaches " in disturbance.describe(record)


def test_the_same_hiccup_among_steady_steps_decides_the_mean_and_is_flagged() -> None:
    record = disturbance.assess(list(enumerate(STEADY, 2)))
    assert record is not None and record["disturbed"] and [o["step"] for o in record["outliers"]] == [7]
    # The nine vary by 1.2% (sample std 0.0122): their interval reaches about 1.8%, the hiccup moves it 4%.
    assert record["mean_shift"] == pytest.approx(0.04) and record["allowed_shift"] < 0.04
    assert disturbance.short(record) == f"cv {statistics.stdev(STEADY) / statistics.fmean(STEADY):.2f}; steps 7"


def test_steady_runs_and_single_steps_are_not_flagged() -> None:
    record = disturbance.assess(list(enumerate([200.0, 204.0, 197.0, 201.0, 199.0, 203.0], 2)))
    assert record is not None and not record["disturbed"] and disturbance.short(record) == ""
    assert disturbance.assess([(2, 200.0)]) is None and not disturbance.is_disturbed(None)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> PublishedStudy:
    # No PNG or PDF: nothing here reads them (study_runs.publish_study says where they are drawn).
    return publish_study(tmp_path_factory.mktemp("disturbed"), disturbed={DISTURBED: SLOWED_STEPS}, figure_formats=())


def test_the_flag_is_in_the_summary_the_tables_and_the_report(published: PublishedStudy) -> None:
    fs = published.study
    run = fs.run("gsm8k", "weak", 2)
    times = [s["timing_s/step"] for s in run.measured()]
    record = fs.results.summaries[run.run.run_id].measured.disturbance
    assert record["disturbed"] and [o["step"] for o in record["outliers"]] == [5, 12]
    assert record["cv"] == pytest.approx(statistics.stdev(times) / statistics.fmean(times), rel=1e-12)
    cell = f"cv {statistics.stdev(times) / statistics.fmean(times):.2f}; steps 5 12"
    weak = {(r["dataset"], r["nodes"]): r["disturbed"] for r in weak_rows(fs.results)}
    assert weak.pop(("gsm8k", 2)) == cell and set(weak.values()) == {""}
    assert {r["disturbed"] for r in strong_rows(fs.results, 4)} == {""}  # the 2-node strong run is another
    report = published.report.read_text()
    section = report.split("## Disturbed runs", 1)[1].split("\n## ", 1)[0]
    assert f"`{run.run.run_id}` (gsm8k, weak, 2 node(s))" in section and "5 (" in section and "12 (" in section
    assert section.count("\n- `") == 1
    assert "on the log scale" in report and "never below zero" in report


def test_the_verdict_says_which_numbers_rest_on_the_disturbed_run(published: PublishedStudy) -> None:
    fs = published.study
    reference = fs.study.reference()
    rows = reproduction_rows(fs.results, fs.study.config, reference)
    run_id = fs.run("gsm8k", "weak", 2).run.run_id
    resting = {r["id"] for r in rows if r["rests_on_disturbed"]}
    assert resting and resting == {r["id"] for r in rows if run_id in r["run_ids"].split()}
    assert {r["rests_on_disturbed"] for r in rows if r["rests_on_disturbed"]} == {run_id}
    last = reproduction_findings(rows, reference)[-1]
    assert last.startswith(f"{len(resting)} of these verdicts rest on a run whose steps were disturbed")


def test_compare_says_when_a_verdict_rests_on_a_disturbed_run(published: PublishedStudy, tmp_path: Path) -> None:
    clean = fabricate_study(tmp_path / "clean")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["compare", str(clean.root), str(published.study.root), "--json"]) == 0
    found = json.loads(out.getvalue())
    flagged = [(r["dataset"], r["series"], r["nodes"], r["disturbed"]) for r in found["rows"] if r["disturbed"]]
    assert flagged == [("gsm8k", "weak", 2, "B")]
    assert "1 verdict(s) rest on a run whose steps were disturbed" in found["summary"]
    assert "gsm8k weak 2 node(s) (run of B)" in found["summary"]


def _flagged(case, runs: int, seed: int) -> tuple[float, float]:
    from rlvr_scaling.analysis.verdict.coverage import flagged_share

    return flagged_share(case, runs, seed)


@pytest.mark.parametrize(
    ("case", "at_least", "at_most"),
    [
        # A busy machine (10% of steps 1.5-3x): every run that caught a slowed step, 1 - 0.9^10 = 65%.
        (dict(steps=10, noise=0.02, disturbed=0.1), 0.55, 0.75),
        # Steady steps with 20% noise: the rule before flagged 8.6% (docs/interval-coverage.md).
        (dict(steps=10, noise=0.2), 0.0, 0.05),
        # Hiccups of 1.3-1.5x among steps that jitter by 10%, where the intervals keep their coverage
        # (94-96%): the rule before flagged 17.8%.
        (dict(steps=10, noise=0.1, disturbed=0.1, slowdown=(1.3, 1.5)), 0.0, 0.09),
        # The same hiccups among steps that jitter by 2%, where the step-time mean covers 68%: flagged.
        (dict(steps=10, noise=0.02, disturbed=0.1, slowdown=(1.3, 1.5)), 0.53, 0.75),
    ],
)
def test_the_flag_marks_what_breaks_coverage_and_not_jitter(case: dict, at_least: float, at_most: float) -> None:
    """300 simulated runs per case, seeded (the shares are fixed: 68%, 2.0%, 3.0%, 64.7%); the bounds
    hold the benchmark's 2000-run figures (66.3%, 3.5%, 3.1%, 63.4%), and the rule before #55 (at this
    seed 68%, 6.3%, 21.3%, 67.3%) fails the second and third."""
    from rlvr_scaling.analysis.verdict.coverage import Case

    now, before = _flagged(Case(**case), 300, seed=7)
    assert at_least <= now <= at_most, (now, before)
