"""The reproduction verdict (#34): the published study's numbers (config/references/lumi-rlvr-blog.yaml)
against a study's. The fabricated LUMI study is shaped like the published one (tests/study_runs.py),
so every number is reproduced; one point made 25% slower breaks exactly the numbers made from it.
In the tables, the report and verify: tests/test_publish.py, tests/test_bundle.py; the local study's
"not comparable": tests/test_local_study.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from rlvr_scaling.analysis.verdict.reproduction import Measurement, judge_number, reproduction_rows
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.reference import load_reference, reference_path

from .study_runs import FabricatedStudy, fabricate_study

PLANTED = ("gsm8k", 16, 1600)  # the 16-node GSM8K weak-scaling run


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> FabricatedStudy:
    return fabricate_study(tmp_path_factory.mktemp("planted"), slower={PLANTED: 1.25})


def test_a_point_25_percent_slower_breaks_exactly_the_numbers_made_from_it(planted: FabricatedStudy) -> None:
    rows = reproduction_rows(planted.results, planted.study.config, planted.study.reference())
    slow_run = planted.run("gsm8k", "weak", 16).run.run_id
    failed = {r["id"] for r in rows if r["verdict"] != "reproduced"}
    # Named by hand from the reference: the GSM8K weak 16-node efficiency, the step's growth from 1 to
    # 16 nodes in seconds and in share, and the efficiency's slope over the weak series.
    assert failed == {
        "gsm8k-weak-efficiency-16",
        "gsm8k-weak-growth-16",
        "gsm8k-weak-growth-share-16",
        "gsm8k-weak-efficiency-slope",
    }
    # ... which are the rows that name the slowed run among theirs; each says why, with its rule.
    assert failed == {r["id"] for r in rows if slow_run in r["run_ids"].split()}
    by_id = {r["id"]: r for r in rows}
    assert {by_id[i]["verdict"] for i in failed} == {"not reproduced"}
    efficiency = by_id["gsm8k-weak-efficiency-16"]
    # 192 s / (247.6 s x 1.25) = 0.620 against 0.779: 20% off, outside the 5% rule
    assert 0.60 < efficiency["measured"] < 0.64 and efficiency["why"].endswith("rule: within 5%")


def test_another_site_and_model_are_not_comparable_and_the_verdict_says_what_differs(
    planted: FabricatedStudy,
) -> None:
    local = load_study(site="local")  # the toy study: a tiny model on CPU
    rows = reproduction_rows(planted.results, local.config, load_reference("lumi-rlvr-blog"))
    assert rows and {r["verdict"] for r in rows} == {"not comparable"}
    why = rows[0]["why"]
    assert "site local, the reference's lumi" in why and "the reference's Qwen/Qwen3-8B" in why, why
    assert reproduction_rows(planted.results, planted.study.config, None) == []


@pytest.mark.parametrize(
    ("rule", "measured", "verdict"),
    [
        ({"relative": 0.05}, 105.0, "reproduced"),  # exactly on the tolerance
        ({"relative": 0.05}, 105.01, "not reproduced"),
        ({"relative": 0.05}, 95.0, "reproduced"),
        ({"absolute": 2.0}, 98.0, "reproduced"),
        ({"absolute": 2.0}, 97.99, "not reproduced"),
        # interval [96, 104] about 100, widened 2x: [92, 108] holds the published 100
        ({"interval_factor": 2.0}, 100.0, "reproduced"),
    ],
)
def test_each_tolerance_rule_at_its_boundary(rule: dict, measured: float, verdict: str) -> None:
    interval = (measured - 4.0, measured + 4.0)
    assert judge_number(Measurement(measured, ("r",), interval), 100.0, rule)[0] == verdict


def test_the_interval_rule_widens_the_measured_interval_about_its_mean() -> None:
    # Measured 110 with [108, 112]: 100 is outside; widened 5x ([100, 120]) it is on the edge; 4.9x not.
    measured = Measurement(110.0, ("r",), (108.0, 112.0))
    assert judge_number(measured, 100.0, {"interval_factor": 5.0})[0] == "reproduced"
    assert judge_number(measured, 100.0, {"interval_factor": 4.9})[0] == "not reproduced"
    assert judge_number(Measurement(None, (), missing="no run"), 100.0, {"relative": 0.1}) == ("not measured", "no run")


def test_a_bad_reference_stops_the_study_before_anything_runs_naming_the_key(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(ConfigError, match=r"key 'study.reference' has value 'nope'.*config/references/<name>.yaml"):
        load_study(sets=["study.reference=nope"])
    # A reference that breaks its schema or repeats an id: the file and the key are named.
    import rlvr_scaling.study.reference as reference

    text = reference_path("lumi-rlvr-blog").read_text()
    monkeypatch.setattr(reference, "REFERENCES_DIR", tmp_path)
    (tmp_path / "broken.yaml").write_text(text.replace("value: 0.779", "value: high"))
    with pytest.raises(ConfigError, match=r"reference broken.yaml: key 'numbers.0.value' has value 'high'"):
        load_reference("broken")
    (tmp_path / "twice.yaml").write_text(text.replace("id: dapo-weak-efficiency-16", "id: gsm8k-weak-efficiency-16"))
    with pytest.raises(ConfigError, match=r"key 'numbers\[1\].id' has value 'gsm8k-weak-efficiency-16'"):
        load_reference("twice")


def test_a_reference_read_again_is_the_files_numbers_as_they_are_now(tmp_path: Path, monkeypatch) -> None:
    """Read once per process and kept: what one caller changes does not reach the next, and an edited
    file (even one of the same size) is read and checked again, an edit that breaks it refused."""
    import rlvr_scaling.study.reference as reference

    text = reference_path("lumi-rlvr-blog").read_text()
    monkeypatch.setattr(reference, "REFERENCES_DIR", tmp_path)
    kept = tmp_path / "kept.yaml"
    kept.write_text(text)
    first = load_reference("kept")
    value = first["numbers"][0]["value"]
    assert value == 0.779
    first["numbers"][0]["value"] = 0.1
    assert load_reference("kept")["numbers"][0]["value"] == 0.779
    kept.write_text(text.replace("value: 0.779", "value: 0.778"))  # the same size
    assert load_reference("kept")["numbers"][0]["value"] == 0.778
    kept.write_text(text.replace("value: 0.779", "value: highh"))
    with pytest.raises(ConfigError, match=r"reference kept.yaml: key 'numbers.0.value' has value 'highh'"):
        load_reference("kept")


def test_the_reports_and_the_bundles_citation_name_the_post_itself_and_what_is_not_on_record() -> None:
    from rlvr_scaling.analysis.verdict.reproduction import reproduction_findings
    from rlvr_scaling.publish.bundle_readme import published_study

    reference = load_reference("lumi-rlvr-blog")
    head = reproduction_findings([], reference)[0]
    assert head.startswith(
        'Against "Scaling reinforcement learning with verifiable rewards for LLMs on LUMI", LUMI '
        "(lumi-supercomputer.eu), LUMI technical blog posts, date not on record, address not on record "
        "(lumi-rlvr-blog): "
    )
    assert "shared/seed" not in head
    entry = published_study(reference)
    assert entry["type"] == "blog" and entry["authors"] == [{"name": "LUMI (lumi-supercomputer.eu)"}]
    assert "url" not in entry and entry["notes"].endswith("its date and address not on record.")
    # Once known, the date and the address are cited and the note goes.
    known = {**reference, "citation": {**reference["citation"], "published": "2026-03-02", "url": "https://x.eu/p/"}}
    entry = published_study(known)
    assert (entry["date-published"], entry["url"], "notes" in entry) == ("2026-03-02", "https://x.eu/p/", False)
    assert "2026-03-02, https://x.eu/p/ (lumi-rlvr-blog)" in reproduction_findings([], known)[0]
