"""`rlvr-scaling compare A B` (#34): two fabricated LUMI studies with one known difference, found
exactly; studies of another workload refused unless asked. A bundle against its own folder:
tests/test_bundle.py; the local study against itself: tests/test_local_study.py."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest
from rlvr_scaling import cli
from rlvr_scaling.publish.study_comparison import detectable_change, verdict

from .study_runs import FabricatedStudy, fabricate_study

SLOWED = ("dapo_math", 8, 40)  # the 8-node DAPO strong-scaling run
NOISY = ("gsm8k", 1, 400)  # the 1-node GSM8K strong-scaling run


@pytest.fixture(scope="module")
def studies(tmp_path_factory: pytest.TempPathFactory) -> tuple[FabricatedStudy, FabricatedStudy]:
    a = fabricate_study(tmp_path_factory.mktemp("a"))
    b = fabricate_study(tmp_path_factory.mktemp("b"), slower={SLOWED: 1.1})
    return a, b


def _compare(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["compare", *argv])
    return code, out.getvalue(), err.getvalue()


def test_a_known_difference_is_found_exactly_and_nothing_else(studies, tmp_path: Path) -> None:
    a, b = studies
    code, out, err = _compare(str(a.root), str(b.root), "--output", str(tmp_path))
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "compare.csv").open()))
    # Every weak and strong point of both datasets, in both studies.
    assert len(rows) == 20 and {r["verdict"] for r in rows if r["verdict"] != "same"} == {"slower"}
    # The other 19 are the same runs' same metrics in both studies: their ratio is 1 exactly.
    assert {(r["ratio_ci_low"], r["ratio_ci_high"]) for r in rows if r["verdict"] == "same"} == {("1.0", "1.0")}
    [moved] = [r for r in rows if r["verdict"] != "same"]
    assert (moved["dataset"], moved["series"], moved["nodes"]) == ("dapo_math", "strong", "8")
    # Every step 10% slower: the ratio is 1.1 and its interval holds neither 1 nor misses 1.1.
    assert float(moved["ratio"]) == pytest.approx(1.1, rel=1e-6)
    assert 1.0 < float(moved["ratio_ci_low"]) < 1.1 < float(moved["ratio_ci_high"])
    assert moved["b_run_id"] == b.run("dapo_math", "strong", 8).run.run_id
    summary = (tmp_path / "compare.txt").read_text()
    assert "19 are the same (interval within 1 +- 5%), 0 faster, 1 slower and 0 inconclusive" in summary
    assert "Moved: dapo_math strong 8 node(s) slower (1.100x the step time)" in summary
    assert "Nothing else differs in their records" in summary and summary.strip() in out
    assert (tmp_path / "compare.png").stat().st_size > 10_000


def test_studies_of_another_workload_are_refused_unless_asked(studies, tmp_path_factory) -> None:
    a, _ = studies
    other = fabricate_study(tmp_path_factory.mktemp("cap"), sets=["datasets.gsm8k.max_response_length=2048"])
    code, out, err = _compare(str(a.root), str(other.root))
    assert code == 2 and "the two studies measure different things (response caps: A" in err, err
    assert "'gsm8k': 1024" in err and "'gsm8k': 2048" in err and "--force" in err
    code, out, err = _compare(str(a.root), str(other.root), "--force")
    assert code == 0, err
    assert "They differ in: response caps: A" in out


def test_a_path_that_is_no_study_is_named(tmp_path: Path) -> None:
    code, _out, err = _compare(str(tmp_path), str(tmp_path))
    assert code == 2 and f"compare: {tmp_path} is neither a bundle nor a study folder" in err
    (tmp_path / "x.tar.gz").write_bytes(b"not gzip")
    code, _out, err = _compare(str(tmp_path / "x.tar.gz"), str(tmp_path))
    assert code == 2 and "cannot be read as a bundle" in err


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.0, 1.0, "same"),  # one measurement on both sides
        (0.95, 1.05, "same"),  # exactly at the 5% margin: within
        (0.9499, 1.02, "inconclusive"),  # holds 1, reaches past the margin
        (0.98, 1.0501, "inconclusive"),
        (0.5, 2.0, "inconclusive"),  # the issue's [-0.248, 2.248], now positive, is no "same"
        (1.0001, 1.03, "slower"),  # excludes 1, though inside the margin
        (1.2, 1.3, "slower"),
        (0.7, 0.9999, "faster"),
        (
            float("nan"),
            float("nan"),
            "not comparable (no interval: a run with fewer than two blocks of measured steps)",
        ),
    ],
)
def test_a_verdict_is_same_only_when_the_whole_interval_is_within_the_margin(low, high, expected) -> None:
    assert verdict(low, high, 0.05) == expected


def test_the_detectable_change_is_the_half_width_on_the_log_scale() -> None:
    # [0.9, 1.1]: exp((ln 1.1 - ln 0.9) / 2) - 1 = sqrt(1.1 / 0.9) - 1 = 0.10554 (by hand)
    assert detectable_change(0.9, 1.1) == pytest.approx(0.10554, abs=1e-5)
    assert detectable_change(1.0, 1.0) == 0.0
    assert detectable_change(0.5, 2.0) == pytest.approx(1.0)  # sqrt(4) - 1


def test_a_study_against_itself_is_the_same_with_zero_width(studies, tmp_path: Path) -> None:
    a, _ = studies
    code, out, err = _compare(str(a.root), str(a.root), "--json")
    assert code == 0, err
    found = json.loads(out)
    assert len(found["rows"]) == 20
    for row in found["rows"]:
        assert (row["ratio"], row["ratio_ci_low"], row["ratio_ci_high"]) == (1.0, 1.0, 1.0), row
        assert row["verdict"] == "same" and row["detectable_change"] == 0.0
    assert "20 are the same (interval within 1 +- 5%), 0 faster, 0 slower and 0 inconclusive" in found["summary"]


def test_a_noisy_point_is_inconclusive_with_what_it_could_detect(studies, tmp_path_factory) -> None:
    """B measures one point again on a machine ten times noisier (+-30% per phase instead of 3%): its
    ratio's interval holds 1 but reaches beyond 5%, so the point is inconclusive, not the same, and says
    the smallest change it could have detected; a margin wide enough to hold the interval makes it same."""
    a, _ = studies
    noisy = fabricate_study(tmp_path_factory.mktemp("noisy"), jitter_of={NOISY: 0.3})
    code, out, err = _compare(str(a.root), str(noisy.root), "--json")
    assert code == 0, err
    found = json.loads(out)
    [row] = [r for r in found["rows"] if r["verdict"] != "same"]
    assert (row["dataset"], row["series"], row["nodes"], row["verdict"]) == ("gsm8k", "strong", 1, "inconclusive")
    low, high = row["ratio_ci_low"], row["ratio_ci_high"]
    assert low < 1 < high and (low < 0.95 or high > 1.05)
    # the steps of a +-30% uniform phase vary far more than a 5% interval can hide
    assert row["detectable_change"] > 0.05
    assert "19 are the same (interval within 1 +- 5%), 0 faster, 0 slower and 1 inconclusive" in found["summary"]
    assert f"gsm8k strong 1 node(s) {row['ratio']:.3f}x, +-{row['detectable_change']:.1%}" in found["summary"]
    code, out, err = _compare(str(a.root), str(noisy.root))
    assert code == 0 and f"inconclusive (could detect +-{row['detectable_change']:.1%})" in out, out
    wide = max(1 - low, high - 1) + 0.01
    code, out, err = _compare(str(a.root), str(noisy.root), "--json", "--margin", str(wide))
    assert code == 0 and "20 are the same" in json.loads(out)["summary"], err


@pytest.mark.parametrize("margin", ["0", "1", "-0.05", "nan", "5"])
def test_a_margin_that_is_no_fraction_is_refused_naming_it(studies, margin: str) -> None:
    a, _ = studies
    code, _out, err = _compare(str(a.root), str(a.root), "--margin", margin)
    assert code == 2 and f"compare: --margin {float(margin)!r}: expected the equivalence margin" in err, err
