"""The publication bundle: report, tables, figures, run summaries and every run's own record,
with a manifest of sha256 checksums so a reader can verify what they received."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.analysis.results_io import StudyResults
from rlvr_scaling.fsutil import json_text, relative_to_root

RUN_FILES = ("spec.json", "command.sh", "job.json", "metrics.jsonl")


def _files(
    root: Path, report: Path, tables: Path, figures: Path, results: StudyResults, indexes: list[Path]
) -> list[Path]:
    files = [report, *sorted(tables.iterdir()), *sorted(figures.iterdir()), *indexes]
    for index in results.indexes:
        selection = paths.selection_file(root, index.dataset)
        if selection.exists():
            files.append(selection)
        for run in index.runs:
            files.append(root / run.summary)
            run_dir = paths.run_dir(root, run.run_id)
            files += [run_dir / name for name in RUN_FILES if (run_dir / name).exists()]
    return files


def write_bundle(
    root: Path,
    output: Path,
    report: Path,
    tables: Path,
    figures: Path,
    results: StudyResults,
    indexes: list[Path],
    config: dict,
) -> int:
    """Members are named relative to `root` (results/...), whatever directory the bundle is made from."""
    files = _files(root, report, tables, figures, results, indexes)
    names = {path: relative_to_root(path, root) for path in files}
    manifest = {names[f]: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_suffix(".partial")
    with tarfile.open(tmp, "w:gz") as archive:
        for path in files:
            archive.add(path, arcname=names[path])
        for name, payload in (("MANIFEST.json", manifest), ("study-config.json", config)):
            data = json_text(payload).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    tmp.replace(output)
    return len(files)
