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
from rlvr_scaling.analysis.history import history_path, record_study, study_history
from rlvr_scaling.analysis.reproduction import reproduction_rows

from .study_runs import STUDY_SETS, PublishedStudy, fabricate_study, publish_study, study_args


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> PublishedStudy:
    """The fabricated LUMI study, packed by the bundle command as the workflow's rule runs it."""
    published = publish_study(tmp_path_factory.mktemp("history"))
    root = published.study.root
    parts = ["--report", str(published.report), "--tables", str(published.tables), "--figures", str(published.figures)]
    argv = ["bundle", *study_args(STUDY_SETS, root), "--output", str(root / "results" / "bundle"), *parts]
    code, out = _cli(*argv, *map(str, published.study.index_paths))
    assert code == 0 and "results store:" in out, out
    # Packing the same study again is the same bundle: nothing more is stored.
    assert _cli(*argv, *map(str, published.study.index_paths))[0] == 0
    return published


def test_the_bundle_step_stores_the_study_once_with_its_runs_and_verdicts(bundled: PublishedStudy) -> None:
    root = bundled.study.root
    [entry] = study_history(history_path(root))
    reference = bundled.study.study.reference()
    assert reference is not None
    published = len(reference["numbers"]) + len(reference["relations"])
    assert entry["verdicts"] == {"reproduced": published} and entry["since"] is None
    # 20 valid scaling points: 5 node counts x weak and strong x 2 datasets (the 4-node run in both)
    assert entry["runs"] == 20
    code, out = _cli("history", "--root", str(root))
    assert code == 0 and "first study of its settings" in out and f"{published} reproduced" in out


def test_a_later_study_of_the_same_settings_is_flagged_where_it_moved(bundled: PublishedStudy, tmp_path: Path) -> None:
    # The same study measured again with the 16-node GSM8K weak run 25% slower, recorded into the
    # first one's store. Production records the bundle (whose sha256 is the key); any file of other
    # bytes stands in for a second bundle here.
    store = history_path(bundled.study.root)
    later = fabricate_study(tmp_path / "later", slower={("gsm8k", 16, 1600): 1.25})
    reference = later.study.reference()
    assert reference is not None
    rules = {e["id"]: e.get("tolerance", reference["default_tolerance"]) for e in reference["numbers"]}
    rules |= {e["id"]: e.get("tolerance", reference["default_tolerance"]) for e in reference["relations"]}
    verdicts = reproduction_rows(later.results, later.study.config, reference)
    stand_in = tmp_path / "later.tar.gz"
    stand_in.write_bytes(b"another bundle")
    record_study(store, later.root, later.results, stand_in, {"study": "again"}, verdicts, rules, "9999-01-01")
    first, second = study_history(store)
    assert second["since"] == first["key"]
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
