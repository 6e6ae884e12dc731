"""The data stage: a dataset in verl's parquet schema, with a manifest of row counts and checksums.

What a dataset is comes from its entry in the study config (docs/own-study.md): its rows are read
from a hub repository at the configured revision (at the commit config/inputs.lock.json locks, once
it does: inputs/input_lock), from local files (their checksums locked the same way), or generated
(the local site's synthetic data); then built into verl's rows by the entry's fields, answer rule,
prompt and reward (inputs/rows). A reward file of the user's is copied beside the rows, and its
checksum recorded in the manifest: the runs load that copy.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.fsutil import json_text, sha256_file, staged_directory
from rlvr_scaling.inputs import synthetic
from rlvr_scaling.inputs.hub import answered_commit, hub_call
from rlvr_scaling.inputs.input_lock import LOCAL_REVISION, check_files, locked_entry, record
from rlvr_scaling.inputs.reward_file import REWARD_COPY, reward_path
from rlvr_scaling.inputs.rows import PreparedRow, prepared_rows
from rlvr_scaling.inputs.self_check import REFERENCES, check_rows, reference_lines
from rlvr_scaling.inputs.sources import is_glob, local_root, local_split_files, matching, read_records
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.sections import Dataset


def seed_of(revision: str) -> int:
    """Synthetic data is named by a revision like 'seed-0'; the seed makes it reproducible."""
    try:
        return int(revision.removeprefix("seed-"))
    except ValueError:
        raise ConfigError("datasets.<name>.revision", revision, "synthetic data needs a revision 'seed-N'") from None


def _resolve_dataset(repo: str, revision: str) -> str:
    """The commit a branch (or tag, or commit) of a hub dataset names today."""
    from huggingface_hub import HfApi

    return answered_commit("dataset", repo, revision, HfApi().dataset_info(repo, revision=revision).sha)


def _list_dataset_files(repo: str, commit: str) -> list[str]:
    from huggingface_hub import HfApi

    return HfApi().list_repo_files(repo, repo_type="dataset", revision=commit)


def _fetch_dataset_file(repo: str, filename: str, commit: str) -> Path:
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(repo, filename, repo_type="dataset", revision=commit))


def _hub_split_names(name: str, spec: Dataset, commit: str, entry: dict[str, Any] | None) -> dict[str, list[str]]:
    """Per split, the repository's files its name or glob selects (a locked input: among the locked
    files, without asking the hub)."""
    patterns = {split: getattr(spec.files, split) for split in ("train", "val") if getattr(spec.files, split)}
    names: list[str] | None = None
    if any(is_glob(pattern) for pattern in patterns.values()):
        names = sorted(entry["files"]) if entry else _hub(name, spec, lambda: _list_dataset_files(spec.source, commit))
    found = {}
    for split, pattern in patterns.items():
        selected = matching(names, pattern) if names is not None else [pattern]
        if not selected:
            raise StudyError(f"datasets.{name}.files.{split}: {pattern!r} selects no file of {spec.source} at {commit}")
        found[split] = selected
    return found


def _hub(name: str, spec: Dataset, call: Any) -> Any:
    return hub_call("dataset", f"datasets.{name}", spec.source, str(spec.revision), call)


def _hub_records(name: str, spec: Dataset) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any], bool]:
    """The upstream files at the locked commit, or at the commit the revision names today for an input
    not locked yet; their digests checked against the lock."""
    entry = locked_entry("dataset", spec.source, str(spec.revision))
    commit = entry["commit"] if entry else _hub(name, spec, lambda: _resolve_dataset(spec.source, str(spec.revision)))
    split_names = _hub_split_names(name, spec, commit, entry)
    fetched = {
        filename: _hub(name, spec, lambda filename=filename: _fetch_dataset_file(spec.source, filename, commit))
        for filenames in split_names.values()
        for filename in filenames
    }
    digests = {filename: sha256_file(path) for filename, path in fetched.items()}
    if entry:
        check_files("dataset", spec.source, entry, digests)
    splits = {
        split: [row for f in filenames for row in read_records(fetched[f])] for split, filenames in split_names.items()
    }
    upstream = {split: filenames if len(filenames) > 1 else filenames[0] for split, filenames in split_names.items()}
    provenance = {
        "revision": spec.revision,
        "commit": commit,
        "upstream_files": upstream,
        "upstream_sha256": digests,
        "locked": entry is not None,
    }
    return splits, provenance, entry is None


def _local_records(name: str, spec: Dataset) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any], bool]:
    """The local files, their digests checked against the lock once it holds them."""
    root = local_root(spec)
    split_files = local_split_files(name, spec)
    base = root.parent if root.is_file() else root
    names = {
        split: [str(path.relative_to(base)) if path.is_relative_to(base) else str(path) for path in files]
        for split, files in split_files.items()
    }
    paths = {n: p for split in split_files for n, p in zip(names[split], split_files[split], strict=True)}
    digests = {n: sha256_file(p) for n, p in paths.items()}
    entry = locked_entry("dataset", spec.source, LOCAL_REVISION)
    if entry:
        check_files("dataset", spec.source, entry, digests)
    splits = {split: [row for n in names[split] for row in read_records(paths[n])] for split in split_files}
    upstream = {split: files if len(files) > 1 else files[0] for split, files in names.items()}
    provenance = {
        "path": str(root),
        "upstream_files": upstream,
        "upstream_sha256": digests,
        "locked": entry is not None,
    }
    return splits, provenance, entry is None


def write_dataset(
    frames: dict[str, Any],
    output: Path,
    provenance: dict[str, Any],
    reward_file: Path | None = None,
    references: str | None = None,
) -> dict[str, Any]:
    """Write train/val parquet, the reward file's copy, the reference solutions a self-check that did
    not run here leaves to the preflight, and the manifest atomically: a failure leaves nothing
    half-written."""
    with staged_directory(output) as staging:
        if references is not None:
            (staging / REFERENCES).write_text(references)
            provenance["self_check"]["references"] = REFERENCES
        files = {}
        for split in ("train", "val"):
            path = staging / f"{split}.parquet"
            frames[split].to_parquet(path, index=False)
            files[split] = {"file": path.name, "rows": len(frames[split]), "sha256": sha256_file(path)}
        if reward_file is not None:
            shutil.copyfile(reward_file, staging / REWARD_COPY)
            provenance["reward"]["sha256"] = sha256_file(staging / REWARD_COPY)
        manifest = {**provenance, "files": files}
        (staging / "manifest.json").write_text(json_text(manifest))
    return manifest


def _reward_provenance(name: str, spec: Dataset) -> tuple[dict[str, Any], Path | None]:
    reward = spec.reward
    if not reward.custom:
        return {"data_source": spec.data_source(name), "scorer": "verl.utils.reward_score.default_compute_score"}, None
    path = reward_path(spec)
    if reward.sha256 is not None and path.is_file() and sha256_file(path) != reward.sha256:
        raise StudyError(
            f"datasets.{name}.reward.file: {path} has sha256 {sha256_file(path)}, the study was loaded with "
            f"{reward.sha256}: it changed since; start the workflow again (a changed reward names other runs)"
        )
    return {
        "data_source": spec.data_source(name),
        "file": reward.file,
        "function": reward.function,
        "copy": REWARD_COPY,
    }, path


@dataclass(frozen=True)
class LoadedDataset:
    """A dataset's rows built in memory, before anything is written."""

    spec: Dataset
    rows: dict[str, list[PreparedRow]]
    provenance: dict[str, Any]
    lock_after: bool  # an input the lock does not hold yet: record it once the dataset is written
    reward_file: Path | None

    def all_rows(self) -> list[PreparedRow]:
        return [row for split in ("train", "val") for row in self.rows[split]]


