# The study report and the artifact bundle for publication.


rule report:
    input:
        tables="results/tables",
        figures="results/figures",
        indexes=INDEXES,
    output:
        "results/report/study.md",
    shell:
        "{CLI} report --tables {input.tables} --figures {input.figures} --output {output} {input.indexes}"


rule bundle:
    input:
        report="results/report/study.md",
        tables="results/tables",
        figures="results/figures",
        indexes=INDEXES,
    output:
        BUNDLE,
    shell:
        "{CLI} bundle --output {output} --report {input.report} --tables {input.tables} "
        "--figures {input.figures} {input.indexes}"
