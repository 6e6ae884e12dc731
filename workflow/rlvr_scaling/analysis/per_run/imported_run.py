"""A verl run made elsewhere, brought in: its console log or file-logger JSONL becomes a run
directory (spec.json, job.json, the log) that the analysis reads like one of its own, marked as
imported, and its summary. What the log does not say (nodes, GPUs, prompts, the response cap, the
dataset) the importer states; the algorithm's settings are the study's unless given."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.analysis.per_run.summary import summarize_run
from rlvr_scaling.errors import StudyError
from rlvr_scaling.fsutil import json_text, staged_directory, write_json
from rlvr_scaling.measured.metrics import read_steps
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.model_shape import model_record


@dataclass(frozen=True)
class ImportedShape:
    """What the importer states about the run."""

    dataset: str
    nodes: int
    gpus_per_node: int
    prompts: int
    max_response_length: int
    series: list[str]
    steps: int | None = None  # the steps the run was configured for; None: the study's
    site_name: str = "imported"
    gpu_memory_gb: float | None = None
    rollout_tensor_parallel: int | None = None
    concurrency: int | None = None  # vLLM max_num_seqs per engine; None: its trajectories per engine


def _positive(name: str, value: int | float | None) -> None:
    # Also finite: an infinite memory would be written into spec.json as `Infinity`, which is not JSON.
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise StudyError(f"import: --{name.replace('_', '-')} is {value}; expected a positive finite number")


def check_shape(shape: ImportedShape) -> None:
    for name in (
        "nodes",
        "gpus_per_node",
        "prompts",
        "max_response_length",
        "steps",
        "gpu_memory_gb",
        "concurrency",
        "rollout_tensor_parallel",
    ):
        _positive(name, getattr(shape, name))
    if not paths.is_plain_name(shape.dataset):
        raise StudyError(f"import: --dataset is {shape.dataset!r}; expected a name of letters, digits, '.', '_', '-'")


def read_log(log: Path) -> str:
    """Which reader takes the log (jsonl or console); a file with no step of verl is refused."""
    if not log.is_file():
        raise StudyError(f"import: {log} is not a file")
    steps, problems, reader = read_steps(log)
    if not steps:
        found = "; ".join(problems[:3]) or "no line of the form 'step:N - timing_s/step:...' or JSON record"
        raise StudyError(f"import: {log} holds no step of a verl run ({found})")
    return reader


def imported_spec(study: Study, shape: ImportedShape, run_id: str, log: Path, digest: str) -> dict:
    algorithm = study.config.algorithm
    tp = shape.rollout_tensor_parallel or study.config.parallel.rollout.tensor_parallel
    engines = max(1, shape.nodes * shape.gpus_per_node // tp)
    trajectories = shape.prompts * algorithm.responses_per_prompt
    hardware = study.site.hardware
    run = {
        "run_id": run_id,
        "series": shape.series,
        "dataset": shape.dataset,
        "nodes": shape.nodes,
        "gpus_per_node": shape.gpus_per_node,
        "prompts": shape.prompts,
        "responses_per_prompt": algorithm.responses_per_prompt,
        "trajectories": trajectories,
        "max_response_length": shape.max_response_length,
        # What the run was to do, not what the log shows: a log that stops early is no measurement.
        "steps": shape.steps or algorithm.steps,
        "warmup_steps": algorithm.warmup_steps,
        # Unless stated, as if every trajectory of a step was generated at once (the pipeline sets it
        # from the one-node workload, so its strong-scaling runs have more).
        "concurrency": shape.concurrency or math.ceil(trajectories / engines),
        "trajectories_per_engine": trajectories / engines,
        "memory": {},
    }
    site: dict[str, Any] = {
        "name": shape.site_name,
        "hardware": {**hardware.to_dict(), "gpus_per_node": shape.gpus_per_node},
    }
    if shape.gpu_memory_gb is not None:
        site["hardware"]["gpu_memory_gb"] = shape.gpu_memory_gb
    return {
        "run": run,
        "study": study.config.to_dict(),
        "site": site,
        "imported": {"source": log.name, "sha256": digest, "rollout_tensor_parallel": tp},
    }


def import_run(
    study: Study, log: Path, shape: ImportedShape, root: Path, model_config: Path | None = None
) -> tuple[Path, Path]:
    """The run directory and its summary, under `root`. The run's id names the log and the shape
    stated for it: importing the same again changes nothing, a different shape is another run.
    `model_config`: the config.json of the model the run trained, for its MFU (None: the study's
    model folder's, if it has been downloaded here)."""
    check_shape(shape)
    if model_config is not None and not model_config.is_file():
        raise StudyError(f"import: --model-config is {model_config}; expected a model's config.json")
    reader = read_log(log)
    digest = hashlib.sha256(log.read_bytes()).hexdigest()
    # Everything stated enters the id, with the study's settings the summary reads.
    algorithm = study.config.algorithm
    stated = json.dumps([digest, asdict(shape), algorithm.responses_per_prompt, algorithm.lr, algorithm.steps])
    run_id = f"{shape.dataset}-n{shape.nodes}-p{shape.prompts}-{hashlib.sha256(stated.encode()).hexdigest()[:10]}"
    run_dir = paths.run_dir(root, run_id)
    if not run_dir.exists():
        with staged_directory(run_dir) as staging:
            spec = imported_spec(study, shape, run_id, log, digest)
            (staging / "spec.json").write_text(json_text(spec))
            job = {
                "run_id": run_id,
                "status": "succeeded",
                "imported": True,
                "nodes": shape.nodes,
                "workers": shape.nodes * shape.gpus_per_node,
                "start": None,
                "end": None,
                "model": model_record(
                    model_config or paths.model_dir(root, study.site_name, study.model_folder) / "config.json"
                ),
            }
            (staging / "job.json").write_text(json_text(job))
            shutil.copyfile(log, staging / ("metrics.jsonl" if reader == "jsonl" else "console.log"))
    summary_path = paths.results_dir(root) / "summaries" / f"{run_id}.json"
    peak = study.site.hardware.peak_tflops_bf16
    write_json(summary_path, summarize_run(run_dir, study.config.algorithm.warmup_steps, peak).to_json())
    return run_dir, summary_path
