# Datasets in verl's parquet schema, with row counts and checksums in a manifest, built as each
# dataset's entry in the study config says (a hub repository, local files, or generated rows).


rule dataset:
    input:
        # Source, revision and format: a changed one makes the dataset again (and names new runs).
        settings=lambda wc: STEP[f"dataset@{wc.dataset}"]["settings"],
        # A local source's files and an own reward file.
        sources=lambda wc: dataset_sources(STUDY, wc.dataset),
    output:
        dataset_files("{dataset}"),
    log:
        f"results/logs/data/{SITE}-{{dataset}}.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
        directory=lambda wc: f"results/data/{SITE}/{wc.dataset}",
    # A dry run prints a local job like a Slurm job, with the profile's resources: this says where it runs.
    message:
        f"rule dataset: {{wildcards.dataset}} into {{output[2]}}, {LOCAL_JOB}"
    shell:
        "{params.cli} data {params.study} --dataset {wildcards.dataset} "
        "--output {params.directory} > {log} 2>&1"
