"""The bundle's texts for a reader: README.md (what is where, how to verify, how to rerun) and
CITATION.cff."""

from __future__ import annotations

from typing import Any

import yaml

from rlvr_scaling import __version__
from rlvr_scaling.analysis.per_run.results_io import StudyResults

LAYOUT = (
    ("README.md, CITATION.cff", "this text; how to cite the measurements"),
    ("SHA256SUMS", "the sha256 of every other file (`sha256sum -c SHA256SUMS`)"),
    ("ro-crate-metadata.json", "machine-readable provenance (RO-Crate, Workflow Run Crate profile)"),
    ("provenance.json", "the pipeline's commit and whether its tree was clean; software versions; dates"),
    ("study/config.json, study/site.json", "the study's settings and the site's facts, as resolved for the runs"),
    ("pipeline/", "the workflow's Snakefile and rules at that commit"),
    (
        "results/runs/<run>/",
        "per run: spec.json (what was asked), command.sh (the exact command), "
        "job.json (where, when, in what image, how it ended), metrics.jsonl and console.log (verl's own output); "
        "metrics.after_stop.jsonl where the adaptive step count stopped the run (steps logged after the stop, "
        "not measured)",
    ),
    ("results/summaries/<run>.json", "per run: the figures computed from its metrics and the checks it passed"),
    ("results/selection/<dataset>.json", "the sweep's choice of workload, with its rule and every point"),
    ("results/index/<dataset>.json", "the runs of each dataset and the series they belong to"),
    ("results/tables/, results/figures/, results/report/", "the tables (CSV, Markdown, LaTeX), figures and report"),
    ("results/data/, results/models/", "the manifests of the datasets and the model (revisions, checksums)"),
    ("results/containers/", "the image's recipe and its build record (digests, packages inside)"),
    ("results/preflight/", "the site check made before the first run, where there was one"),
)


def _runs_table(results: StudyResults) -> list[str]:
    lines = ["| run | dataset | series | nodes | prompts | valid |", "|---|---|---|---|---|---|"]
    for run_id in sorted(results.summaries):
        s = results.summaries[run_id]
        lines.append(f"| `{run_id}` | {s.dataset} | {'+'.join(s.series)} | {s.nodes} | {s.prompts} | {s.valid} |")
    return lines


def readme_text(title: str, name: str, site: str, date: str, commit: str | None, results: StudyResults) -> str:
    checkout = f"git checkout {commit.removesuffix('-dirty')}" if commit else "git checkout <the commit>"
    lines = [
        f"# {title}",
        "",
        f"Bundle `{name}`: the measurements of the study on site `{site}`, last run ended on {date}, "
        f"and everything needed to check every number in its tables without the cluster. Made by "
        f"rlvr-scaling {__version__} at commit `{commit or 'unknown'}`.",
        "",
        "## What is where",
        "",
        "| path | what it holds |",
        "|---|---|",
        *[f"| {path} | {what} |" for path, what in LAYOUT],
        "",
        "## How to verify",
        "",
        "With the rlvr-scaling package installed (no cluster, no network):",
        "",
        "    rlvr-scaling verify " + name + ".tar.gz",
        "",
        "checks every checksum, then recomputes every run's summary from its metrics, every selection "
        "from the summaries and every table from them, and names any file, table, row and column that "
        "differs. Without it, `sha256sum -c SHA256SUMS` in the unpacked directory checks the files.",
        "",
        "## How to rerun",
        "",
        "One run, by hand, in its image on a node of the site: `bash results/runs/<run>/command.sh`. The whole study:",
        "",
        "    git clone <rlvr-scaling repository> && cd rlvr-scaling",
        f"    {checkout}",
        f"    snakemake --profile {site}    # or the site your cluster is described by",
        "",
        "`study/config.json` holds the settings these runs were made with.",
        "",
        "## Runs",
        "",
        *_runs_table(results),
    ]
    return "\n".join(lines) + "\n"


def _author(entry: dict[str, str]) -> dict[str, str]:
    return {key: entry[key] for key in ("name", "affiliation", "orcid") if key in entry}


def published_study(reference: dict[str, Any]) -> dict[str, Any]:
    """The published study the measurements reproduce, as a CFF reference: its publisher as author
    (the post names no person in the text on record), and its date and address where known."""
    citation = reference["citation"]
    entry: dict[str, Any] = {"type": "blog", "title": reference["title"], "authors": [{"name": citation["publisher"]}]}
    if citation.get("series"):
        entry["collection-title"] = citation["series"]
    if citation["published"]:
        entry["date-published"] = citation["published"]
    if citation["url"]:
        entry["url"] = citation["url"]
    missing = [what for what, key in (("date", "published"), ("address", "url")) if not citation[key]]
    if missing:
        entry["notes"] = f"The published study these measurements reproduce; its {' and '.join(missing)} not on record."
    return entry


def citation_text(
    config: Any,
    site: str,
    date: str,
    name: str,
    commit: str | None,
    verl: str | None,
    reference: dict[str, Any] | None = None,
) -> str:
    """CITATION.cff: the measurements, with the software and `reference` (the published study they
    reproduce, if any) among its references."""
    study = config.study
    authors = [_author(a) for a in study.authors] or [{"name": f"The authors of study {study.name}"}]
    software = {
        "type": "software",
        "title": "rlvr-scaling",
        "version": __version__,
        "authors": [{"name": "rlvr-scaling contributors"}],
    }
    if commit:
        software["commit"] = commit.removesuffix("-dirty")
    citation = {
        "cff-version": "1.2.0",
        "message": "If you use these measurements, please cite them as below.",
        "type": "dataset",
        "title": f"{study.title or study.name} (site {site}, measured until {date})",
        "version": name,
        "date-released": date,
        "authors": authors,
        "license": study.license,
        "keywords": ["reinforcement learning", "RLVR", "GRPO", "scaling", "HPC", "verl"],
        "references": [
            software,
            {
                "type": "software",
                "title": "verl",
                "version": verl or config.software.verl,
                "authors": [{"name": "verl contributors"}],
                "repository-code": "https://github.com/volcengine/verl",
            },
            *([published_study(reference)] if reference else []),
        ],
    }
    return yaml.safe_dump(citation, sort_keys=False, allow_unicode=True, width=100)
