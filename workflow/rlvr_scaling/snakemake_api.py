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
from rlvr_scaling.analysis.across_runs.selection_io import current_plan, read_selection, read_sweep_step, sweep_run_ids
from rlvr_scaling.analysis.across_runs.sweep_order import SEQUENTIAL
from rlvr_scaling.analysis.cost.budget import check_budget
from rlvr_scaling.analysis.cost.run_estimates import RunEstimates
from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution.preflight.checks import preflight_nodes
from rlvr_scaling.execution.storage import link_results
from rlvr_scaling.fsutil import write_text_atomically
from rlvr_scaling.inputs.container import image_path, recipe_path, record_path
from rlvr_scaling.inputs.data_check import check_inputs
from rlvr_scaling.inputs.reward_file import reward_path
from rlvr_scaling.inputs.sources import local_split_files
from rlvr_scaling.inputs.step_size import check_step_sizes
from rlvr_scaling.plan_view import site_note, study_line
from rlvr_scaling.step_inputs import STEP_MODULES, settings_path, settings_steps, step_code
from rlvr_scaling.study.config import (
    Study,
    deep_merge,
    study_document,
    study_from_dict,
    typed_command_line,
    with_reward_digests,
)
from rlvr_scaling.study.identity import canonical_json, digest
from rlvr_scaling.study.plan import (
    RESOURCE_NAMES,
    PlannedRun,
    Run,
    build_resources,
    dataset_runs,
    find_run,
    known_runs,
    sbatch_resources,
)


def study_config_or_exit(
    merged: dict[str, Any], configfiles: list[Any] | None, command_line: dict[str, Any] | None
) -> dict[str, Any]:
    """The config this invocation means: config/config.yaml with each --configfile over it as
    `rlvr-scaling plan --config` reads a study file (study.config.over_study: its datasets replace the
    default ones, where Snakemake's own merge added them), then --config; with every own reward
    file's digest filled in, so each step reads the study this start-up validated."""
    try:
        missing = paths.missing_parts()
        if missing:
            raise StudyError(missing)
        base = study_document([Path(str(path)) for path in configfiles]) if configfiles else merged
        study_config = deep_merge(base, command_line or {}) if configfiles else merged
        return with_reward_digests(typed_command_line(study_config, command_line or {}))
    except StudyError as exc:
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


# Snakemake's options for calls that submit no job: they need no Slurm account (#62).
NO_SUBMISSION = frozenset(
    ["--unlock", "--cleanup-metadata", "--cm", "--list-rules", "--list", "-l", "--list-target-rules", "--lt"]
    + ["--summary", "-S", "--detailed-summary", "-D", "--lint", "--report", "--touch", "-t", "--list-changes"]
    + ["--lc", "--list-input-changes", "--li", "--list-params-changes", "--lp", "--list-code-changes"]
    + ["--list-untracked", "--lu", "--delete-all-output", "--delete-temp-output", "--cleanup-shadow"]
)


def submits_jobs(argv: list[str]) -> bool:
    """Whether a Snakemake command line may submit jobs (a dry run may: it shows their sbatch lines)."""
    return not any(arg.split("=", 1)[0] in NO_SUBMISSION for arg in argv[1:])


def load_or_exit(config: dict[str, Any], submits: bool = True) -> Study:
    """Validate the Snakemake config; a bad one stops here with the key, the value and the rule. The
    account is required only of a call that may submit jobs."""
    try:
        study = study_from_dict(config)
        if submits:
            study.require_account()
        check_inputs(study)  # what the data and model stages will need, before any job
    except StudyError as exc:
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    note = site_note(study)
    if note:
        print(f"rlvr-scaling: note: {note}", file=sys.stderr)
    return study


def executor_fits_site_or_exit(study: Study, executor: str | None) -> None:
    """Before any job starts: a site that runs on this machine never goes through a cluster's
    executor. `snakemake --profile lumi --config slurm_account=X` is how one gets there: the
    command line's --config replaces the profile's (site=lumi) whole, and the default site is local."""
    if executor in (None, "local", "dryrun", "touch") or study.site.scheduler == "slurm":
        return
    print(
        f"rlvr-scaling: error: site '{study.site_name}' runs on this machine, not through the '{executor}' "
        "executor: a --config on the command line replaces the whole of the profile's, its site= too; "
        "add site=<the profile's site> to it (e.g. --config site=lumi slurm_account=project_XXXXXXXXX)",
        file=sys.stderr,
    )
    raise SystemExit(2)


