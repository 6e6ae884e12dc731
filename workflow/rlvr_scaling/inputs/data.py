"""The data stage: datasets in verl's parquet schema, with a manifest of row counts and checksums.

Synthetic data (the local site) is generated here; the real datasets are downloaded from the hub at
the configured revision and converted (GSM8K) or deduplicated and split (DAPO-Math-17K).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pandas as pd

from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.fsutil import json_text, sha256_file, staged_directory
from rlvr_scaling.inputs import synthetic
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


def _hub_download(repo: str, filename: str, revision: str) -> tuple[Path, str]:
    from huggingface_hub import HfApi, hf_hub_download

    commit = HfApi().dataset_info(repo, revision=revision).sha
    path = hf_hub_download(repo, filename, repo_type="dataset", revision=commit)
    return Path(path), commit


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
    elif fmt == "gsm8k":
        upstream, commit = {}, None
        for split, filename in GSM8K_FILES.items():
            path, commit = _hub_download(spec.source, filename, spec.revision)
            upstream[split] = pd.read_parquet(path)
        frames = gsm8k_frames(upstream)
        provenance.update(revision=spec.revision, commit=commit, upstream_files=GSM8K_FILES)
    else:
        path, commit = _hub_download(spec.source, DAPO_FILE, spec.revision)
        frames = dapo_frames(pd.read_parquet(path))
        provenance.update(revision=spec.revision, commit=commit, upstream_files=[DAPO_FILE])
    return write_dataset(frames, output, provenance)
