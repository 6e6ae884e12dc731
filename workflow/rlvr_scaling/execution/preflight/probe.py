"""The preflight's checks inside the engine image, run by the image's own Python.

Self-contained on purpose (standard library, then verl): the image need not hold rlvr_scaling, and
the same file runs in any image. Reads a JSON request (argv[1]) and prints one marked JSON report line:
versions, the modules the engines import, GPUs visible, the run environment as seen, every planned
run's verl arguments composed with verl's Hydra config and checked by verl's own validate_config, and
the reward's self-check of the datasets whose data stage could not load verl's scorers.
"""

import importlib
import importlib.metadata
import json
import os
import platform
import sys
import traceback

MARK = "RLVR-PREFLIGHT-REPORT "
DISTRIBUTIONS = (
    "ray",
    "verl",
    "torch",
    "vllm",
    "sglang",
    "megatron-core",
    "megatron-bridge",
    "mbridge",
    "transformer-engine",
    "transformers",
)


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]


def versions() -> dict:
    found: dict[str, str | None] = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def modules(names: list) -> dict:
    result = {}
    for name in names:
        try:
            importlib.import_module(name)
            result[name] = "ok"
        except BaseException as exc:  # an import can fail in any way, also SystemExit
            result[name] = _short(exc)
    return result


def gpus() -> object:
    try:
        import torch

        return torch.cuda.device_count()
    except BaseException as exc:
        return _short(exc)


def composed(runs: list) -> dict:
    result = {}
    try:
        import verl
        from hydra import compose, initialize_config_dir
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config
    except BaseException as exc:
        return {run["run_id"]: f"verl's config could not be loaded: {_short(exc)}" for run in runs}
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        for run in runs:
            try:
                config = compose(config_name="ppo_trainer", overrides=run["verl_args"])
                validate_config(
                    config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
                )
                result[run["run_id"]] = "ok"
            except BaseException as exc:
                last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
                where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
                result[run["run_id"]] = _short(exc) + where
    return result


def _reward_function(check: dict):
    """verl's default scorer, or the dataset's own reward (its copy beside the rows)."""
    if not check.get("reward_file"):
        from verl.utils.reward_score import default_compute_score

        return default_compute_score, f"verl.utils.reward_score.default_compute_score({check['data_source']!r})"
    import importlib.util

    spec = importlib.util.spec_from_file_location("rlvr_reward_" + check["dataset"], check["reward_file"])
    if spec is None or spec.loader is None:
        raise ImportError(f"{check['reward_file']} cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, check["function"]), f"{check['reward_file']}:{check['function']}"


def _scored_references(check: dict, function) -> dict:
    rows, passing, failing = 0, 0, list[dict]()
    with open(check["references"]) as handle:
        for line in handle:
            reference = json.loads(line)
            rows += 1
            error, score = None, None
            try:
                result = function(check["data_source"], reference["solution"], reference["ground_truth"])
                score = float(result["score"] if isinstance(result, dict) else result)
            except BaseException as exc:
                error = _short(exc)
            if score is not None and score >= check["full_score"]:
                passing += 1
            elif len(failing) < 3:
                failing.append(
                    {
                        "split": reference["split"],
                        "index": reference["index"],
                        "ground_truth": reference["ground_truth"],
                        "reference": reference["solution"][-160:],
                        "score": score,
                        **({"error": error} if error else {}),
                    }
                )
    return {"rows": rows, "passing": passing, "failing": failing}


def rewards(checks: list) -> dict:
    """Each dataset's reference solutions scored by the reward the runs use (the data stage's
    self-check, where the workflow's environment had no verl)."""
    result = {}
    for check in checks:
        try:
            function, described = _reward_function(check)
            result[check["dataset"]] = {"scorer": described, **_scored_references(check, function)}
        except BaseException as exc:
            result[check["dataset"]] = {"error": _short(exc)}
    return result


def main() -> None:
    with open(sys.argv[1]) as handle:
        request = json.load(handle)
    report = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "versions": versions(),
        "modules": modules(request["modules"]),
        "gpus_visible": gpus(),
        "environment": {key: os.environ.get(key) for key in request["environment"]},
        "composition": composed(request["runs"]),
        "rewards": rewards(request.get("rewards", [])),
    }
    # A marked line: engines print to stdout too, also after us.
    sys.stdout.write(MARK + json.dumps(report) + "\n")
    sys.stdout.flush()
    # No interpreter shutdown: GPU stacks may crash in their exit handlers after a complete report.
    os._exit(0)


if __name__ == "__main__":
    main()
