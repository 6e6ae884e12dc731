"""`rlvr-scaling compare A B` (#34): two fabricated LUMI studies with one known difference, found
exactly; studies of another workload refused unless asked. A bundle against its own folder:
tests/test_bundle.py; the local study against itself: tests/test_local_study.py."""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path

import pytest
from rlvr_scaling import cli

from .study_runs import FabricatedStudy, fabricate_study

SLOWED = ("dapo_math", 8, 40)  # the 8-node DAPO strong-scaling run


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
    [moved] = [r for r in rows if r["verdict"] != "same"]
    assert (moved["dataset"], moved["series"], moved["nodes"]) == ("dapo_math", "strong", "8")
    # Every step 10% slower: the ratio is 1.1 and its interval holds neither 1 nor misses 1.1.
    assert float(moved["ratio"]) == pytest.approx(1.1, rel=1e-6)
    assert 1.0 < float(moved["ratio_ci_low"]) < 1.1 < float(moved["ratio_ci_high"])
    assert moved["b_run_id"] == b.run("dapo_math", "strong", 8).run.run_id
    summary = (tmp_path / "compare.txt").read_text()
    assert "19 are the same within noise, 0 faster and 1 slower" in summary
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
