# The study report and the artifact bundle for publication.


rule report:
    input:
        tables="results/tables",
        figures="results/figures",
        indexes=INDEXES,
        settings=STEP["report"]["settings"],
        code=STEP["report"]["code"],
    output:
        report(
            "results/report/study.md",
            caption="../report/study.rst",
            category="Report",
        ),
    log:
        "results/logs/report.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} report {params.study} --tables {input.tables} --figures {input.figures} "
        "--output {output} {input.indexes} > {log} 2>&1"


rule bundle:
    input:
        report="results/report/study.md",
        tables="results/tables",
        figures="results/figures",
        indexes=INDEXES,
        settings=STEP["bundle"]["settings"],
        code=STEP["bundle"]["code"],
        # The Snakemake HTML report, once `snakemake --report results/report/workflow.html` made it:
        # the bundle is packed again with it.
        workflow_report=workflow_report,
    output:
        directory(BUNDLE),
    log:
        "results/logs/bundle.log",
    params:
        cli=CLI,
        study=STUDY_ARGS,
    shell:
        "{params.cli} bundle {params.study} --output {output} --report {input.report} "
        "--tables {input.tables} --figures {input.figures} {input.indexes} > {log} 2>&1"
