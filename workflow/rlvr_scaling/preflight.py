"""The preflight: one short job on the target site that proves the engine stack before any run.

It runs where the runs will run (a Slurm job on the site's partition, inside the site's image) and
records in results/preflight/<site>.json: the image's digest and labels, the versions of Python, Ray,
verl, torch, vLLM and Megatron inside it, every module the configured engines import, the GPUs visible,
the run environment as the processes see it (expanded), every planned run's verl arguments composed and
checked by verl's own config validation inside the image, the dataset and model manifests, the Slurm
account and partition that accepted the job, and, for a study with multi-node runs, a two-node Ray
cluster started in the image and joined by the real probe. Every problem found is listed; any problem
stops the workflow before a run is submitted.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

from . import paths
from .config import Study
from .container import python_command, record_path
from .errors import StudyError
from .plan import Run
from .process_cleanup import TOKEN_VAR, end_processes
from .run_environment import expanded_environment

PROBE = Path(__file__).with_name("preflight_probe.py")


def engine_modules(study: Study) -> list[str]:
    """What the configured engines import in the run's processes."""
    names = ["ray", "verl", "torch", "transformers", "hydra", "tensordict", "verl.trainer.main_ppo"]
    rollout = study.config["parallel"]["rollout"]["engine"]
    names += {"vllm": ["vllm"], "sglang": ["sglang"], "hf": []}[rollout]
    if study.config["parallel"]["training"]["engine"] == "megatron":
        # verl 0.9.1's Megatron workers build models through Megatron-Bridge (use_mbridge, not vanilla).
        names += ["megatron.core", "megatron.bridge"]
    if study.site["engine"] == "verl-cpu":
        names.append("rlvr_scaling.cpu_engine")
    return names


def multi_node(plan: list[Run]) -> bool:
    return any(run.nodes > 1 for run in plan)


def preflight_nodes(study: Study, plan: list[Run]) -> int:
    """Two nodes where the study has multi-node runs on a Slurm site: Ray must form across nodes."""
    return 2 if study.site["launch"]["kind"] == "ray-srun" and multi_node(plan) else 1


def _probe(study: Study, root: Path, runs: list[Run], env: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    request = {
        "modules": engine_modules(study),
        "environment": sorted(expanded_environment(study, env)),
        "runs": [{"run_id": run.run_id, "verl_args": run.verl_args} for run in runs if run.verl_args],
    }
    # In results/: on a container site the image sees it there (the results tree is bound in).
    paths.results_dir(root).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=paths.results_dir(root), delete=False) as handle:
        json.dump(request, handle)
    try:
        # The probe's source, not a module path: the image need not hold this package.
        command = [*python_command(study, root), "-c", PROBE.read_text(), handle.name]
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    finally:
        os.unlink(handle.name)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        return {}, [f"the engine's Python could not run the checks (exit {result.returncode}): {result.stderr[-1500:]}"]
    return json.loads(lines[-1]), []


def _image(study: Study, root: Path) -> tuple[dict[str, Any] | None, list[str]]:
    if not study.site["container"]:
        return None, []
    record = record_path(study, root)
    if not record.exists():
        return None, [f"the image's build record {record} is missing (build the image first)"]
    facts = json.loads(record.read_text())
    image = Path(facts["image"]["path"])
    problems = []
    if not image.exists():
        problems.append(f"the image {image} is missing")
    elif image.stat().st_size != facts["image"]["bytes"]:
        problems.append(f"the image {image} is not the one its record describes (size differs): rebuild it")
    return {k: facts[k] for k in ("image", "base_image", "labels")}, problems


def _inputs(study: Study, root: Path) -> tuple[dict[str, Any], list[str]]:
    found: dict[str, Any] = {}
    problems = []
    for dataset in study.datasets:
        manifest = paths.dataset_dir(root, study.site_name, dataset) / "manifest.json"
        found[dataset] = str(manifest) if manifest.exists() else None
        if not manifest.exists():
            problems.append(f"dataset {dataset}: {manifest} is missing")
    model = paths.model_dir(root, study.site_name) / "config.json"
    found["model"] = str(model) if model.exists() else None
    if not model.exists():
        problems.append(f"model: {model} is missing")
    return found, problems


