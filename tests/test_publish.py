"""The analysis and publish layers on a fabricated LUMI-shaped study, in seconds: figures, their
captions and the report, checked for what a reader relies on (every figure and table is
there, every link resolves, every caption says what the config says); test_bundle.py packs them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rlvr_scaling.analysis.models import DatasetIndex, RunSummary
from rlvr_scaling.analysis.tables import TABLES

from .study_runs import FabricatedStudy, publish_study


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[FabricatedStudy, Path, Path, Path]:
    made = publish_study(tmp_path_factory.mktemp("publish"))
    return made.study, made.tables, made.figures, made.report


def test_every_figure_is_drawn_in_both_formats_with_a_caption_naming_its_runs(published) -> None:
    study, _tables, figures, _report = published
    captions = json.loads((figures / "captions.json").read_text())
    assert set(captions) == {
        "figure1_step_phases",
        "figure2_weak_efficiency",
        "figure3_weak_phase_times",
        "figure4_strong_speedup",
        "figure5_strong_phase_times",
        "figure_sweep",
    }
    for name, caption in captions.items():
        assert (figures / f"{name}.png").stat().st_size > 10_000 and (figures / f"{name}.pdf").exists(), name
        named = set(re.findall(r"\b(?:gsm8k|dapo_math)-n\d+-p\d+-[0-9a-f]{10}\b", caption))
        assert named <= set(study.runs), (name, named - set(study.runs))
        if name != "figure_sweep":
            assert named, name


def test_captions_say_the_warm_up_and_reference_the_config_holds(published) -> None:
    study, _tables, figures, _report = published
    captions = json.loads((figures / "captions.json").read_text())
    warmup = study.study.config.algorithm.warmup_steps
    reference = study.study.config.scaling.strong_reference_nodes
    assert f"the first {warmup} step(s) excluded as warm-up" in captions["figure2_weak_efficiency"]
    assert f"speedup, step time at {reference} nodes" in captions["figure4_strong_speedup"]


def test_the_report_holds_every_table_and_figure_and_its_links_resolve(published) -> None:
    study, tables, figures, report = published
    text = report.read_text()
    for name in TABLES:
        assert (tables / f"{name}.md").read_text() in text, name
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    links += [f"{name}.csv" for name in re.findall(r"Files: `([^`]+)\.csv`", text)]
    assert len(links) == len(json.loads((figures / "captions.json").read_text())) + len(TABLES)
    for link in links:
        assert (report.parent / link).resolve().is_file(), link
    algorithm = study.study.config.algorithm
    assert f"{algorithm.steps} steps per run of which the first {algorithm.warmup_steps} are warm-up" in text
    failed = [run_id for run_id, run in study.runs.items() if run.failed]
    assert failed and all(f"`{run_id}`" in text.split("## Runs left out")[1] for run_id in failed)


def test_summaries_and_indexes_read_back_to_the_json_they_were_read_from(published) -> None:
    study = published[0]
    summaries = sorted((study.root / "results" / "summaries").glob("*.json"))
    assert len(summaries) == len(study.runs) and any(run.failed for run in study.runs.values())
    for path in summaries:
        document = json.loads(path.read_text())
        assert RunSummary.from_json(document).to_json() == document, path.name
    for path in study.index_paths:
        document = json.loads(path.read_text())
        assert DatasetIndex.from_json(document).to_json() == document, path.name
