"""The analysis' records, typed: a run's summary (results/summaries/<run_id>.json) and a dataset's index
(results/index/<dataset>.json), each read once from its JSON and written back to exactly that JSON.

The files keep the names they were first written with (a summary's figures under "summary"), so results
made before stay readable; the code reads them by what they hold (`RunSummary.measured`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Spread:
    """One figure over a run's measured steps: mean, sample std, count, and a 95% interval where computed."""

    mean: float
    std: float
    n: int
    ci95: tuple[float, float] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Spread:
        ci = data.get("ci95")
        return cls(data["mean"], data["std"], data["n"], tuple(ci) if ci is not None else None)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"mean": self.mean, "std": self.std, "n": self.n}
        if self.ci95 is not None:
            data["ci95"] = list(self.ci95)
        return data


@dataclass(frozen=True)
class Measured:
    """What a run measured over its steps after the warm-up (measured.metrics.summarize_steps)."""

    n_steps: int
    steps_used: int
    warmup_steps: int
    n_gpus: int
    step_time_s: Spread
    tokens_per_step: Spread
    throughput_per_gpu: Spread
    phases_s: dict[str, Spread]
    response_length: Spread
    response_clip_ratio: Spread
    peak_memory_gb: float | None
    throughput_cross_check: dict[str, Any]
    # MFU per phase (analysis.per_run.model_flops.summarize_mfu); None in summaries written before it existed
    mfu: dict[str, Any] | None = None
    # joules per step and trajectory (analysis.per_run.energy_use); None in summaries written before it existed
    energy: dict[str, Any] | None = None
    # whether its steps were disturbed (analysis.per_run.disturbance); None in summaries written before it existed
    disturbance: dict[str, Any] | None = None

    SPREADS = ("step_time_s", "tokens_per_step", "throughput_per_gpu", "response_length", "response_clip_ratio")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measured:
        spreads: dict[str, Any] = {name: Spread.from_json(data[name]) for name in cls.SPREADS}
        return cls(
            **{k: data[k] for k in ("n_steps", "steps_used", "warmup_steps", "n_gpus")},
            **spreads,
            phases_s={phase: Spread.from_json(value) for phase, value in data["phases_s"].items()},
            peak_memory_gb=data["peak_memory_gb"],
            throughput_cross_check=data["throughput_cross_check"],
            mfu=data.get("mfu"),
            energy=data.get("energy"),
            disturbance=data.get("disturbance"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "n_steps": self.n_steps,
            "steps_used": self.steps_used,
            "warmup_steps": self.warmup_steps,
            "n_gpus": self.n_gpus,
            "step_time_s": self.step_time_s.to_json(),
            "tokens_per_step": self.tokens_per_step.to_json(),
            "throughput_per_gpu": self.throughput_per_gpu.to_json(),
            "phases_s": {phase: value.to_json() for phase, value in self.phases_s.items()},
            "response_length": self.response_length.to_json(),
            "response_clip_ratio": self.response_clip_ratio.to_json(),
            "peak_memory_gb": self.peak_memory_gb,
            "throughput_cross_check": self.throughput_cross_check,
            **({"mfu": self.mfu} if self.mfu is not None else {}),
            **({"energy": self.energy} if self.energy is not None else {}),
            **({"disturbance": self.disturbance} if self.disturbance is not None else {}),
        }


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


# A summary's fields that say which run it is, in the order its JSON holds them.
RUN_FIELDS = (
    "run_id",
    "dataset",
    "series",
    "nodes",
    "gpus",
    "prompts",
    "trajectories",
    "trajectories_per_engine",
    "concurrency",
    "max_response_length",
    "memory_settings",
    "site",
    "gpu_memory_gb",
)


@dataclass
class RunSummary:
    """A run's summary: which run, what it measured (None for a failed sweep point), whether it is a
    measurement (`checks`, `valid`), its per-step records and where every number came from."""

    run_id: str
    dataset: str
    series: list[str]
    nodes: int
    gpus: int
    prompts: int
    trajectories: int
    trajectories_per_engine: float
    concurrency: int
    max_response_length: int
    memory_settings: dict[str, Any]
    site: str
    gpu_memory_gb: float
    measured: Measured | None
    checks: list[Check]
    valid: bool
    status: str  # succeeded, or failed (a sweep point that ran out of memory)
    steps: list[dict[str, Any]]
    provenance: dict[str, Any]
    failure: str | None = None
    memory_evidence: str | None = None
    overhead: dict[str, float] | None = None  # analysis.per_run.overhead: start-up and tear-down, in seconds
    estimated_node_hours: float | None = None  # what the plan's estimate gave the run (its spec)
    adaptive_stop: dict[str, Any] | None = None  # where the adaptive step count stopped it (job.json)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        figures = data.get("summary")
        return cls(
            **{name: data[name] for name in RUN_FIELDS},
            measured=Measured.from_json(figures) if figures is not None else None,
            checks=[Check(**check) for check in data["checks"]],
            valid=data["valid"],
            status=data["status"],
            steps=data["steps"],
            provenance=data["provenance"],
            failure=data.get("failure"),
            memory_evidence=data.get("memory_evidence"),
            overhead=data.get("overhead"),
            estimated_node_hours=data.get("estimated_node_hours"),
            adaptive_stop=data.get("adaptive_stop"),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: getattr(self, name) for name in RUN_FIELDS}
        data["summary"] = self.measured.to_json() if self.measured is not None else None
        data["checks"] = [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks]
        data["valid"] = self.valid
        data["status"] = self.status
        if self.status == "failed":
            data["failure"] = self.failure
            data["memory_evidence"] = self.memory_evidence
        if self.overhead is not None:
            data["overhead"] = self.overhead
        data["estimated_node_hours"] = self.estimated_node_hours
        if self.adaptive_stop is not None:  # absent for a run that took all its steps, as before
            data["adaptive_stop"] = self.adaptive_stop
        data["steps"] = self.steps
        data["provenance"] = self.provenance
        return data

    @property
    def figures(self) -> Measured:
        """What the run measured, for code that reads valid runs only (a valid run has measured, a failed
        sweep point has not); ValueError naming the run for one with nothing measured."""
        if self.measured is None:
            raise ValueError(f"run {self.run_id} ({self.status}) measured nothing: it has no figures to read")
        return self.measured

    def failed_checks(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]

    def measured_steps(self) -> list[dict[str, Any]]:
        """The per-step records the figures are computed from: those after the warm-up."""
        assert self.measured is not None, f"{self.run_id} measured nothing"
        return [step for step in self.steps if step["step"] > self.measured.warmup_steps]


@dataclass(frozen=True)
class IndexedRun:
    run_id: str
    series: list[str]  # as the plan puts the run now (a sweep point may also be the 1-node weak run)
    nodes: int
    prompts: int
    valid: bool
    summary: str  # the summary file, relative to the study's root

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DatasetIndex:
    """A dataset's runs for the analysis, with the selection they were chosen by and the one engine
    image they were measured on."""

    dataset: str
    selection: dict[str, Any] | None  # the sweep's selection artifact, or {"prompts": N, "pinned": True}
    image_sha256: str | None
    runs: list[IndexedRun] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DatasetIndex:
        runs = [IndexedRun(**run) for run in data["runs"]]
        return cls(data["dataset"], data["selection"], data.get("image_sha256"), runs)

    @classmethod
    def read(cls, path: Path) -> DatasetIndex:
        return cls.from_json(json.loads(path.read_text()))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # its runs as IndexedRun.to_json writes them
