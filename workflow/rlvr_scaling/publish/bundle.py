"""The publication bundle, `<study>-<site>-<date>.tar.gz` (the date the last run ended): the study's
records and results (bundle_contents), the resolved config and site, the pipeline's rules, commit and
versions, a README, CITATION.cff, RO-Crate metadata and SHA256SUMS. The same inputs give the same
bytes: `rlvr-scaling verify` checks it, offline (publish.verify)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from rlvr_scaling import __version__, paths
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.execution.provenance import git_commit, package_versions
from rlvr_scaling.fsutil import json_text
from rlvr_scaling.publish.archive import SUMS, sha256_sums, write_archive
from rlvr_scaling.publish.bundle_contents import (
    CONFIG_MEMBER,
    REFERENCE_MEMBER,
    SITE_MEMBER,
    redacted_members,
    study_files,
)
from rlvr_scaling.publish.bundle_readme import citation_text, readme_text
from rlvr_scaling.publish.crate import crate_metadata
from rlvr_scaling.study.config import Study


def measured_dates(results: StudyResults) -> tuple[str | None, str | None]:
    """When the first run started and the last ended (ISO times, UTC, as job.json records them)."""
    starts = sorted(s.provenance["start"] for s in results.summaries.values() if s.provenance.get("start"))
    ends = sorted(s.provenance["end"] for s in results.summaries.values() if s.provenance.get("end"))
    return (starts[0] if starts else None), (ends[-1] if ends else None)


def bundle_date(results: StudyResults) -> str:
    """The day the last run ended: a bundle made again from the same runs has the same name."""
    _, last_end = measured_dates(results)
    return last_end[:10] if last_end else "undated"


def bundle_name(study: Study, results: StudyResults) -> str:
    return f"{study.name}-{study.site_name}-{bundle_date(results)}"


def _epoch(date: str) -> int:
    """The archive's member times: the bundle's date, so that they say something and never change."""
    try:
        day = dt.date.fromisoformat(date)
    except ValueError:
        return 0
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp())


def _pipeline_members() -> dict[str, bytes]:
    files = [paths.REPO_ROOT / "Snakefile", *sorted((paths.REPO_ROOT / "rules").glob("*.smk"))]
    return {f"pipeline/{path.relative_to(paths.REPO_ROOT)}": path.read_bytes() for path in files}


def provenance_record(study: Study, results: StudyResults, commit: str | None) -> dict:
    first_start, last_end = measured_dates(results)
    return {
        "study": study.name,
        "site": study.site_name,
        "runs": len(results.summaries),
        "measured": {"first_start": first_start, "last_end": last_end},
        "pipeline": {
            "name": "rlvr-scaling",
            "version": __version__,
            "commit": commit.removesuffix("-dirty") if commit else None,
            "clean": None if commit is None else not commit.endswith("-dirty"),
        },
        # The runs' own records: what they were measured with, and the pipeline commits that ran them.
        "runs_measured_with": {name: recorded_values(results, "versions", name) for name in ("verl", "torch", "vllm")},
        "run_commits": sorted(
            {
                s.provenance["repository_commit"]
                for s in results.summaries.values()
                if s.provenance.get("repository_commit")
            }
        ),
        "bundled_with": package_versions(),
    }


def recorded_values(results: StudyResults, record: str, key: str) -> list[str]:
    """The distinct values the runs recorded (one, unless runs were measured with different ones)."""
    return sorted({str(v) for s in results.summaries.values() if (v := (s.provenance.get(record) or {}).get(key))})


def write_bundle(
    study: Study,
    root: Path,
    output_dir: Path,
    parts: tuple[Path, Path, Path],
    results: StudyResults,
    indexes: list[Path],
) -> Path:
    """`parts`: the report, the tables and the figures directories. Returns the archive's path."""
    name, date = bundle_name(study, results), bundle_date(results)
    commit = git_commit()
    records = {CONFIG_MEMBER: study.config.to_dict(), SITE_MEMBER: study.site.recorded()}
    if (reference := study.reference()) is not None:
        records[REFERENCE_MEMBER] = reference
    members = redacted_members(study_files(study, root, parts, results, indexes), root, records)
    provenance = provenance_record(study, results, commit)
    members["provenance.json"] = json_text(provenance).encode()
    members.update(_pipeline_members())
    title = study.config.study.title or study.name
    members["README.md"] = readme_text(title, name, study.site_name, date, commit, results).encode()
    verl = ", ".join(provenance["runs_measured_with"]["verl"]) or None
    cited = citation_text(study.config, study.site_name, date, name, commit, verl, reference)
    members["CITATION.cff"] = cited.encode()
    members["ro-crate-metadata.json"] = crate_metadata(
        sorted(members),
        title,
        date,
        results,
        verl,
        study.config.study.license,
        provenance["bundled_with"].get("snakemake"),
    )
    members[SUMS] = sha256_sums(members)
    archive = output_dir / f"{name}.tar.gz"
    write_archive(archive, name, members, _epoch(date))
    return archive
