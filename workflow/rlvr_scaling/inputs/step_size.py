"""A step never larger than the data: every run's prompts per step against its dataset's training rows,
checked when the study is planned (`rlvr-scaling plan`, Snakemake's start-up), before any job.

verl's loader drops an incomplete batch: a run whose step wants more prompts than the training split
holds has no batch to train on. The training rows are known at plan time for local files and
generated data; for a hub dataset once the data stage has counted them (its manifest). A run is
refused in one line naming it, both numbers and what would fit; a scaling series still waiting for
the sweep's selection is refused when not even the sweep's smallest point fits.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.inputs import synthetic
from rlvr_scaling.inputs.rows import held_out_count
from rlvr_scaling.inputs.sources import file_kind, local_split_files
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PendingRun, PlannedRun, Run


def _count_rows(path: Path) -> int:
    kind = file_kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if kind == "jsonl":
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    from rlvr_scaling.inputs.sources import read_records

    return len(read_records(path))


def training_rows(study: Study, name: str, root: Path) -> tuple[int | None, str]:
    """(the dataset's training rows, where the count comes from); None: not known before the data stage."""
    spec = study.dataset(name)
    manifest_path = paths.dataset_dir(root, study.site_name, name) / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("settings") == spec.build_settings():
            return int(manifest["files"]["train"]["rows"]), f"counted by the data stage ({manifest_path})"
    if spec.kind == "synthetic":
        return synthetic.ROWS["train"], "generated"
    if spec.kind != "local":
        return None, "a hub dataset: counted when the data stage downloads it"
    if spec.deduplicate:  # only building the rows knows how many prompts are distinct
        from rlvr_scaling.inputs.data import load_dataset

        return len(load_dataset(study, name).rows["train"]), f"in {spec.source}, distinct prompts"
    files = local_split_files(name, spec)  # relative to the working directory, as the data stage reads it
    train = sum(_count_rows(path) for path in files["train"])
    if "val" not in files:
        train -= held_out_count(train, spec.held_out)
    return train, f"in {spec.source}"


def step_problem(study: Study, run: Run, rows: int, where: str) -> str | None:
    if run.prompts <= rows:
        return None
    per_node = run.prompts // run.nodes if "weak" in run.series else None
    if run.series == ["sweep"]:
        fits = f"datasets.{run.dataset}.sweep values of at most {rows}"
    elif per_node is not None:
        fits = (
            f"selection.{run.dataset} of at most {rows // run.nodes} prompts per node at {run.nodes} nodes, or "
            f"scaling.weak_nodes of at most {rows // per_node} nodes at {per_node} per node"
        )
    else:
        reference = study.config.scaling.strong_reference_nodes
        fits = f"selection.{run.dataset} x scaling.strong_reference_nodes ({reference}) of at most {rows}"
    return (
        f"run {run.run_id} ({'+'.join(run.series)}, {run.nodes} node(s)) takes {run.prompts} prompts per step but "
        f"datasets.{run.dataset} has {rows} training rows ({where}); verl drops an incomplete batch, so it would "
        f"train on nothing. What fits: {fits}"
    )


def _pending_problem(study: Study, run: PendingRun, rows: int, where: str) -> str | None:
    smallest = min(study.dataset(run.dataset).sweep or [1])
    if smallest * run.factor <= rows:
        return None
    return (
        f"the {'+'.join(run.series)} run of {run.dataset} on {run.nodes} node(s) takes selection.{run.dataset} x "
        f"{run.factor} prompts per step, at least {smallest * run.factor} (the sweep's smallest point, {smallest}), "
        f"but datasets.{run.dataset} has {rows} training rows ({where}). What fits: scaling series whose prompt "
        f"factor is at most {rows // smallest}"
    )


def check_step_sizes(study: Study, plan: list[PlannedRun], root: Path) -> None:
    """StudyError for the first run whose step is larger than its dataset's training rows."""
    counted: dict[str, tuple[int | None, str]] = {}
    for run in plan:
        if run.dataset not in counted:
            counted[run.dataset] = training_rows(study, run.dataset, root)
        rows, where = counted[run.dataset]
        if rows is None:
            continue
        problem = (
            step_problem(study, run, rows, where) if isinstance(run, Run) else _pending_problem(study, run, rows, where)
        )
        if problem:
            raise StudyError(problem)
