# The site's container: verl added on top of the site's base image (LUMI: an AI Factory image).
# The local site runs without one.


rule container_definition:
    output:
        "results/containers/{site}/verl.def",
    log:
        "results/logs/containers/{site}-definition.log",
    conda:
        ENV
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} container-definition {params.study} --output {output} > {log} 2>&1"


rule container_image:
    input:
        "results/containers/{site}/verl.def",
    output:
        image="results/containers/{site}/verl.sif",
        record="results/containers/{site}/verl.json",
    log:
        "results/logs/containers/{site}-build.log",
    conda:
        ENV
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} container-build {params.study} --definition {input} --image {output.image}"
        " --record {output.record} > {log} 2>&1"