def announce(lookup: Lookup) -> None:
    """The study's datasets and run count, as `rlvr-scaling plan` prints them first."""
    try:
        print(f"rlvr-scaling: {study_line(lookup.study, lookup.plan())}", file=sys.stderr)
        check_step_sizes(lookup.study, lookup.plan(), lookup.root)
    except StudyError as exc:
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def budget_or_exit(lookup: Lookup) -> None:
    """When the workflow is about to start its jobs (onstart: not for a dry run, --report, --unlock
    or a job's own process): the runs known now (the sweep, or every run once the workloads are
    known) must fit the study's budget with what the runs done have cost. From then on, the scaling
    runs a sweep's selection names are checked too, before any is submitted."""
    try:
        lookup.check_budget()
    except StudyError as exc:
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    lookup.submitting = True


def budget_warning(lookup: Lookup) -> None:
    """While the rules are read: a dry run or a report says that a real run would be refused."""
    try:
        lookup.check_budget()
    except StudyError as exc:
        print(f"rlvr-scaling: warning: {exc}", file=sys.stderr)


def results_root_or_exit(study: Study, submits: bool = True) -> Path:
    """results/ as the site keeps it (a link to its storage, made once), before anything is written. A
    call that submits nothing (--unlock) goes on where the storage cannot be named (LUMI's scratch is
    per project: no account, no folder), with results/ as it is."""
    try:
        return link_results(study, Path.cwd())
    except StudyError as exc:
        if not submits:
            return paths.results_dir(Path.cwd())
        print(f"rlvr-scaling: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


class Lookup:
    """Plan lookups for one Snakemake invocation; selections are read from disk when asked."""

    def __init__(self, study: Study, root: Path | None = None) -> None:
        self.study = study
        self.root = (root or Path.cwd()).resolve()
        self._cache: list[PlannedRun] = []
        self._cache_key: tuple | None = None
        # Set once this invocation starts submitting jobs (budget_or_exit, from onstart).
        self.submitting = False

    @functools.cached_property
    def _pinned(self) -> dict[str, int | None]:
        return dict(self.study.config.selection)

    def is_pinned(self, dataset: str) -> bool:
        return self._pinned.get(dataset) is not None

    def selected_in_this_sweep(self, dataset: str) -> int | None:
        """The selection on disk if it was chosen from this study's sweep, else None: a selection left
        by a study whose runs had other ids (the adaptive step count switched on, say) is stale, as
        the plan (read_selection) already holds it to be."""
        return read_selection(self.root, dataset, set(self.sweep_run_ids(dataset)))

    def run(self, run_id: str) -> Run:
        return find_run(self._plan(), run_id)

    def plan(self) -> list[PlannedRun]:
        return self._plan()

    def _plan(self) -> list[PlannedRun]:
        # Resource functions ask for every job: rebuild only when a selection artifact changed, or a
        # sequential sweep took a step (its folder gained a file), which may skip points.
        sweeps = paths.results_dir(self.root) / "sweep"
        key = tuple(
            (d, p.stat().st_mtime_ns if p.exists() else None)
            for d in self.study.datasets
            for p in [paths.selection_file(self.root, d), sweeps / d]
        )
        if self._cache_key != key:
            self._cache = current_plan(self.study, self.root)
            self._cache_key = key
        return self._cache

    def sweep_run_ids(self, dataset: str) -> list[str]:
        """Every planned sweep point, in increasing prompts."""
        return sweep_run_ids(self.study, dataset, self.root)

    @property
    def sequential_sweep(self) -> bool:
        return self.study.config.selection_rule.sweep_order == SEQUENTIAL

    def sweep_run_ids_through(self, dataset: str, run_id: str) -> list[str]:
        """The sweep points up to and including `run_id`: what a sequential sweep measured when it
        decides whether to go on after it."""
        ids = self.sweep_run_ids(dataset)
        return ids[: ids.index(run_id) + 1]

    def sweep_goes_on(self, step_file: str) -> bool:
        return read_sweep_step(Path(step_file))

    def series_run_ids(self, dataset: str, selected: int, series: str) -> list[str]:
        runs = dataset_runs(self.study, dataset, selected, self.root)
        # Asked again once the sweep has chosen the workload: its scaling runs must fit the budget too.
        if self.submitting:
            self.check_budget()
        return [r.run_id for r in known_runs(runs) if series in r.series]

    def check_budget(self) -> None:
        check_budget(self.study, self._plan(), self.root)

    def run_resources(self) -> dict[str, Callable[[Any], Any]]:
        """The run rule's resources: per run, as the plan gives them; the time limit priced from what
        is measured when Snakemake asks (analysis.cost.run_estimates: it asks once the job is ready to
        run, and again for a retry)."""

        def of(name: str) -> Callable[[Any], Any]:
            def resource(wildcards: Any, attempt: int = 1) -> Any:  # Snakemake passes `attempt` by name
                run = self.run(wildcards.run_id)
                if name == "runtime":
                    return RunEstimates.of(self.study, self._plan(), self.root).run(run).resources[name]
                return run.resources[name]

            return resource

        return {name: of(name) for name in RESOURCE_NAMES}

    def build_resources(self) -> dict[str, Any]:
        """The image build job's resources (study.plan.build_resources): set here, not by a profile,
        so that the account reaches this job as it reaches every other."""
        return build_resources(self.study)

    def preflight_resources(self) -> dict[str, Callable[[Any], Any]]:
        """The preflight job's resources: one node (two where the study has multi-node runs) of the
        site's preflight partition, for slurm.preflight_minutes."""

        def of(name: str) -> Callable[[Any], Any]:
            def resolve(wildcards: Any, attempt: int = 1) -> Any:
                slurm = self.study.site.slurm
                nodes = preflight_nodes(self.study, self._plan())
                return sbatch_resources(self.study, nodes, slurm.preflight_minutes, slurm.preflight_partition)[name]

            return resolve

        return {name: of(name) for name in RESOURCE_NAMES}


def step_inputs(study: Study) -> dict[str, dict[str, Any]]:
    """Per derived step, what defines it besides its data (rlvr_scaling.step_inputs): `settings`, the
    file of the settings it reads, named by their content, and `code`, the modules it runs. The
    preflight's settings are the study and the site: a changed one reruns it before any new run
    (finished runs stay: they take the preflight as `ancient`)."""
    return {
        step: {"settings": settings_path(study, step), "code": step_code(step) if step in STEP_MODULES else []}
        for step in settings_steps(study)
    }


def local_job_words(study: Study) -> str:
    """Where a local rule's job runs, for the dry run's job messages (which print every job alike)."""
    if study.site.scheduler == "slurm":
        return "run by Snakemake on this machine (the login node), not submitted to Slurm"
    return "run on this machine"


def dataset_sources(study: Study, dataset: str) -> list[str]:
    """The local files a dataset's rows are read from and its own reward file: a changed one makes the
    dataset again (the lock then refuses a changed data file, naming it)."""
    spec = study.dataset(dataset)
    files = [str(reward_path(spec))] if spec.reward.custom else []
    if spec.kind == "local":
        files += [str(path) for split in local_split_files(dataset, spec).values() for path in split]
    return files


def container_files(study: Study) -> dict[str, str]:
    """The site's image files for the rules ({} without a container): the recipe (definition or
    SquashFS build script, named by its content), the image, the build's record."""
    if study.site.container is None:
        return {}
    root = Path(".")
    return {
        "recipe": str(recipe_path(study, root)),
        "image": str(image_path(study, root)),
        "record": str(record_path(study, root)),
    }


def effective_config_path(config: dict[str, Any]) -> str:
    """Where the config this invocation validated is kept for the CLI steps, named by its hash."""
    return str(paths.results_dir(Path(".")) / ".study" / f"config-{digest(config, 12)}.json")


def write_effective_config(config: dict[str, Any]) -> None:
    """Written when the workflow starts its jobs (onstart), never while the rules are read."""
    path = Path(effective_config_path(config))
    if not path.exists():
        write_text_atomically(path, canonical_json(config))
