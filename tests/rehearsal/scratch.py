"""The rehearsal's own clone: the workflow as it is (linked), its config/ a copy with LUMI's site file
and the published reference compressed (rehearsal.compress), a study file naming the stand-in inputs
made on the spot (no hub), the timings file the stand-in trainer steps at, and a profile layered on
`lumi`'s that polls Slurm on the compressed clock."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.rehearsal import compress

REPO = Path(__file__).resolve().parents[2]
LINKED = ("rules", "profiles", "report", "workflow", "lumi", "tests", "containers", "envs", "docs")
QWEN3_8B_CONFIG = REPO / "config" / "models" / "Qwen__Qwen3-8B.json"
# Rows enough for the largest step of each dataset: GSM8K's weak 16-node run takes 100 x 16 prompts;
# DAPO's 10 x 16 after its 256 held-out prompts.
ROWS = {"gsm8k": {"train": 1700, "val": 64}, "dapo_math": {"train": 640}}


@dataclass(frozen=True)
class Scratch:
    root: Path
    factor: float

    @property
    def study_file(self) -> Path:
        return self.root / "rehearsal.yaml"

    @property
    def timings_file(self) -> Path:
        return self.root / "rehearsal-timings.json"

    @property
    def profile(self) -> Path:
        return self.root / "rehearsal-profile"


def _read(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _write(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=120))


def _datasets(inputs: Path) -> dict[str, Any]:
    """GSM8K- and DAPO-shaped files as the hub serves them (inputs/synthetic.py's problems), and the
    overrides that point the study's datasets at them."""
    import pandas as pd
    from rlvr_scaling.inputs import synthetic

    gsm8k = list(synthetic.gsm8k_rows(7, sum(ROWS["gsm8k"].values())))
    train, val = gsm8k[: ROWS["gsm8k"]["train"]], gsm8k[ROWS["gsm8k"]["train"] :]
    folder = inputs / "gsm8k" / "main"
    folder.mkdir(parents=True)
    for name, items in (("train", train), ("test", val)):
        rows = [{"question": q, "answer": a} for q, a, _ in items]
        pd.DataFrame(rows).to_parquet(folder / f"{name}-00000-of-00001.parquet")
    dapo = [
        {
            "data_source": "math_dapo",
            "prompt": [{"role": "user", "content": f"{synthetic.DAPO_PREFIX}{p}{synthetic.DAPO_SUFFIX}"}],
            "ability": "MATH",
            "reward_model": {"ground_truth": str(v), "style": "rule-lighteval/MATH_v2"},
        }
        for p, v in synthetic.dapo_rows(7, ROWS["dapo_math"]["train"])
    ]
    (inputs / "dapo" / "data").mkdir(parents=True)
    pd.DataFrame(dapo).to_parquet(inputs / "dapo" / "data" / "dapo-math-17k.parquet")
    return {"gsm8k": str(inputs / "gsm8k"), "dapo_math": str(inputs / "dapo")}


def _model(inputs: Path) -> str:
    """A tiny model's files with Qwen3-8B's config.json (the study's shape: its memory budget and MFU
    are counted from it); the stand-in never loads the weights."""
    from rlvr_scaling.inputs.model import build_tiny_model

    folder = inputs / "model"
    folder.mkdir(parents=True)
    build_tiny_model(1024, 0, folder)
    shutil.copyfile(QWEN3_8B_CONFIG, folder / "config.json")
    return str(folder)


def make(
    root: Path, factor: float, timings: dict[str, Any], adaptive: bool = False, only: str | None = None
) -> Scratch:
    """The rehearsal's clone under `root` (empty or missing)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        (root / name).symlink_to(REPO / name)
    # A copy, not a link: the repository is the nearest folder holding the Snakefile (rlvr_scaling.paths).
    shutil.copyfile(REPO / "Snakefile", root / "Snakefile")
    shutil.copytree(REPO / "config", root / "config", ignore=shutil.ignore_patterns("inputs.lock.json"))
    sites = root / "config" / "sites"
    _write(sites / "lumi.yaml", compress.site(_read(sites / "lumi.yaml"), factor))
    references = root / "config" / "references"
    reference = _read(references / "lumi-rlvr-blog.yaml")
    _write(references / "lumi-rlvr-blog.yaml", compress.reference(reference, factor))
    inputs = root / "rehearsal-inputs"
    # The study itself (its copy): its inputs the stand-ins (a local source has no revision: the lock
    # holds its files' checksums), every duration compressed, the adaptive step count on or off.
    config = _read(root / "config" / "config.yaml")
    for name, source in _datasets(inputs).items():
        config["datasets"][name]["source"] = source
        config["datasets"][name].pop("revision", None)
    config["model"].update(source="local", path=_model(inputs))
    config["model"].pop("revision", None)
    config["adaptive_steps"]["enabled"] = adaptive
    config["only_datasets"] = [only] if only else None
    _write(root / "config" / "config.yaml", config)
    scratch = Scratch(root, factor)
    _write(scratch.study_file, {"site": "lumi", "overrides": compress.study_overrides(config, factor)})
    scratch.timings_file.write_text(json.dumps({"compression": factor, **timings}, indent=1))
    _write(
        scratch.profile / "config.yaml",
        {
            # Snakemake's own polling, on the compressed clock (tests/slurm/snakemake_steady_polling.py
            # keeps it steady: the executor plugin backs off up to 180 s on its own).
            "seconds-between-status-checks": 1,
            "slurm-init-seconds-before-status-checks": 1,
            "latency-wait": 5,
        },
    )
    return scratch
