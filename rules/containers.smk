# The site's container: verl added on top of the site's base image (LUMI: an AI Factory image), as a
# derived image or as a venv packed into SquashFS (container.build). The recipe (definition or build
# script) is named by its content: a changed recipe is a new file, and the image is rebuilt from it.
# The local site runs without one.


rule container_recipe:
    output:
        CONTAINER.get("recipe", "results/containers/none/recipe"),
    log:
        f"results/logs/containers/{SITE}-recipe.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} container-definition {params.study} --output {output} > {log} 2>&1"


rule container_image:
    input:
        CONTAINER.get("recipe", []),
    output:
        image=CONTAINER.get("image", "results/containers/none/verl.sif"),
        record=CONTAINER.get("record", "results/containers/none/verl.json"),
    log:
        f"results/logs/containers/{SITE}-build.log",
    # A Slurm job: the site's build partition, time, CPUs and memory, and the study's account.
    resources:
        **PLAN.build_resources(),
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} container-build {params.study} --definition {input} --image {output.image}"
        " --record {output.record} > {log} 2>&1"