def load_dataset(study: Study, dataset: str) -> LoadedDataset:
    """The dataset's rows from its source (downloaded, read or generated), as the data stage builds them."""
    if dataset not in study.datasets:
        raise StudyError(f"unknown dataset {dataset!r}: the study has {', '.join(study.datasets)}")
    spec = study.dataset(dataset)
    reward, reward_file = _reward_provenance(dataset, spec)
    provenance: dict[str, Any] = {
        "dataset": dataset,
        "source": spec.source,
        "kind": spec.kind,
        "settings": spec.build_settings(),
        "reward": reward,
    }
    lock_after = False
    if spec.kind == "synthetic":
        seed = seed_of(str(spec.revision))
        splits = synthetic.records(str(spec.generator), seed)
        provenance.update(revision=spec.revision, generator="rlvr_scaling.inputs.synthetic", seed=seed)
        # The generator made both splits: nothing to deduplicate or hold out.
        spec = Dataset.from_dict({**spec.to_dict(), "deduplicate": False})
    elif spec.kind == "local":
        splits, found, lock_after = _local_records(dataset, spec)
        provenance.update(found)
    else:
        splits, found, lock_after = _hub_records(dataset, spec)
        provenance.update(found)
    rows = prepared_rows(dataset, spec, splits)
    return LoadedDataset(study.dataset(dataset), rows, provenance, lock_after, reward_file)


def prepare_dataset(study: Study, dataset: str, output: Path) -> dict[str, Any]:
    """The data stage: rows built, the reward's self-check passed (inputs.self_check: a failure writes
    nothing), then the files and the manifest written, then the input locked."""
    loaded = load_dataset(study, dataset)
    provenance = loaded.provenance
    provenance["self_check"] = check_rows(dataset, loaded.spec, loaded.all_rows(), loaded.reward_file)
    import pandas as pd

    frames = {split: pd.DataFrame([p.row for p in rows]) for split, rows in loaded.rows.items()}
    # Not scored here (verl is in the image, not this environment): the preflight scores them there.
    references = None if provenance["self_check"]["ran"] else reference_lines(loaded.spec, loaded.all_rows())
    manifest = write_dataset(frames, output, provenance, loaded.reward_file, references)
    if loaded.lock_after:  # after the dataset is written: a failed conversion locks nothing
        spec = loaded.spec
        revision = LOCAL_REVISION if spec.kind == "local" else str(spec.revision)
        commit = provenance.get("commit", LOCAL_REVISION)
        record("dataset", spec.source, revision, commit, provenance["upstream_sha256"])
    return manifest
