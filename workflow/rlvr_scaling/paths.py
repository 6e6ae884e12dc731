"""Where the repository's fixed parts live (config, schemas, sites) and where results go."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# The package is installed editable from workflow/; the repository is two levels up.
REPO_ROOT = PACKAGE_DIR.parents[1]
CONFIG_DIR = REPO_ROOT / "config"
SCHEMA_DIR = CONFIG_DIR / "schema"
SITES_DIR = CONFIG_DIR / "sites"
DEFAULT_CONFIG = CONFIG_DIR / "config.yaml"
CONFIG_SCHEMA = SCHEMA_DIR / "config.schema.yaml"
SITE_SCHEMA = SCHEMA_DIR / "site.schema.yaml"
# What a working directory must see of the repository to run the workflow with its own results/
# (tests and benchmarks link these into a temporary directory).
WORKFLOW_PARTS = ("Snakefile", "rules", "config", "profiles", "report")


def link_workflow(workdir: Path) -> Path:
    for name in WORKFLOW_PARTS:
        (workdir / name).symlink_to(REPO_ROOT / name)
    return workdir


def results_dir(root: Path) -> Path:
    return root / "results"


def run_dir(root: Path, run_id: str) -> Path:
    return results_dir(root) / "runs" / run_id


def dataset_dir(root: Path, site: str, dataset: str) -> Path:
    # Per site: the local site's generated data must never be mistaken for the real datasets.
    return results_dir(root) / "data" / site / dataset


def model_dir(root: Path, site: str) -> Path:
    return results_dir(root) / "models" / site


def selection_file(root: Path, dataset: str) -> Path:
    return results_dir(root) / "selection" / f"{dataset}.json"


# What a dataset, site or run may be called: it names directories and Snakemake wildcards.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_plain_name(name: str) -> bool:
    return bool(PLAIN_NAME.fullmatch(name))
