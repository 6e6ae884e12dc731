# Shared state of one Snakemake invocation: the validated study, plan lookups, paths.
import os
import shlex
import sys

from pathlib import Path

from snakemake.exceptions import IncompleteCheckpointException
from snakemake.io import checkpoint_target

# This clone's package, wherever the workflow environment's rlvr_scaling was installed from: one
# environment serves every clone of a lab, each running its own code (here and in every job).
CLONE_PACKAGE = str(Path(workflow.main_snakefile).resolve().parent / "workflow")
sys.path.insert(0, CLONE_PACKAGE)

from rlvr_scaling.leftover_jobs import exit_if_work_left
from rlvr_scaling.snakemake_api import (
    Lookup,
    announce,
    budget_or_exit,
    budget_warning,
    executor_fits_site_or_exit,
    load_or_exit,
    results_root_or_exit,
    container_files,
    dataset_sources,
    local_job_words,
    effective_config_path,
    step_inputs,
    study_config_or_exit,
    submits_jobs,
    write_effective_config,
)

# The study as `rlvr-scaling plan --config X` reads it: config/config.yaml with each --configfile
# over it (a study file's datasets replace the default ones), then --config, read as --set would.
STUDY_CONFIG = study_config_or_exit(
    config, workflow.config_settings.configfiles, workflow.config_settings.config
)
SUBMITS = submits_jobs(sys.argv)
STUDY = load_or_exit(STUDY_CONFIG, submits=SUBMITS)
PLAN = Lookup(STUDY)
if workflow.is_main_process:
    announce(PLAN)
SITE = STUDY.site_name
DATASETS = STUDY.datasets
# results/ may be a link to the site's storage (storage.results). The one thing done while the rules
# are read: Snakemake reads results/ to build its plan, so the link must be there before (made once;
# every other file is made by a rule, or by `onstart` in the Snakefile).
RESULTS_ROOT = results_root_or_exit(STUDY, SUBMITS)
# Over budget.node_hours, a dry run warns here, and a real run submits nothing (onstart, Snakefile).
if workflow.is_main_process:
    budget_warning(PLAN)
# The CLI steps read exactly the config this invocation validated (including --config overrides),
# through the same interpreter as Snakemake's: jobs need no activated environment.
STUDY_FILE = effective_config_path(STUDY_CONFIG)
CLI = (
    f"PYTHONPATH={shlex.quote(CLONE_PACKAGE)}${{PYTHONPATH:+:$PYTHONPATH}} "
    f"{shlex.quote(sys.executable)} -m rlvr_scaling"
)
STUDY_ARGS = f"--config {STUDY_FILE}"
MODEL_DIR = f"results/models/{SITE}/{STUDY.model_folder}"
LOCAL_JOB = local_job_words(STUDY)
# The bundle's directory: it holds <study>-<site>-<date>.tar.gz, dated by the day its last run ended,
# which is known only once the runs are done.
BUNDLE = f"results/bundle/{STUDY.name}-{SITE}"
WORKFLOW_REPORT = "results/report/workflow.html"
PREFLIGHT = f"results/preflight/{SITE}.json"
# Per step, the settings file and the modules that define its output besides its data: a step reruns
# exactly when one of them changed (rlvr_scaling.step_inputs).
STEP = step_inputs(STUDY)
CONTAINER = container_files(STUDY)


wildcard_constraints:
    run_id=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    step=r"[a-z]+(@[A-Za-z0-9][A-Za-z0-9_.-]*)?",
    settings_digest=r"[0-9a-f]{12}",


def preflight_before_run(wildcards):
    """The preflight, for a run yet to be made; taken as ancient by a made one. Snakemake 9 skips the
    needrun check of every job downstream of one that must run, trusting its walk along the edges to
    reach them, and that walk never crosses an edge whose files are all ancient and present: with
    the preflight ancient for every run, a preflight to be redone (a changed model) hid the runs yet
    to be made, and the call ended after the preflight with exit 0 and the study unfinished (#61).
    The set of input files is the same either way, so a made run is not redone."""
    if os.path.exists(f"results/runs/{wildcards.run_id}"):
        return ancient(PREFLIGHT)
    return PREFLIGHT


def ancient_unless_remade(files, settings_file):
    """`files` as ancient, unless the step that makes them has settings not made yet (it will be
    made again in this call): then as they are, so that Snakemake's walk from that step reaches the
    preflight, which must run again before any run (snakemake#4166: an ancient edge is never
    crossed, and the preflight's own check is skipped downstream of a step that must run).
    """
    if os.path.exists(settings_file):
        return [ancient(f) for f in files]
    return list(files)


def dataset_files(dataset):
    return multiext(
        f"results/data/{SITE}/{dataset}/",
        "train.parquet",
        "val.parquet",
        "manifest.json",
    )


def first_sweep_summaries():
    """The summary of every sweep's first point: known without a checkpoint (a sequential sweep
    always runs its first point). Snakemake 9 looks for missing output only from its targets and
    takes a job whose input waits on a checkpoint as up to date while its output exists: after a
    setting that changes every run's id (adaptive_steps), the old selection, index and report would
    stand and the new sweep never start. A missing first summary, asked for by `all`, starts it.
    """
    return [
        f"results/summaries/{PLAN.sweep_run_ids(dataset)[0]}.json"
        for dataset in DATASETS
        if not PLAN.is_pinned(dataset)
    ]


def selected_prompts(dataset):
    """The one-node workload: pinned in the config, else the sweep checkpoint's choice."""
    if PLAN.is_pinned(dataset):
        return STUDY.config.selection[dataset]
    checkpoints.selection.get(dataset=dataset)
    selected = PLAN.selected_in_this_sweep(dataset)
    if selected is None:
        # Snakemake may count a selection left by a study with other run ids as made; this study's
        # is yet to be made (its sweep's summaries are newer), so wait for the checkpoint.
        selection_rule = checkpoints.selection.rule
        target = selection_rule.expand_output({"dataset": dataset})[0][0]
        raise IncompleteCheckpointException(selection_rule, checkpoint_target(target))
    return selected


def scaling_run_ids(dataset, series):
    return PLAN.series_run_ids(dataset, selected_prompts(dataset), series)


def swept_run_ids(dataset):
    """The sweep points to run: every one (selection_rule.sweep_order: grid), or in increasing prompts,
    each once the step after the one before (the checkpoint sweep_step) says the sweep goes on.
    """
    ids = PLAN.sweep_run_ids(dataset)
    if not PLAN.sequential_sweep:
        return ids
    for count, run_id in enumerate(ids[:-1], start=1):
        step = checkpoints.sweep_step.get(dataset=dataset, run_id=run_id).output[0]
        if not PLAN.sweep_goes_on(step):
            return ids[:count]
    return ids


def dataset_run_ids(dataset):
    ids = [] if PLAN.is_pinned(dataset) else swept_run_ids(dataset)
    for series in ("weak", "strong"):
        ids += scaling_run_ids(dataset, series)
    return sorted(set(ids))


def dataset_summaries(wildcards):
    return [
        f"results/summaries/{run_id}.json"
        for run_id in dataset_run_ids(wildcards.dataset)
    ]


def container_image():
    return [CONTAINER["image"], CONTAINER["record"]] if CONTAINER else []


def workflow_report(wildcards):
    return [WORKFLOW_REPORT] if os.path.exists(WORKFLOW_REPORT) else []


INDEXES = expand("results/index/{dataset}.json", dataset=DATASETS)
