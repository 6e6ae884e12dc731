"""What the Snakemake rules ask of the plan: run lookups, run lists per series, sbatch resources.

The rules only look runs up here; the plan itself is built by rlvr_scaling.study.plan.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.analysis.selection_io import current_plan
from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution.storage import link_results
from rlvr_scaling.fsutil import write_text_if_changed
from rlvr_scaling.inputs.container import image_path, recipe_path, record_path, render_definition
from rlvr_scaling.study.config import Study, study_from_dict
from rlvr_scaling.study.identity import canonical_json, digest
from rlvr_scaling.study.plan import Run, dataset_runs, find_run
from rlvr_scaling.study.plan_view import site_note


def load_or_exit(config: dict[str, Any]) -> Study:
    """Validate the Snakemake config; a bad one stops here with the key, the value and the rule."""
    try:
        study = study_from_dict(config)
        study.require_account()
    except StudyError as exc:
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    note = site_note(study)
    if note:
        print(f"rlvr-scaling: note: {note}", file=sys.stderr)
    return study


def results_root_or_exit(study: Study) -> Path:
    """results/ as the site keeps it (a link to its storage, made once), before anything is written."""
    try:
        return link_results(study, Path.cwd())
    except StudyError as exc:
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


class Lookup:
    """Plan lookups for one Snakemake invocation; selections are read from disk when asked."""

    def __init__(self, study: Study, root: Path | None = None) -> None:
        self.study = study
        self.root = (root or Path.cwd()).resolve()
        self._cache: list[Run] = []
        self._cache_key: tuple | None = None

    @functools.cached_property
    def _pinned(self) -> dict[str, int | None]:
        return dict(self.study.config["selection"])

    def is_pinned(self, dataset: str) -> bool:
        return self._pinned.get(dataset) is not None

    def read_selected(self, selection_file: str) -> int:
        from rlvr_scaling.analysis.selection_io import read_selection_file

        return read_selection_file(Path(selection_file))

    def run(self, run_id: str) -> Run:
        return find_run(self._plan(), run_id)

    def _plan(self) -> list[Run]:
        # Resource functions ask for every job: rebuild only when a selection artifact changed.
        key = tuple(
            (d, p.stat().st_mtime_ns if p.exists() else None)
            for d in self.study.datasets
            for p in [paths.selection_file(self.root, d)]
        )
        if self._cache_key != key:
            self._cache = current_plan(self.study, self.root)
            self._cache_key = key
        return self._cache

    def sweep_run_ids(self, dataset: str) -> list[str]:
        runs = dataset_runs(self.study, dataset, None, self.root)
        return [r.run_id for r in runs if "sweep" in r.series and r.run_id]

    def series_run_ids(self, dataset: str, selected: int, series: str) -> list[str]:
        runs = dataset_runs(self.study, dataset, selected, self.root)
        return [r.run_id for r in runs if series in r.series and r.run_id]

    def resources(self, name: str) -> Callable[[Any], Any]:
        """A Snakemake resource function reading one field of the run's sbatch resources."""

        def resolve(wildcards: Any, attempt: int = 1) -> Any:
            slurm = self.run(wildcards.run_id).slurm or {}
            if name == "slurm_extra":
                return f"--gpus-per-node={slurm['gpus_per_node']}"
            if name == "runtime":
                return slurm["time_minutes"]
            if name == "slurm_account":
                return slurm["account"] or ""
            if name == "slurm_partition":
                return slurm["partition"]
            if name == "tasks_per_node":
                return slurm["ntasks_per_node"]
            return slurm[name]

        return resolve

    def preflight_resources(self, name: str) -> Callable[[Any], Any]:
        """The preflight job's sbatch resources: one node (two where the study has multi-node runs) of
        the site's preflight partition, for slurm.preflight_minutes."""
        from rlvr_scaling.execution.preflight import preflight_nodes

        def resolve(wildcards: Any, attempt: int = 1) -> Any:
            site = self.study.site
            slurm = site["slurm"]
            hardware = site["hardware"]
            values = {
                "nodes": preflight_nodes(self.study, self._plan()),
                "tasks_per_node": slurm["ntasks_per_node"],
                "cpus_per_task": max(1, hardware["cpus_per_node"] // slurm["ntasks_per_node"]),
                "mem_mb": hardware["memory_mb_per_node"],
                "runtime": slurm.get("preflight_minutes", 20),
                "slurm_partition": slurm.get("preflight_partition", slurm["partition"]),
                "slurm_account": self.study.slurm_account() or "",
                "slurm_extra": f"--gpus-per-node={hardware['gpus_per_node']}",
            }
            return values[name]

        return resolve


def write_preflight_definition(study: Study, root: Path | None = None) -> str:
    """What the preflight checks, in a file rewritten only when it changes: a changed study or site
    reruns the preflight (by its time stamp) before any new run, while finished runs stay."""
    path = (root or Path(".")) / "results" / "preflight" / f"{study.site_name}.defines.json"
    return write_text_if_changed(path, canonical_json({"config": study.config, "site": study.site}))


def write_container_recipe(study: Study) -> dict[str, str]:
    """The site's image files for the rules ({} without a container): the rendered definition (or
    SquashFS build script), rewritten only when it changes, so that the image is rebuilt exactly when
    what it is made of changes (container.image_identity); the image; the build's record."""
    if not study.site["container"]:
        return {}
    root = Path(".")
    return {
        "recipe": write_text_if_changed(recipe_path(study, root), render_definition(study)),
        "image": str(image_path(study, root)),
        "record": str(record_path(study, root)),
    }


def write_effective_config(config: dict[str, Any], root: Path | None = None) -> str:
    """Store the config this invocation validated, named by its hash, for the CLI steps to read."""
    path = (root or Path(".")) / "results" / ".study" / f"config-{digest(config, 12)}.json"
    return write_text_if_changed(path, canonical_json(config))
