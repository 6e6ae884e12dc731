# One job per run of the plan; the sweep's selection (a checkpoint) decides the scaling runs.


rule preflight_definition:
    output:
        PREFLIGHT_DEFINITION,
    log:
        f"results/logs/preflight/{SITE}-definition.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} preflight-definition {params.study} --output {output} > {log} 2>&1"


rule preflight:
    input:
        definition=PREFLIGHT_DEFINITION,
        data=[dataset_files(dataset) for dataset in DATASETS],
        model=MODEL_DIR,
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
        # Every run waits for the site's preflight; its age never makes a run outdated.
        preflight=ancient(PREFLIGHT),
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


checkpoint selection:
    input:
        lambda wc: expand(
            "results/summaries/{run_id}.json", run_id=PLAN.sweep_run_ids(wc.dataset)
        ),
    output:
        "results/selection/{dataset}.json",
    log:
        "results/logs/selection/{dataset}.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} select {params.study} --dataset {wildcards.dataset} "
        "--output {output} {input} > {log} 2>&1"
