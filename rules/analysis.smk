# From run measurements to the study's results: summaries, tables, figures.


rule summary:
    input:
        run="results/runs/{run_id}",
        settings=STEP["summary"]["settings"],
        code=STEP["summary"]["code"],
    output:
        "results/summaries/{run_id}.json",
    log:
        "results/logs/summaries/{run_id}.log",
    params:
        cli=CLI,
        warmup_steps=STUDY.config.algorithm.warmup_steps,
        peak=STUDY.site.hardware.peak_tflops_bf16 or "none",
    shell:
        "{params.cli} summarize {input.run} --warmup-steps {params.warmup_steps} "
        "--peak-tflops-bf16 {params.peak} --output {output} > {log} 2>&1"


rule index:
    input:
        selection=lambda wc: (
            []
            if PLAN.is_pinned(wc.dataset)
            else f"results/selection/{wc.dataset}.json"
        ),
        summaries=dataset_summaries,
        settings=STEP["index"]["settings"],
        code=STEP["index"]["code"],
    output:
        "results/index/{dataset}.json",
    log:
        "results/logs/index/{dataset}.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
        selection=lambda wc, input: (
            f"--selection {input.selection}" if input.selection else ""
        ),
    shell:
        "{params.cli} index {params.study} --dataset {wildcards.dataset} {params.selection} "
        "--output {output} {input.summaries} > {log} 2>&1"


rule tables:
    input:
        indexes=INDEXES,
        settings=STEP["tables"]["settings"],
        code=STEP["tables"]["code"],
    output:
        report(
            directory("results/tables"),
            patterns=["{name}.md"],
            caption="../report/tables.rst",
            category="Tables",
        ),
    log:
        "results/logs/tables.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
        # For the caption in Snakemake's report.
        warmup_steps=STUDY.config.algorithm.warmup_steps,
        reference_nodes=STUDY.config.scaling.strong_reference_nodes,
    shell:
        "{params.cli} tables {params.study} --output {output} {input.indexes} > {log} 2>&1"


rule figures:
    input:
        indexes=INDEXES,
        settings=STEP["figures"]["settings"],
        code=STEP["figures"]["code"],
    output:
        report(
            directory("results/figures"),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
        ),
    log:
        "results/logs/figures.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
        # For the caption in Snakemake's report.
        warmup_steps=STUDY.config.algorithm.warmup_steps,
        reference_nodes=STUDY.config.scaling.strong_reference_nodes,
    shell:
        "{params.cli} figures {params.study} --output {output} {input.indexes} > {log} 2>&1"
