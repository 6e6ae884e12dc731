"""The data stage: datasets in verl's parquet schema, with a manifest of row counts and checksums.

Synthetic data (the local site) is generated here; the real datasets are downloaded from the hub at
the configured revision (at the commit config/inputs.lock.json locks, once it does: inputs/input_lock)
and converted (GSM8K) or deduplicated and split (DAPO-Math-17K).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd

from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.fsutil import json_text, sha256_file, staged_directory
from rlvr_scaling.inputs import synthetic
from rlvr_scaling.inputs.input_lock import check_files, locked_entry, record
from rlvr_scaling.inputs.verl_rows import dapo_row, gsm8k_row
from rlvr_scaling.study.config import Study

SYNTHETIC_ROWS = {"train": 512, "val": 32}
DAPO_VAL_ROWS = 256
GSM8K_FILES = {"train": "main/train-00000-of-00001.parquet", "val": "main/test-00000-of-00001.parquet"}
DAPO_FILE = "data/dapo-math-17k.parquet"


def seed_of(revision: str) -> int:
    """Synthetic data is named by a revision like 'seed-0'; the seed makes it reproducible."""
    try:
        return int(revision.removeprefix("seed-"))
    except ValueError:
        raise ConfigError("datasets.<name>.revision", revision, "synthetic data needs a revision 'seed-N'") from None


def synthetic_frames(fmt: str, seed: int) -> dict[str, pd.DataFrame]:
    frames = {}
    offset = 0
    for split, count in SYNTHETIC_ROWS.items():
        rows = []
        if fmt == "gsm8k":
            items = list(synthetic.gsm8k_rows(seed, offset + count))[offset:]
            rows = [gsm8k_row(q, a, split, i) for i, (q, a, _) in enumerate(items)]
        else:
            items = list(synthetic.dapo_rows(seed, offset + count))[offset:]
            rows = [dapo_row(p, str(v), split, i) for i, (p, v) in enumerate(items)]
        frames[split] = pd.DataFrame(rows)
        offset += count
    return frames


def gsm8k_frames(upstream: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Upstream GSM8K (columns question, answer) -> verl rows; upstream 'test' is our 'val'."""
    frames = {}
    for split, frame in upstream.items():
        missing = {"question", "answer"} - set(frame.columns)
        if missing:
            raise ValueError(f"GSM8K {split} file lacks columns {sorted(missing)}")
        rows = [
            gsm8k_row(q, a, split, i) for i, (q, a) in enumerate(zip(frame["question"], frame["answer"], strict=True))
        ]
        frames[split] = pd.DataFrame(rows)
    return frames


def _prompt_text(prompt: Any) -> str:
    return "\n".join(str(message["content"]) for message in prompt)


def dapo_frames(upstream: pd.DataFrame, val_rows: int = DAPO_VAL_ROWS) -> dict[str, pd.DataFrame]:
    """DAPO-Math-17K repeats each of its 17k prompts many times: keep one of each, hold out a slice."""
    required = {"data_source", "prompt", "reward_model"}
    missing = required - set(upstream.columns)
    if missing:
        raise ValueError(f"DAPO-Math-17K file lacks columns {sorted(missing)}")
    text = upstream["prompt"].map(_prompt_text)
    unique = upstream.loc[~text.duplicated()].reset_index(drop=True)
    # A fixed hash order, not the file order, decides the held-out slice.
    order = sorted(
        range(len(unique)), key=lambda i: hashlib.sha256(_prompt_text(unique["prompt"][i]).encode()).digest()
    )
    val_rows = min(val_rows, max(1, len(unique) // 10))
    val_index, train_index = order[:val_rows], order[val_rows:]
    frames = {}
    for split, index in (("train", train_index), ("val", val_index)):
        part = unique.iloc[sorted(index)].reset_index(drop=True)
        rows = [
            {
                # The upstream rows are already in verl's schema: keep the prompt exactly as published.
                "data_source": part["data_source"][i],
                "prompt": [dict(message) for message in part["prompt"][i]],
                "ability": part["ability"][i] if "ability" in part else "MATH",
                "reward_model": {
                    "style": part["reward_model"][i].get("style", "rule-lighteval/MATH_v2"),
                    "ground_truth": str(part["reward_model"][i]["ground_truth"]),
                },
                "extra_info": {"split": split, "index": i},
            }
            for i in range(len(part))
        ]
        frames[split] = pd.DataFrame(rows)
    return frames


def _resolve_dataset(repo: str, revision: str) -> str:
    """The commit a branch (or tag, or commit) of a hub dataset names today."""
    from huggingface_hub import HfApi

    return HfApi().dataset_info(repo, revision=revision).sha


def _fetch_dataset_file(repo: str, filename: str, commit: str) -> Path:
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(repo, filename, repo_type="dataset", revision=commit))


def _download(spec: Any, filenames: list[str]) -> tuple[dict[str, Path], str, dict[str, str], bool]:
    """The upstream files at the locked commit (inputs/input_lock), or at the commit the revision
    names today for an input not locked yet; their digests checked against the lock."""
    entry = locked_entry("dataset", spec.source, spec.revision)
    commit = entry["commit"] if entry else _resolve_dataset(spec.source, spec.revision)
    fetched = {filename: _fetch_dataset_file(spec.source, filename, commit) for filename in filenames}
    digests = {filename: sha256_file(path) for filename, path in fetched.items()}
    if entry:
        check_files("dataset", spec.source, entry, digests)
    return fetched, commit, digests, entry is not None


def write_dataset(frames: dict[str, pd.DataFrame], output: Path, provenance: dict[str, Any]) -> dict[str, Any]:
    """Write train/val parquet and the manifest atomically: a failure leaves nothing half-written."""
    with staged_directory(output) as staging:
        files = {}
        for split in ("train", "val"):
            path = staging / f"{split}.parquet"
            frames[split].to_parquet(path, index=False)
            files[split] = {"file": path.name, "rows": len(frames[split]), "sha256": sha256_file(path)}
        manifest = {**provenance, "files": files}
        (staging / "manifest.json").write_text(json_text(manifest))
    return manifest


def prepare_dataset(study: Study, dataset: str, output: Path) -> dict[str, Any]:
    if dataset not in study.datasets:
        raise StudyError(f"unknown dataset {dataset!r}: the study has {', '.join(study.datasets)}")
    spec = study.dataset(dataset)
    fmt = spec.format
    provenance: dict[str, Any] = {"dataset": dataset, "format": fmt, "source": spec.source}
    if spec.source == "synthetic":
        seed = seed_of(spec.revision)
        frames = synthetic_frames(fmt, seed)
        provenance.update(revision=spec.revision, generator="rlvr_scaling.inputs.synthetic", seed=seed)
        return write_dataset(frames, output, provenance)
    filenames = list(GSM8K_FILES.values()) if fmt == "gsm8k" else [DAPO_FILE]
    fetched, commit, digests, was_locked = _download(spec, filenames)
    if fmt == "gsm8k":
        frames = gsm8k_frames({split: pd.read_parquet(fetched[name]) for split, name in GSM8K_FILES.items()})
        provenance.update(upstream_files=GSM8K_FILES)
    else:
        frames = dapo_frames(pd.read_parquet(fetched[DAPO_FILE]))
        provenance.update(upstream_files=[DAPO_FILE])
    provenance.update(revision=spec.revision, commit=commit, upstream_sha256=digests, locked=was_locked)
    manifest = write_dataset(frames, output, provenance)
    if not was_locked:  # after the dataset is written: a failed conversion locks nothing
        record("dataset", spec.source, spec.revision, commit, digests)
    return manifest
