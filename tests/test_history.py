"""The results store (#34): a finished study's bundle step appends it to results/history.sqlite;
`rlvr-scaling history` lists the studies and flags what moved beyond its tolerance since the last
study of the same settings."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from rlvr_scaling import cli
from rlvr_scaling.analysis.verdict.reproduction import reproduction_rows
from rlvr_scaling.publish.history import SETTINGS, history_path, record_study, study_history
from rlvr_scaling.publish.study_comparison import study_facts

from .study_runs import STUDY_SETS, PublishedStudy, fabricate_study, publish_study, study_args


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> PublishedStudy:
    """The fabricated LUMI study, packed by the bundle command as the workflow's rule runs it."""
    # No PNG or PDF: the history reads the runs and verdicts (study_runs.publish_study says where they are drawn).
    published = publish_study(tmp_path_factory.mktemp("history"), figure_formats=())
    root = published.study.root
    parts = ["--report", str(published.report), "--tables", str(published.tables), "--figures", str(published.figures)]
    argv = ["bundle", *study_args(STUDY_SETS, root), "--output", str(root / "results" / "bundle"), *parts]
    code, out = _cli(*argv, *map(str, published.study.index_paths))
    assert code == 0 and "results store:" in out, out
    # As `make demo` does: packed again once the Snakemake report is made, a bundle of other bytes with the
    # same runs in it, then once more unchanged.
    (published.report.parent / "workflow.html").write_text("<html>the Snakemake report</html>\n")
    assert _cli(*argv, *map(str, published.study.index_paths))[0] == 0
    assert _cli(*argv, *map(str, published.study.index_paths))[0] == 0
    return published


def test_the_bundle_step_stores_the_study_once_with_its_runs_and_verdicts(bundled: PublishedStudy) -> None:
    root = bundled.study.root
    [entry] = study_history(history_path(root))
    reference = bundled.study.study.reference()
    assert reference is not None
    published = len(reference["numbers"]) + len(reference["relations"])
    assert entry["verdicts"] == {"reproduced": published} and entry["since"] is None
    # 20 valid scaling points: 5 node counts x weak and strong x 2 datasets (the 4-node run in both), once
    # each though the study was recorded three times
    assert entry["runs"] == 20
    assert entry["recorded_again"] is not None and entry["changes"] is None
    code, out = _cli("history", "--root", str(root))
    assert code == 0 and "first study of its settings" in out and f"{published} reproduced" in out
    assert "recorded again unchanged" in out


def test_a_study_is_known_by_its_runs_and_settings_not_its_bundle(bundled: PublishedStudy, tmp_path: Path) -> None:
    """The key: sha256 of the name, site, settings and every run id with its metrics' sha256 (by hand here)."""
    import hashlib

    root = bundled.study.root
    [entry] = study_history(history_path(root))
    results = bundled.study.results
    runs = {
        s.run_id: (hashlib.sha256((root / "results" / "runs" / s.run_id / "metrics.jsonl").read_bytes()).hexdigest()
                   if s.status == "succeeded" else None)
        for s in results.summaries.values()
    }  # fmt: skip
    settings = json.loads(
        json.dumps({k: v for k, v in study_facts(results, root).items() if k in SETTINGS}, default=str)
    )
    identity = {"name": "qwen3-8b-grpo-verl", "site": "lumi", "settings": settings, "runs": runs}
    assert entry["key"] == hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def test_a_later_study_of_the_same_settings_is_flagged_where_it_moved(bundled: PublishedStudy, tmp_path: Path) -> None:
    # The same study measured again with the 16-node GSM8K weak run 25% slower, recorded into the
    # first one's store. Production records the bundle; any file stands in for it here (the key is
    # what the study measured, not the bundle's bytes).
    store = history_path(bundled.study.root)
    later = fabricate_study(tmp_path / "later", slower={("gsm8k", 16, 1600): 1.25})
    reference = later.study.reference()
    assert reference is not None
    rules = {e["id"]: e.get("tolerance", reference["default_tolerance"]) for e in reference["numbers"]}
    rules |= {e["id"]: e.get("tolerance", reference["default_tolerance"]) for e in reference["relations"]}
    verdicts = reproduction_rows(later.results, later.study.config, reference)
    stand_in = tmp_path / "later.tar.gz"
    stand_in.write_bytes(b"another bundle")
    [first] = study_history(store)
    provenance = {"study": first["name"], "site": first["site"]}
    record_study(store, later.root, later.results, stand_in, provenance, verdicts, rules, "9999-01-01")
    first, second = study_history(store)
    assert second["since"] == first["key"]
    # the one run measured again is what changed; recording it again changes nothing more
    slow = later.run("gsm8k", "weak", 16).run.run_id
    assert second["changes"] == [f"1 run(s) measured again: {slow}"]
    record_study(store, later.root, later.results, stand_in, provenance, verdicts, rules, "9999-01-02")
    assert [e["key"] for e in study_history(store)] == [first["key"], second["key"]]
    assert study_history(store)[1]["recorded_again"] == "9999-01-02"
    moved = {line.split(":", 1)[0] for line in second["moved"]}
    # By hand: the run's own step time, and the four published numbers made from it (as in
    # tests/test_reproduction.py); nothing else moved beyond its tolerance.
    assert moved == {
        "gsm8k weak 16 node(s) step time",
        "gsm8k-weak-efficiency-16",
        "gsm8k-weak-growth-16",
        "gsm8k-weak-growth-share-16",
        "gsm8k-weak-efficiency-slope",
    }, second["moved"]
    code, out = _cli("history", "--root", str(bundled.study.root), "--json")
    assert code == 0 and json.loads(out)[1]["moved"] == second["moved"]
