"""The analysis and publish layers on a fabricated LUMI-shaped study, in seconds: figures, their
captions and the report, checked for what a reader relies on (every figure and table is
there, every link resolves, every caption says what the config says); test_bundle.py packs them."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from rlvr_scaling.analysis.across_runs.engine_fill import fill_finding, fill_rows
from rlvr_scaling.analysis.shown.table_files import TABLES
from rlvr_scaling.measured.models import DatasetIndex, RunSummary

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
        "figure6_phase_models",
    }
    for name, caption in captions.items():
        assert (figures / f"{name}.png").stat().st_size > 10_000 and (figures / f"{name}.pdf").exists(), name
        named = set(re.findall(r"\b(?:gsm8k|dapo_math)-n\d+-p\d+-[0-9a-f]{10}\b", caption))
        assert named <= set(study.runs), (name, named - set(study.runs))
        if name != "figure_sweep":
            assert named, name


def test_the_models_figure_names_its_runs(published) -> None:
    study, _tables, figures, _report = published
    captions = json.loads((figures / "captions.json").read_text())
    assert "leave-one-out cross-validation" in captions["figure6_phase_models"]
    assert (figures / "figure6_phase_models.png").stat().st_size > 10_000
    assert all(r.run_id in captions["figure6_phase_models"] for r in study.results.series("gsm8k", "weak"))


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


def test_the_report_explains_the_strong_scaling_losses_in_sentences_from_the_numbers(published) -> None:
    study, _tables, _figures, report = published
    text = report.read_text().split("## Strong scaling: under-filled generation engines")[1].split("## Tables")[0]
    rows = {(r["dataset"], r["nodes"]): r for r in fill_rows(study.results, 4)}
    # The published shapes: GSM8K 400 -> 100 and DAPO 40 -> 10 trajectories per engine from 4 to 16 nodes
    # (1600 and 160 at 1 node), both saturated at their 4-node count; 8 and 16 nodes under-filled.
    assert "fall from 1600 at 1 node to 100 at 16 nodes" in text and "fall from 160 at 1 node to 10 at 16 nodes" in text
    assert text.count("the runs at 8 and 16 nodes give it fewer: their engines are under-filled") == 2
    assert "set to the one-node workload's 400 (where the one-node sweep saturated)" in text
    assert "set to the one-node workload's 40 (pinned in the config)" in text
    assert f"{rows['gsm8k', 16]['gen_share_of_extra']:.0%} at 16 nodes" in text
    assert rows["gsm8k", 16]["gen_share_of_extra"] == pytest.approx(0.6, abs=0.05)


def test_a_finding_says_when_no_run_is_under_filled() -> None:
    def row(nodes: int, per_engine: float, concurrency: int) -> dict:
        return {"nodes": nodes, "trajectories_per_engine": per_engine, "concurrency": concurrency,
                "under_filled": per_engine < concurrency, "gen_share_of_extra": None}  # fmt: skip

    full = fill_finding("d", [row(1, 100, 50), row(2, 50, 50)], pinned=False)
    assert full == (
        "**d**: under strong scaling the trajectories per generation engine fall from 100 at 1 node to 50 at 2 "
        "nodes. Every engine is set to the one-node workload's 50 (where the one-node sweep saturated); no run "
        "gives it fewer, so none is under-filled."
    )


def _drawn(study: FabricatedStudy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The scaling figures as drawn (matplotlib's figures, before any file is written)."""
    from rlvr_scaling.analysis.shown import figures

    drawn: dict = {}

    def keep(fig, output: Path, name: str, captions: dict, caption: str) -> None:
        drawn[name] = fig
        captions[name] = caption

    monkeypatch.setattr(figures, "_save", keep)
    captions: dict = {}
    figures.figure_strong_speedup(study.results, study.study.config.scaling.strong_reference_nodes, tmp_path, captions)
    figures.figure_weak_efficiency(study.results, tmp_path, captions)
    return drawn


def _plotted(ax) -> dict[str, dict[int, float]]:
    """Each dataset's points (its error-bar line), by node count."""
    return {
        c.get_label(): dict(zip(map(int, c.lines[0].get_xdata()), map(float, c.lines[0].get_ydata()), strict=True))
        for c in ax.containers
    }


def _table(tables: Path, name: str, column: str, factor: float = 1.0) -> dict[str, dict[int, float]]:
    rows = list(csv.DictReader((tables / f"{name}.csv").open()))
    found: dict[str, dict[int, float]] = {}
    for row in rows:
        found.setdefault(row["dataset"], {})[int(row["nodes"])] = factor * float(row[column])
    return found


