# From run measurements to the study's results: summaries, tables, figures.


rule summary:
    input:
        "results/runs/{run_id}",
    output:
        "results/summaries/{run_id}.json",
    shell:
        "{CLI} summarize {input} --output {output}"


rule index:
    input:
        selection=lambda wc: [] if PLAN.is_pinned(wc.dataset) else f"results/selection/{wc.dataset}.json",
        summaries=dataset_summaries,
    output:
        "results/index/{dataset}.json",
    shell:
        "{CLI} index --dataset {wildcards.dataset} --output {output} {input.summaries}"


rule tables:
    input:
        INDEXES,
    output:
        directory("results/tables"),
    shell:
        "{CLI} tables --output {output} {input}"


rule figures:
    input:
        INDEXES,
    output:
        directory("results/figures"),
    shell:
        "{CLI} figures --output {output} {input}"
