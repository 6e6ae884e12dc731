"""The preflight: one short job on the target site that proves the engine stack before any run.

It runs where the runs will run (a Slurm job on the site's partition, inside the site's image) and
records in results/preflight/<site>.json: the image's digest and labels, the versions of Python, Ray,
verl, torch, vLLM and Megatron inside it, every module the configured engines import, the GPUs visible,
the run environment as the processes see it (expanded), every planned run's verl arguments composed and
checked by verl's own config validation inside the image, the dataset and model manifests (and the
reward's self-check of datasets whose data stage had no verl: rewards), the Slurm
account and partition that accepted the job, and, for a study with multi-node runs, a two-node Ray
cluster started in the image and joined by the real probe, and across its two nodes an all-reduce
on a new process group with the runs' library: its transport, bus bandwidth and time
(collective). Every problem found is listed; any problem
stops the workflow before a run is submitted.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.execution.preflight.collective import run_collective
from rlvr_scaling.execution.preflight.engine_smoke import run_smoke
from rlvr_scaling.execution.preflight.probe import MARK
from rlvr_scaling.execution.preflight.rewards import reward_problems, reward_requests
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, end_processes, new_token
from rlvr_scaling.execution.run_environment import (
    environment_templates,
    expanded_environment,
    recorded_environment,
)
from rlvr_scaling.execution.run_records import TRAINER_MODULE, trainer_module
from rlvr_scaling.execution.storage import space_report
from rlvr_scaling.fsutil import write_json
from rlvr_scaling.inputs.container import module_environment, python_command, record_path, require_runtime
from rlvr_scaling.inputs.container_build import base_changed_since_build
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import PlannedRun, Run, build_plan, known_runs

PROBE = Path(__file__).with_name("probe.py")
# The job's time limit: the checks in the image may take half of it; 5% of it and a minute are kept
# to file the record; the engine smoke has what is left.
PROBE_SHARE, RECORD_SHARE, RECORD_SECONDS = 0.5, 0.05, 60.0


def engine_modules(study: Study) -> list[str]:
    """What the configured engines import in the run's processes."""
    if trainer_module() != TRAINER_MODULE:
        # A test's stand-in trainer (tests/standin_trainer.py: the rehearsal of the LUMI study on the
        # test cluster, whose engines cannot be installed here) is what its runs import, with no GPU.
        # Production's probe imports the site's engines and counts its GPUs (tests/test_preflight.py).
        return ["verl", trainer_module()]
    names = ["ray", "verl", "torch", "transformers", "hydra", "tensordict", "verl.trainer.main_ppo"]
    parallel = study.config.parallel
    names += {"vllm": ["vllm"], "sglang": ["sglang"], "hf": []}[parallel.rollout.engine]
    if parallel.training.engine == "megatron":
        # verl 0.9.1's Megatron workers build models through a bridge: Megatron-Bridge by default,
        # mbridge with vanilla_mbridge (engine_options.megatron_bridge); both import TE's PyTorch
        # layers. The flash attention backend (verl's default) runs flash-attention.
        options = study.site.engine_options
        names += ["megatron.core", "mbridge" if options.megatron_bridge == "mbridge" else "megatron.bridge"]
        names.append("transformer_engine.pytorch")
        if options.attention_backend in (None, "flash"):
            names.append("flash_attn")
    if study.site.cpu_engine:
        names.append("rlvr_scaling.engines.cpu")
    return names


def multi_node(plan: Sequence[PlannedRun]) -> bool:
    return any(run.nodes > 1 for run in plan)


def preflight_nodes(study: Study, plan: Sequence[PlannedRun]) -> int:
    """The collective's nodes (fabric.collective_nodes, two unless the site says more) where the study
    has multi-node runs on a Slurm site: Ray must form across nodes, and the collective cross them."""
    return study.site.fabric.collective_nodes if study.site.launch.kind == "ray-srun" and multi_node(plan) else 1


def smoke_minutes_at_least(study: Study) -> float:
    """What the job's time limit leaves the engine smoke when the checks before it take their longest."""
    return study.site.slurm.preflight_minutes * (1 - PROBE_SHARE - RECORD_SHARE) - RECORD_SECONDS / 60


def _probe(
    study: Study, root: Path, runs: list[Run], env: dict[str, str], timeout_s: float
) -> tuple[dict[str, Any], list[str]]:
    request = {
        "modules": engine_modules(study),
        "environment": sorted(environment_templates(study)),
        "runs": [{"run_id": run.run_id, "verl_args": run.verl_args} for run in runs if run.verl_args],
        "rewards": reward_requests(study, root),
    }
    # In results/: on a container site the image sees it there (the results tree is bound in).
    paths.results_dir(root).mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=paths.results_dir(root), delete=False) as handle:
        json.dump(request, handle)
    try:
        # The probe's source, not a module path: the image need not hold this package.
        command = [*python_command(study, root), "-c", PROBE.read_text(), handle.name]
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {}, [f"the checks in the engine's Python did not finish within {timeout_s:.0f} s"]
    finally:
        os.unlink(handle.name)
    marked = [line[len(MARK) :] for line in result.stdout.splitlines() if line.startswith(MARK)]
    try:
        return json.loads(marked[-1]), []
    except (IndexError, ValueError):
        return {}, [
            f"the engine's Python could not run the checks (exit {result.returncode}): "
            f"{(result.stderr or result.stdout)[-1500:]}"
        ]


