# One job per run of the plan; the sweep's selection (a checkpoint) decides the scaling runs.


rule step_settings:
    output:
        "results/steps/{step}-{settings_digest}.json",
    log:
        "results/logs/steps/{step}-{settings_digest}.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} step-settings {params.study} --step {wildcards.step} --output {output} > {log} 2>&1"


# A checkpoint, though nothing reads what it decides: Snakemake 9 skips the needrun check of every job
# downstream of one that must run (the preflight when the study or site changed), and its walk along
# the edges never crosses the made runs' ancient preflight, so a stale summary, index or report behind
# them waited for the next call (snakemake#4166). After a checkpoint, Snakemake checks every job again
# with the preflight done: one call finishes the study (#61).
checkpoint preflight:
    input:
        settings=STEP["preflight"]["settings"],
        # It needs the data and the model in place; taken as they are where their settings changed
        # (the preflight's changed too, and it must come before the runs made from them), as ancient
        # otherwise: data or a model changed by hand does not make it again, and so does not hide the
        # runs made from them (rules/common.smk: ancient_unless_remade).
        data=[
            f
            for dataset in DATASETS
            for f in ancient_unless_remade(
                dataset_files(dataset), STEP[f"dataset@{dataset}"]["settings"]
            )
        ],
        model=ancient_unless_remade([MODEL_DIR], STEP["model"]["settings"]),
        container=container_image(),
    output:
        "results/preflight/{site}.json",
    log:
        "results/logs/preflight/{site}.log",
    threads: STUDY.site.hardware.cpus_per_node
    resources:
        **PLAN.preflight_resources(),
        mpi="srun",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} preflight {params.study} --output {output} > {log} 2>&1"


rule run:
    input:
        data=lambda wc: dataset_files(PLAN.run(wc.run_id).dataset),
        model=MODEL_DIR,
        container=container_image(),
        # Every run waits for the site's current preflight; its age never makes a made run outdated.
        preflight=preflight_before_run,
    output:
        directory("results/runs/{run_id}"),
    log:
        "results/logs/runs/{run_id}.log",
    # A whole node per run: on the local site this keeps runs from sharing the cores they measure.
    threads: STUDY.site.hardware.cpus_per_node
    resources:
        **PLAN.run_resources(),
        mpi="srun",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} launch {params.study} {wildcards.run_id} > {log} 2>&1"


# A sequential sweep: after each point, whether the next one runs (analysis.across_runs.sweep_order).
checkpoint sweep_step:
    input:
        summaries=lambda wc: expand(
            "results/summaries/{run_id}.json",
            run_id=PLAN.sweep_run_ids_through(wc.dataset, wc.run_id),
        ),
        settings=STEP["selection"]["settings"],
        code=STEP["selection"]["code"],
    output:
        "results/sweep/{dataset}/{run_id}.json",
    log:
        "results/logs/sweep/{dataset}/{run_id}.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} sweep-step {params.study} --dataset {wildcards.dataset} "
        "--output {output} {input.summaries} > {log} 2>&1"


checkpoint selection:
    input:
        summaries=lambda wc: expand(
            "results/summaries/{run_id}.json", run_id=swept_run_ids(wc.dataset)
        ),
        settings=STEP["selection"]["settings"],
        code=STEP["selection"]["code"],
    output:
        "results/selection/{dataset}.json",
    log:
        "results/logs/selection/{dataset}.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} select {params.study} --dataset {wildcards.dataset} "
        "--output {output} {input.summaries} > {log} 2>&1"
