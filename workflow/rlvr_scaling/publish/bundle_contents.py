"""What a publication bundle takes from the study's results: every file a reader needs to check a
number (run records, logs, summaries, selections, indexes, tables, figures, the report) and to know
what was measured with what (data and model manifests, the image's recipe and record, the preflight),
named as they are under the study's root, with secrets redacted."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.execution.step_clock import AFTER_STOP
from rlvr_scaling.fsutil import json_text, relative_to_root
from rlvr_scaling.inputs.container import recipe_path, record_path
from rlvr_scaling.secrets import redact_record, scrub_text, secret_values_of_environment
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.verl_args import REWARD_COPY

# The published study's numbers the verdict is made against (only when the study names one).
REFERENCE_MEMBER = "study/reference.json"
CONFIG_MEMBER = "study/config.json"
# The site as the runs saw it; verify reads the BF16 peak the MFU was counted with from it.
SITE_MEMBER = "study/site.json"

RUN_FILES = (
    "spec.json",
    "command.sh",
    "job.json",
    "metrics.jsonl",
    "console.log",
    # What verl logged after the adaptive step count stopped it: not measured.
    AFTER_STOP,
    # Hydra's own record of the config verl resolved.
    "hydra/.hydra/config.yaml",
    "hydra/.hydra/overrides.yaml",
)
TEXT_SUFFIXES = (".json", ".jsonl", ".log", ".sh", ".yaml", ".md", ".csv", ".tex", ".def", ".txt", ".html")
# The Snakemake HTML report (`snakemake --report`), bundled when it has been made.
WORKFLOW_REPORT = "workflow.html"


def run_files(root: Path, run_ids: Iterable[str]) -> list[Path]:
    files = []
    for run_id in run_ids:
        run_dir = paths.run_dir(root, run_id)
        files += [run_dir / name for name in RUN_FILES if (run_dir / name).exists()]
    return files


def input_records(study: Study, root: Path) -> list[Path]:
    """The manifests of the data and the model, a dataset's own reward file (the copy its runs loaded,
    whose sha256 the manifest and the bundled config name), the image's recipe and build record, the
    preflight."""
    site = study.site_name
    files = [paths.dataset_dir(root, site, dataset) / "manifest.json" for dataset in study.datasets]
    files += [paths.dataset_dir(root, site, dataset) / REWARD_COPY for dataset in study.datasets]
    files.append(paths.model_dir(root, site, study.model_folder) / "rlvr_manifest.json")
    if study.site.container is not None:
        files += [recipe_path(study, root), record_path(study, root)]
    files.append(paths.results_dir(root) / "preflight" / f"{site}.json")
    return [path for path in files if path.exists()]


def study_files(
    study: Study, root: Path, parts: tuple[Path, Path, Path], results: StudyResults, indexes: list[Path]
) -> list[Path]:
    report, tables, figures = parts
    # Not the marker files Snakemake leaves in directory outputs (.snakemake_timestamp).
    made = [p for d in (tables, figures) for p in sorted(d.iterdir()) if not p.name.startswith(".")]
    files = [report, *made, *indexes]
    if (report.parent / WORKFLOW_REPORT).exists():
        files.append(report.parent / WORKFLOW_REPORT)
    for index in results.indexes:
        selection = paths.selection_file(root, index.dataset)
        if selection.exists():
            files.append(selection)
        files += [root / run.summary for run in index.runs]
        files += run_files(root, [run.run_id for run in index.runs])
    return files + input_records(study, root)


def redacted_members(files: list[Path], root: Path, records: dict[str, Any]) -> dict[str, bytes]:
    """Each file under its name from the study's root, and each of `records` (name: JSON value). A
    JSON record's secret-like values are replaced, and those values, with this process's secret-like
    variables, are scrubbed from every text; a record without any keeps its bytes."""
    found: set[str] = set()
    members = {name: json_text(redact_record(record, found)).encode() for name, record in records.items()}
    texts: dict[str, str] = {}
    for path in files:
        name = relative_to_root(path, root)
        data = path.read_bytes()
        if path.suffix == ".json":
            record = json.loads(data)
            redacted = redact_record(record, found)
            members[name] = data if redacted == record else json_text(redacted).encode()
        elif path.suffix in TEXT_SUFFIXES:
            texts[name] = data.decode("utf-8", errors="surrogateescape")
        else:
            members[name] = data
    secrets = found | secret_values_of_environment()
    for name, text in texts.items():
        members[name] = scrub_text(text, secrets).encode("utf-8", errors="surrogateescape")
    return members
