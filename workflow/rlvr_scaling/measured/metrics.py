"""Per-step metrics of one run and their summary over the measured steps (after the warm-up)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr_scaling.measured.console_log import read_console
from rlvr_scaling.measured.metrics_file import is_finite, is_positive_finite, read_metrics_jsonl
from rlvr_scaling.measured.stats import bootstrap_ci, describe

PHASES = ("gen", "old_log_prob", "update_actor", "update_weights")
MEMORY_KEYS = ("actor/perf/max_memory_allocated_gb", "perf/max_memory_allocated_gb")
# verl rounds nothing, but its figure is tokens / (step time x nnodes x gpus): agree to 0.1%.
CROSS_CHECK_TOLERANCE = 1e-3


def read_steps(path: Path) -> tuple[list[dict[str, Any]], list[str], str]:
    """Steps from the file logger's JSONL, or from a console log; also says which reader was used."""
    with open(path, "rb") as handle:
        head = handle.read(1)
    if path.suffix == ".jsonl" or head == b"{":
        steps, problems = read_metrics_jsonl(path)
        return steps, problems, "jsonl"
    steps, problems = read_console(path.read_text(errors="replace"))
    return steps, problems, "console"


TOKENS = "perf/total_num_tokens"


def throughput_per_gpu(step: dict[str, Any], n_gpus: int) -> float:
    return step[TOKENS] / step["timing_s/step"] / n_gpus


def finite_values(steps: list[dict[str, Any]], key: str) -> list[float]:
    return [float(s[key]) for s in steps if is_finite(s.get(key))]


def summarize_steps(steps: list[dict[str, Any]], n_gpus: int, warmup_steps: int) -> dict[str, Any]:
    used = [s for s in steps if s["step"] > warmup_steps]
    step_times = finite_values(used, "timing_s/step")
    tokens = finite_values(used, TOKENS)
    # Only well-formed steps enter a figure; measurement_problems names the others (the run is invalid).
    timed = [s for s in used if is_positive_finite(s.get("timing_s/step")) and is_positive_finite(s.get(TOKENS))]
    per_gpu = [throughput_per_gpu(s, n_gpus) for s in timed]
    throughput: dict[str, Any] = describe(per_gpu)
    throughput["ci95"] = list(bootstrap_ci([per_gpu]))
    phases: dict[str, Any] = {}
    for phase in PHASES:
        phases[phase] = describe(finite_values(used, f"timing_s/{phase}"))
    other = [
        float(s["timing_s/step"]) - sum(float(s.get(f"timing_s/{p}", 0.0)) for p in PHASES)
        for s in timed
        if all(is_positive_finite(s.get(f"timing_s/{p}", 1.0)) for p in PHASES)
    ]
    phases["other"] = describe(other)
    disagreements = []
    for s in timed:
        reported = s.get("perf/throughput")
        if is_positive_finite(reported):
            ours = throughput_per_gpu(s, n_gpus)
            if ours and abs(reported - ours) / ours > CROSS_CHECK_TOLERANCE:
                disagreements.append({"step": s["step"], "verl": reported, "computed": ours})
    memory = [v for key in MEMORY_KEYS for v in finite_values(steps, key)]
    return {
        "n_steps": len(steps),
        "steps_used": len(used),
        "warmup_steps": warmup_steps,
        "n_gpus": n_gpus,
        "step_time_s": {**describe(step_times), "ci95": list(bootstrap_ci([step_times]))},
        "tokens_per_step": describe(tokens),
        "throughput_per_gpu": throughput,
        "phases_s": phases,
        "response_length": describe(finite_values(used, "response_length/mean")),
        "response_clip_ratio": describe(finite_values(used, "response_length/clip_ratio")),
        "peak_memory_gb": max(memory) if memory else None,
        "throughput_cross_check": {"tolerance": CROSS_CHECK_TOLERANCE, "disagreements": disagreements},
    }
