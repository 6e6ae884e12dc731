# The site's container: verl added on top of the site's base image (LUMI: an AI Factory image), as a
# derived image or as a venv packed into SquashFS (container.build). The recipe (definition or build
# script) is rendered while the rules are read and rewritten only when it changes. The local site
# runs without one.


rule container_image:
    input:
        CONTAINER.get("recipe", []),
    output:
        image=CONTAINER.get("image", "results/containers/none/verl.sif"),
        record=CONTAINER.get("record", "results/containers/none/verl.json"),
    log:
        f"results/logs/containers/{SITE}-build.log",
    conda:
        ENV
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} container-build {params.study} --definition {input} --image {output.image}"
        " --record {output.record} > {log} 2>&1"