def _two_node_ray(study: Study, root: Path, env: dict[str, str], log_dir: Path) -> tuple[dict[str, Any], list[str]]:
    from .launch import start_ray_cluster

    job: dict[str, Any] = {}
    try:
        cluster = start_ray_cluster(study, 2, study.site["hardware"]["gpus_per_node"], root, log_dir, dict(env), job)
    except StudyError as exc:
        return {"formed": False, **job}, [f"a two-node Ray cluster in the image did not form: {exc}"]
    cluster.stop()
    return {"formed": True, **job}, []


def check(study: Study, plan: list[Run], root: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run every check; the record lists each problem (empty: ready to run)."""
    # Its processes carry a token as a run's do: none outlives the preflight.
    token = uuid.uuid4().hex
    env = {**(os.environ if env is None else env), TOKEN_VAR: token}
    try:
        return _check(study, plan, root, env)
    finally:
        end_processes(token)


def _check(study: Study, plan: list[Run], root: Path, env: dict[str, str]) -> dict[str, Any]:
    problems: list[str] = []
    image, found = _image(study, root)
    problems += found
    inputs, found = _inputs(study, root)
    problems += found
    try:
        run_env = {**env, **expanded_environment(study, env)}
    except StudyError as exc:
        run_env, problems = env, [*problems, str(exc)]
    engine: dict[str, Any] = {}
    image_ready = not study.site["container"] or (image is not None and not any("image" in p for p in problems))
    if image_ready:
        engine, found = _probe(study, root, plan, run_env)
        problems += found
    for module, outcome in engine.get("modules", {}).items():
        if outcome != "ok":
            problems.append(f"module {module} does not import in the engine's Python: {outcome}")
    for run_id, outcome in engine.get("composition", {}).items():
        if outcome != "ok":
            problems.append(f"run {run_id}: verl rejects its arguments: {outcome}")
    gpus = engine.get("gpus_visible")
    wanted = study.site["hardware"]["gpus_per_node"]
    if study.site["engine"] != "verl-cpu" and engine and gpus != wanted:
        problems.append(f"{gpus} GPUs visible to the engine, the site says hardware.gpus_per_node = {wanted}")
    pinned = study.config["software"]["verl"]
    if engine and engine["versions"].get("verl") != pinned:
        problems.append(f"verl {engine['versions'].get('verl')} in the engine's Python, the study pins {pinned}")
    ray: dict[str, Any] | None = None
    if preflight_nodes(study, plan) == 2:
        if env.get("SLURM_JOB_ID"):
            ray, found = _two_node_ray(study, root, env, paths.results_dir(root) / "preflight" / "ray")
            problems += found
        else:
            problems.append("the study has multi-node runs, but the preflight runs outside a Slurm job")
    return {
        "site": study.site_name,
        "checked": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "slurm": {k: env.get(f"SLURM_JOB_{k.upper()}") for k in ("id", "account", "partition", "nodelist")},
        "image": image,
        "inputs": inputs,
        "engine": engine,
        "ray_two_nodes": ray,
        "runs_checked": len([r for r in plan if r.verl_args]),
        "problems": problems,
    }


def runs_to_check(study: Study, root: Path) -> list[Run]:
    """Every run the study may make: its sweep, and its scaling runs for each sweep point the selection
    could choose (or the pinned or chosen one)."""
    from .plan import build_plan
    from .selection_io import read_selections

    chosen = read_selections(root, study)
    grids = {d: [chosen[d]] if chosen.get(d) else study.dataset(d)["sweep"] for d in study.datasets}
    runs: dict[str, Run] = {}
    for index in range(max(len(grid) for grid in grids.values())):
        selection = {d: grid[min(index, len(grid) - 1)] for d, grid in grids.items()}
        for run in build_plan(study, selection, root):
            if run.run_id:
                runs.setdefault(run.run_id, run)
    return list(runs.values())
