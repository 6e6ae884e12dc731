"""`rlvr-scaling metrics FILE`: one metrics file read, summarised and judged, for a person or as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling.errors import StudyError
from rlvr_scaling.measured.metrics import read_steps, summarize_steps
from rlvr_scaling.measured.metrics_file import measurement_problems


@dataclass
class MetricsInspection:
    path: Path
    reader: str
    steps: list[dict[str, Any]]
    summary: dict[str, Any]
    problems: list[str]  # what makes the file not a measurement; empty when it is one

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "summary": self.summary,
            "reader": self.reader,
            "valid": not self.problems,
            "problems": self.problems,
        }


def inspect_metrics(path: Path, n_gpus: int, warmup_steps: int, configured_steps: int | None) -> MetricsInspection:
    if not path.is_file():
        raise StudyError(f"no such metrics file: {path}")
    steps, problems, reader = read_steps(path)
    if not steps:
        size = path.stat().st_size
        found = "; ".join(problems) if problems else ("empty" if size == 0 else f"no step record in its {size} bytes")
        raise StudyError(f"{path} holds no verl step record (read as {reader}): {found}")
    summary = summarize_steps(steps, n_gpus, warmup_steps)
    return MetricsInspection(path, reader, steps, summary, measurement_problems(steps, problems, configured_steps))


def describe_inspection(found: MetricsInspection, n_gpus: int, warmup_steps: int) -> str:
    summary = found.summary
    lines = [
        f"{found.path} ({found.reader}): {summary['n_steps']} steps, {summary['steps_used']} measured after "
        f"{warmup_steps} warm-up step(s), {n_gpus} GPU(s)"
    ]
    rows = [
        ("step time (s)", summary["step_time_s"]),
        ("tokens per step", summary["tokens_per_step"]),
        ("throughput per GPU (tokens/s)", summary["throughput_per_gpu"]),
    ]
    rows += [(f"phase {name} (s)", value) for name, value in summary["phases_s"].items()]
    for label, value in rows:
        lines.append(f"  {label:32s} mean {value['mean']:.4g}  std {value['std']:.3g}  (n={value['n']})")
    for item in summary["throughput_cross_check"]["disagreements"]:
        lines.append(
            f"  warning: step {item['step']}: verl perf/throughput {item['verl']:.4g} "
            f"vs computed {item['computed']:.4g}"
        )
    if found.problems:
        # The figures above leave out the broken values; the run as a whole is not a measurement.
        lines.append(
            f"INVALID measurement ({len(found.problems)} problem(s)); the figures above use only well-formed steps:"
        )
        lines += [f"  {problem}" for problem in found.problems]
    return "\n".join(lines) + "\n"
