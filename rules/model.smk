# The model: downloaded at a pinned revision (LUMI) or built on the spot (local).


rule model:
    input:
        settings=STEP["model"]["settings"],
    output:
        directory(MODEL_DIR),
    log:
        f"results/logs/model-{SITE}.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    message:
        f"rule model: into {{output}}, {LOCAL_JOB}"
    shell:
        "{params.cli} model {params.study} --output {output} > {log} 2>&1"
