"""The reward's self-check where the data stage could not run it: inside the engine image, by the
preflight, before any run.

A cluster's workflow environment has no verl (envs/workflow.txt), so the data stage cannot load
verl's built-in scorers; it records `"ran": false` and leaves each row's reference solution and ground
truth beside the rows (inputs.self_check.REFERENCES). The preflight's probe scores them with the
image's verl (or the dataset's reward copy) and the preflight judges the share as the data stage
would have: below `self_check.min_share` it is a problem, and no run is submitted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.inputs.reward_file import REWARD_COPY
from rlvr_scaling.inputs.self_check import REFERENCES, failure
from rlvr_scaling.study.config import Study


def reward_requests(study: Study, root: Path) -> list[dict[str, Any]]:
    """For each dataset whose data stage left its self-check to the preflight: what the probe scores."""
    requests = []
    for name in study.datasets:
        folder = paths.dataset_dir(root, study.site_name, name)
        manifest_path = folder / "manifest.json"
        if not manifest_path.is_file():
            continue
        check = json.loads(manifest_path.read_text()).get("self_check") or {}
        if check.get("ran", True) or not (folder / REFERENCES).is_file():
            continue
        spec = study.dataset(name)
        requests.append(
            {
                "dataset": name,
                "data_source": spec.data_source(name),
                "references": str((folder / REFERENCES).resolve()),
                "reward_file": str((folder / REWARD_COPY).resolve()) if spec.reward.custom else None,
                "function": spec.reward.function,
                "full_score": spec.self_check.full_score,
            }
        )
    return requests


def reward_problems(study: Study, scored: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The probe's scores as the data stage's record, and a problem per dataset below its threshold."""
    record, problems = {}, []
    for name, found in scored.items():
        if "error" in found:
            record[name] = found
            problems.append(f"datasets.{name}: the reward's self-check could not run in the image: {found['error']}")
            continue
        spec = study.dataset(name)
        rows = found["rows"]
        check = {
            "ran": True,
            "where": "the preflight, in the engine's Python",
            "scorer": found["scorer"],
            "solution": spec.self_check.solution,
            "rows": rows,
            "full_score": spec.self_check.full_score,
            "passing": found["passing"],
            "share": found["passing"] / rows if rows else 0.0,
            "min_share": spec.self_check.min_share,
            "failing": found["failing"],
        }
        record[name] = check
        problem = failure(name, check)
        if problem:
            problems.append(problem)
    return record, problems