def _image(study: Study, root: Path, env: dict[str, str]) -> tuple[dict[str, Any] | None, list[str]]:
    if study.site.container is None:
        return None, []
    record = record_path(study, root)
    if not record.exists():
        return None, [f"the image's build record {record} is missing (build the image first)"]
    facts = json.loads(record.read_text())
    image = Path(facts["image"]["path"])
    problems = []
    try:
        require_runtime(study, env)
    except ConfigError as exc:
        problems.append(str(exc))
    changed = base_changed_since_build(study, record)
    if changed:
        problems.append(changed)
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
    model = paths.model_dir(root, study.site_name, study.model_folder) / "config.json"
    found["model"] = str(model) if model.exists() else None
    if not model.exists():
        problems.append(f"model: {model} is missing")
    return found, problems


def two_node_checks(
    study: Study, root: Path, env: dict[str, str], log_dir: Path
) -> tuple[dict[str, Any], dict[str, Any] | None, list[str]]:
    """The runs' launcher over two nodes, and on its cluster the collective across them."""
    from rlvr_scaling.execution.launchers.ray_srun import start_ray_cluster

    job: dict[str, Any] = {}
    # Its own token: every process of this cluster is gone before the engine smoke starts another.
    token = new_token()
    cluster_env = {**env, TOKEN_VAR: token}
    try:
        nodes = study.site.fabric.collective_nodes
        cluster = start_ray_cluster(study, nodes, study.site.hardware.gpus_per_node, root, log_dir, cluster_env, job)
    except StudyError as exc:
        end_processes(token)
        return {"formed": False, **job}, None, [f"a {nodes}-node Ray cluster in the image did not form: {exc}"]
    try:
        collective, problems = run_collective(
            study, root, cluster_env, log_dir.parent / "collective", job["node_list"], local_groups=False
        )
    finally:
        cluster.stop()
        end_processes(token)
    return {"formed": True, **job}, collective, problems


def _slurm_job(env: dict[str, str]) -> dict[str, str | None]:
    """Account, partition and nodes of the job the preflight runs in, as Slurm accepted it (the
    executor strips SLURM_* from the job's environment but its id)."""
    job_id = env.get("SLURM_JOB_ID")
    facts: dict[str, str | None] = {"id": job_id, "account": None, "partition": None, "nodelist": None}
    if not job_id:
        return facts
    try:
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return facts
    fields = dict(item.split("=", 1) for item in shown.split() if "=" in item)
    facts.update(account=fields.get("Account"), partition=fields.get("Partition"), nodelist=fields.get("NodeList"))
    return facts


def check(
    study: Study, plan: list[Run], root: Path, env: dict[str, str] | None = None, known: list[str] | None = None
) -> dict[str, Any]:
    """Run every check; the record lists each problem, after the `known` ones (empty: ready to run)."""
    # Its processes carry a token as a run's do: none outlives the preflight.
    token = new_token()
    env = {**(os.environ if env is None else env), TOKEN_VAR: token}
    try:
        record = _check(study, plan, root, env, smoke=not known)
        record["problems"] = [*(known or []), *record["problems"]]
        return record
    finally:
        end_processes(token)


def _check(study: Study, plan: list[Run], root: Path, env: dict[str, str], smoke: bool = True) -> dict[str, Any]:
    """The checks in their order, each adding its problems. Over 60 lines because every check of the
    preflight stands here in the order it runs (the engine smoke last, only when all else holds)."""
    problems: list[str] = []
    # The module commands the runs' launcher applies (LUMI: the AIF bindings), so the checks see
    # the environment the runs will.
    try:
        env.update(module_environment(study, env))
    except StudyError as exc:
        problems.append(str(exc))
    image, image_problems = _image(study, root, env)
    problems += image_problems
    inputs, found = _inputs(study, root)
    problems += found
    try:
        run_env = {**env, **expanded_environment(study, env)}
    except StudyError as exc:
        run_env, problems = env, [*problems, str(exc)]
    # Most of the job's time limit for the checks in the image, the rest for Ray and the record.
    began = time.monotonic()
    budget_s = study.site.slurm.preflight_minutes * 60
    engine: dict[str, Any] = {}
    if study.site.container is None or (image is not None and not image_problems):
        engine, found = _probe(study, root, plan, run_env, timeout_s=budget_s * PROBE_SHARE)
        problems += found
        if "environment" in engine:
            # The record (bundled, published) holds what the runs' records hold: the study's and site's
            # values with only harmless ${NAME}s filled in; the probe's expanded view is only compared.
            seen = engine["environment"]
            engine["environment_not_as_set"] = sorted(k for k, v in seen.items() if v != run_env.get(k))
            engine["environment"] = recorded_environment(study, env)
    problems += _engine_problems(study, engine)
    self_checks, found = reward_problems(study, engine.pop("rewards", {}))
    problems += found
    results, model = paths.results_dir(root), paths.model_dir(root, study.site_name, study.model_folder)
    storage, found, warnings = space_report(results, model, study.slurm_account())
    problems += found
    ray, collective, found = _cross_node_checks(study, plan, root, env, run_env)
    problems += found
    # Last, and only when everything else holds: the engines themselves, for a few real steps.
    smoked: dict[str, Any] = {"ran": False, "reason": "an earlier check failed"}
    if smoke and not problems:
        # What is left of the job's time limit, less a margin to file the record.
        left_s = budget_s * (1 - RECORD_SHARE) - (time.monotonic() - began) - RECORD_SECONDS
        nodes = preflight_nodes(study, plan) if env.get("SLURM_JOB_ID") else 1
        smoked, found = run_smoke(study, plan, root, run_env, timeout_s=max(left_s, 60.0), max_nodes=nodes)
        problems += found
    return {
        "site": study.site_name,
        "checked": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "engine_smoke": smoked,
        "slurm": _slurm_job(env),
        "image": image,
        "inputs": inputs,
        "reward_self_check": self_checks,
        "engine": engine,
        "ray_two_nodes": ray,
        "collective": collective,
        "storage": storage,
        "runs_checked": len([r for r in plan if r.verl_args]),
        "problems": problems,
        "warnings": warnings,
    }


