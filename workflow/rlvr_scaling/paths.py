"""Where the repository's fixed parts live (config, schemas, sites) and where results go.

They are the working directory's repository's: the nearest folder at or above it that holds a
Snakefile and rules/ (a clone; a folder linking them, as the tests' working directories do, stands
for the repository they link to). One
workflow environment thus serves every clone of a lab, each with its own config/ and sites. Outside any
such folder (`rlvr-scaling verify` of a bundle, `metrics` of a log), the repository the package was
installed from.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# The package is installed editable from workflow/; its repository is two levels up.
PACKAGE_REPO = PACKAGE_DIR.parents[1]


def find_repository(start: Path) -> Path | None:
    """The nearest folder at or above `start` holding a Snakefile and rules/: a workflow's clone. A
    folder that links them (a test's working directory) stands for the repository its Snakefile is in."""
    for folder in (start, *start.parents):
        if (folder / "Snakefile").is_file() and (folder / "rules").is_dir():
            return (folder / "Snakefile").resolve().parent
    return None


def _working_repository() -> Path:
    try:
        return find_repository(Path.cwd()) or PACKAGE_REPO
    except OSError:  # the working directory was removed
        return PACKAGE_REPO


REPO_ROOT = _working_repository()
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


def missing_parts() -> str | None:
    """Why the working directory's repository cannot give a study (no config/, sites or schemas), or None."""
    for needed in (DEFAULT_CONFIG, SITES_DIR, CONFIG_SCHEMA, SITE_SCHEMA):
        if not needed.exists():
            return (
                f"{needed} is missing: run from a clone of the rlvr-scaling repository (its config/ with the "
                "study, config/sites/ and config/schema/), or restore it from git"
            )
    return None


def results_dir(root: Path) -> Path:
    return root / "results"


def run_dir(root: Path, run_id: str) -> Path:
    return results_dir(root) / "runs" / run_id


def dataset_dir(root: Path, site: str, dataset: str) -> Path:
    # Per site: the local site's generated data must never be mistaken for the real datasets.
    return results_dir(root) / "data" / site / dataset


def model_dir(root: Path, site: str, folder: str) -> Path:
    """A model's folder: one per model of the site (study.config.Study.model_folder), so another study's
    model never replaces it and going back to it finds it there."""
    return results_dir(root) / "models" / site / folder


def selection_file(root: Path, dataset: str) -> Path:
    return results_dir(root) / "selection" / f"{dataset}.json"


# What a dataset, site or run may be called: it names directories and Snakemake wildcards.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_plain_name(name: str) -> bool:
    return bool(PLAIN_NAME.fullmatch(name))
