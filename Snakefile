# rlvr-scaling: the study in config/config.yaml on the site it names (default: local).
# `snakemake --cores 2` runs the local toy study; `snakemake --profile lumi` runs it on LUMI.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# The config is validated in rules/common.smk, by the same code as `rlvr-scaling plan` (one-line
# errors naming the key), together with the site it names.


include: "rules/common.smk"
include: "rules/containers.smk"
include: "rules/data.smk"
include: "rules/model.smk"
include: "rules/runs.smk"
include: "rules/analysis.smk"
include: "rules/bundle.smk"


# The config the CLI steps read (rules/common.smk): written as the jobs start, not while the rules
# are read, so that a dry run writes nothing.
onstart:
    # Nothing is submitted to a cluster for a site that runs here, nor over budget.node_hours.
    executor_fits_site_or_exit(
        STUDY, getattr(workflow.executor_plugin, "name", None)
    )
    budget_or_exit(PLAN)
    write_effective_config(STUDY_CONFIG)


# A call that ends well has left nothing of what it was asked for, or exits 1 naming what is left.
onsuccess:
    exit_if_work_left(sys.argv)


# Cheap steps run where Snakemake runs (a login node on LUMI); only runs and image builds are
# Slurm jobs.
localrules:
    all,
    step_settings,
    container_recipe,
    dataset,
    model,
    summary,
    sweep_step,
    selection,
    index,
    tables,
    figures,
    report,
    bundle,


rule all:
    default_target: True
    input:
        BUNDLE,
        first_sweep_summaries(),
