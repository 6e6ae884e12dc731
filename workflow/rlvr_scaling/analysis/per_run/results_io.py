"""Loading a study's run summaries through the per-dataset index files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling.errors import StudyError
from rlvr_scaling.fsutil import relative_to_root, write_json
from rlvr_scaling.measured.models import DatasetIndex, IndexedRun, RunSummary


def reading_order(indexes: list[DatasetIndex]) -> list[DatasetIndex]:
    """The one order in which every table, figure and report lists the datasets: by name. Not the
    study's order: records such as the bundled config.json keep their keys sorted, so a reader who
    recomputes the tables from them (`verify`) could not know any other order."""
    return sorted(indexes, key=lambda index: index.dataset)


@dataclass
class StudyResults:
    indexes: list[DatasetIndex]
    summaries: dict[str, RunSummary]

    def __post_init__(self) -> None:
        self.indexes = reading_order(self.indexes)
        # Summaries too: a table made from them row by row (costs, overhead) lists them in this order.
        indexed = [r.run_id for index in self.indexes for r in index.runs if r.run_id in self.summaries]
        rest = sorted(set(self.summaries) - set(indexed))
        self.summaries = {run_id: self.summaries[run_id] for run_id in [*indexed, *rest]}

    def datasets(self) -> list[str]:
        return [index.dataset for index in self.indexes]

    def index(self, dataset: str) -> DatasetIndex:
        return next(i for i in self.indexes if i.dataset == dataset)

    def series(self, dataset: str, series: str) -> list[RunSummary]:
        """Valid summaries of one series, by node count."""
        runs = [self.summaries[r.run_id] for r in self.index(dataset).runs if series in r.series]
        return sorted((s for s in runs if s.valid), key=lambda s: s.nodes)

    def run_at(self, dataset: str, series: str, nodes: int) -> RunSummary | None:
        """The valid summary of one series at a node count; None when there is none (or no such dataset)."""
        if dataset not in self.datasets():
            return None
        return next((s for s in self.series(dataset, series) if s.nodes == nodes), None)

    def invalid(self) -> list[RunSummary]:
        return [s for s in self.summaries.values() if not s.valid]


def one_image(dataset: str, summaries: dict[str, RunSummary]) -> str | None:
    """The engine image's sha256 that every measured run of the dataset recorded. Run ids name what
    an image is made of, not the built file (study.image_identity): runs measured on two builds
    must not stand in one table."""
    images: dict[str, list[str]] = {}
    for run_id, summary in summaries.items():
        image = (summary.provenance.get("container") or {}).get("sha256")
        if image:
            images.setdefault(image, []).append(run_id)
    if len(images) > 1:
        listing = "; ".join(f"{digest[:12]}: {', '.join(sorted(ids))}" for digest, ids in images.items())
        raise StudyError(
            f"the runs of {dataset} were measured on {len(images)} different engine images ({listing}): "
            "delete the results/runs/ folders of the runs not made on the current image (results/containers/"
            "<site>/verl.json names it) and run the workflow again"
        )
    return next(iter(images), None)


def write_index(
    dataset: str,
    summary_paths: list[Path],
    series: dict[str, list[str]],
    selection: dict[str, Any] | None,
    output: Path,
    root: Path,
) -> None:
    """`series` maps run ids to the series the plan puts them in now: a sweep run learns that it is
    also the 1-node weak run only once the selection exists, after it ran."""
    summaries = {}
    runs = []
    for path in summary_paths:
        summary = RunSummary.from_json(json.loads(path.read_text()))
        summaries[summary.run_id] = summary
        runs.append(
            IndexedRun(
                run_id=summary.run_id,
                series=series.get(summary.run_id, summary.series),
                nodes=summary.nodes,
                prompts=summary.prompts,
                valid=summary.valid,
                summary=relative_to_root(path, root),
            )
        )
    image = one_image(dataset, summaries)
    index = DatasetIndex(dataset, selection, image, sorted(runs, key=lambda r: (r.nodes, r.prompts)))
    write_json(output, index.to_json())


def index_dataset(
    study: Any, dataset: str, selection_path: Path | None, summary_paths: list[Path], root: Path, output: Path
) -> None:
    """The dataset's index, with its selection (the sweep's artifact, or the study's pinned workload)
    and each run's series as the plan puts it now."""
    from rlvr_scaling.study.plan import dataset_runs, known_runs

    if selection_path is not None:
        selection = json.loads(selection_path.read_text())
        selected = selection["selected"]["prompts"]
    else:
        pinned = study.config.selection.get(dataset)
        selection, selected = {"prompts": pinned, "pinned": True}, pinned
    series = {r.run_id: r.series for r in known_runs(dataset_runs(study, dataset, selected, root))}
    write_index(dataset, summary_paths, series, selection, output, root)


def load_results(index_paths: list[Path], root: Path) -> StudyResults:
    """The indexes and every summary they name (a relative name is under `root`, the study's root)."""
    indexes = [DatasetIndex.read(path) for path in index_paths]
    summaries = {}
    for index in indexes:
        for run in index.runs:
            summary = RunSummary.from_json(json.loads((root / run.summary).read_text()))
            summary.series = run.series
            summaries[run.run_id] = summary
    return StudyResults(indexes, summaries)
