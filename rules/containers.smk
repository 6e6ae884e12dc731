# The site's container: verl added on top of the site's base image (LUMI: an AI Factory image).
# The local site runs without one.


rule container_definition:
    output:
        "results/containers/{site}/verl.def",
    shell:
        "{CLI} container-definition --site {wildcards.site} --output {output}"


rule container_image:
    input:
        "results/containers/{site}/verl.def",
    output:
        "results/containers/{site}/verl.sif",
    log:
        "results/logs/containers/{site}.log",
    shell:
        "apptainer build --fakeroot {output} {input} > {log} 2>&1"


def container_image():
    return [f"results/containers/{SITE}/verl.sif"] if STUDY.site["container"] else []