def test_the_scaling_figures_plot_the_tables_numbers_and_the_ideal(published, tmp_path, monkeypatch) -> None:
    # Figures were once checked by file size only: an inverted ratio or another ideal line drew a
    # figure of the same size. The points are the tables' own numbers (one definition:
    # analysis/across_runs/scaling.py), so a reader's figure and table agree.
    study, tables, _figures, _report = published
    drawn = _drawn(study, tmp_path, monkeypatch)
    reference = study.study.config.scaling.strong_reference_nodes
    speedup = drawn["figure4_strong_speedup"].axes[0]
    expected = _table(tables, "strong_scaling", "speedup")
    assert set(expected) == {"dapo_math", "gsm8k"}
    plotted = _plotted(speedup)
    assert plotted.keys() == expected.keys()
    for dataset, points in expected.items():
        assert plotted[dataset] == pytest.approx(points, rel=1e-12), dataset
        # the reference's own speedup is 1, and more nodes are faster in the published shape
        assert points[reference] == pytest.approx(1.0) and points[max(points)] > 1.5
    ideal = [line for line in speedup.lines if line.get_linestyle() == ":"]
    assert ideal
    for line in ideal:
        for nodes, value in zip(line.get_xdata(), line.get_ydata(), strict=True):
            assert value == nodes / reference
    efficiency = _plotted(drawn["figure2_weak_efficiency"].axes[0])
    assert efficiency == {
        dataset: pytest.approx(points, rel=1e-12)
        for dataset, points in _table(tables, "weak_scaling", "efficiency", 100.0).items()
    }
    for fig in drawn.values():
        plt.close(fig)


def test_the_lumi_study_reports_mfu_per_phase_beside_verls_zero(published) -> None:
    # GSM8K, one node, 100 prompts x 8 = 800 trajectories of ~110 + 740 tokens, update_actor ~84 s
    # (tests/study_runs.py PROFILES): 3 x (2 x 7.568e9 x 680000 + 2 x 36 x 4096 x 800 x 850^2) = 3.14e16
    # FLOPs over 84 s x 8 GCDs x 191.5e12 FLOP/s = 0.244, give or take the 3% jitter.
    made, tables, _figures, report_path = published
    run = made.run("gsm8k", "weak", 1)
    summary = json.loads(run.summary_path.read_text())["summary"]["mfu"]
    assert summary["peak_tflops_per_gpu"] == 191.5
    assert 0.23 < summary["by_phase"]["update_actor"]["mean"] < 0.26
    assert summary["by_phase"]["update_actor"]["n"] == run.run.steps - run.run.warmup_steps
    rows = [r for r in _rows(tables / "mfu.csv") if r["run_id"] == run.run.run_id]
    assert rows and all(float(r["update_actor_mfu"]) == summary["by_phase"]["update_actor"]["mean"] for r in rows)
    assert all(float(r["verl_update_actor_mfu"]) == 0.0 for r in rows)
    report = report_path.read_text()
    section = report.split("## Model FLOPs utilisation", 1)[1].split("\n## ", 1)[0]
    assert "Peak 191.5 TFLOP/s per GPU" in section and "verl: update_actor 0.0%, old_log_prob 0.0%" in section
    assert f"gsm8k, 1 node(s), 100 prompts: step {100 * summary['by_phase']['step']['mean']:.1f}%" in section


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_lumi_shaped_study_reproduces_every_published_number_and_the_report_says_so(published) -> None:
    made, tables, _figures, report_path = published
    rows = _rows(tables / "reproduction.csv")
    reference = made.study.reference()
    assert reference is not None
    entries = [*reference["numbers"], *reference["relations"]]
    # One row per published number and relation, in the reference's order, each reproduced.
    assert [r["id"] for r in rows] == [e["id"] for e in entries]
    assert {r["verdict"] for r in rows} == {"reproduced"}, [(r["id"], r["why"]) for r in rows]
    for row, entry in zip(rows, entries, strict=True):
        assert row["source"] == entry["source"] and row["run_ids"], row
        if "value" in entry and isinstance(entry["value"], float | int):
            assert float(row["published"]) == entry["value"]
    # The strong 16-node GSM8K time is the run's mean step time, as the strong-scaling table has it.
    strong = next(r for r in _rows(tables / "strong_scaling.csv") if (r["dataset"], r["nodes"]) == ("gsm8k", "16"))
    assert next(r for r in rows if r["id"] == "gsm8k-strong-time-16")["measured"] == strong["step_time_s"]
    section = report_path.read_text().split("## Reproduction of the published study", 1)[1].split("\n## ", 1)[0]
    assert f"{len(rows)} reproduced of {len(rows)} published numbers and relations" in section