def _cross_node_checks(
    study: Study, plan: list[Run], root: Path, env: dict[str, str], run_env: dict[str, str]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    """For a study with multi-node runs: the two-node Ray cluster (in the preflight's Slurm job) and
    the collective across its nodes; on the local site, the collective between its two groups of
    workers (the local runs' two "nodes")."""
    if not multi_node(plan):
        return None, None, []
    folder = paths.results_dir(root) / "preflight"
    if study.site.launch.kind == "local":
        nodes = [f"group-{index}" for index in range(study.site.fabric.collective_nodes)]
        collective, problems = run_collective(study, root, run_env, folder / "collective", nodes, local_groups=True)
        return None, collective, problems
    if not env.get("SLURM_JOB_ID"):
        return None, None, ["the study has multi-node runs, but the preflight runs outside a Slurm job"]
    return two_node_checks(study, root, env, folder / "ray")


def _engine_problems(study: Study, engine: dict[str, Any]) -> list[str]:
    """What the probe found wrong inside the image: imports, verl's view of each run, GPUs, verl's version."""
    problems = [
        f"module {module} does not import in the engine's Python: {outcome}"
        for module, outcome in engine.get("modules", {}).items()
        if outcome != "ok"
    ]
    problems += [
        f"run {run_id}: verl rejects its arguments: {outcome}"
        for run_id, outcome in engine.get("composition", {}).items()
        if outcome != "ok"
    ]
    gpus = engine.get("gpus_visible")
    wanted = study.site.hardware.gpus_per_node
    if not study.site.cpu_engine and engine and gpus != wanted and trainer_module() == TRAINER_MODULE:
        problems.append(f"{gpus} GPUs visible to the engine, the site says hardware.gpus_per_node = {wanted}")
    pinned = study.config.software.verl
    if engine and engine["versions"].get("verl") != pinned:
        problems.append(f"verl {engine['versions'].get('verl')} in the engine's Python, the study pins {pinned}")
    return problems


def runs_to_check(study: Study, root: Path, chosen: dict[str, int | None]) -> tuple[list[Run], list[str]]:
    """Every run the study may make: its sweep, and its scaling runs for each sweep point the selection
    could choose (or the pinned or chosen one: `chosen`, per dataset, as analysis.across_runs.selection_io reads it,
    given by the caller because the analysis sits above execution); and the sweep points whose scaling
    runs cannot be planned (they would stop the workflow after the sweep)."""
    grids = {d: [chosen[d]] if chosen.get(d) else study.dataset(d).sweep for d in study.datasets}
    runs: dict[str, Run] = {}
    problems = []
    for index in range(max(len(grid) for grid in grids.values())):
        selection = {d: grid[min(index, len(grid) - 1)] for d, grid in grids.items()}
        try:
            planned = build_plan(study, selection, root)
        except ConfigError as exc:
            problems.append(f"with the selection {selection}, the scaling runs cannot be planned: {exc}")
            continue
        for run in known_runs(planned):
            runs.setdefault(run.run_id, run)
    return list(runs.values()), problems


def run_preflight(study: Study, root: Path, output: Path, chosen: dict[str, int | None]) -> tuple[dict[str, Any], Path]:
    """Check and file the record: at `output` when it passed; when it did not, beside it as
    <name>.failed.json (Snakemake deletes a failed job's output, the evidence must stay). `chosen`:
    the selections made so far (runs_to_check)."""
    runs, unplannable = runs_to_check(study, root, chosen)
    record = check(study, runs, root, known=unplannable)
    written = output.with_name(f"{output.stem}.failed.json") if record["problems"] else output
    write_json(written, record)
    return record, written
