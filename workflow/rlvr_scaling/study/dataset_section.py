"""A dataset's section of the study config: where its rows come from, how they are built and scored,
and the lengths, memory and sweep of its runs (docs/own-study.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlvr_scaling.study.section_base import Section


@dataclass(frozen=True)
class Memory(Section):
    recompute: bool = False
    offload: bool = False
    token_budget: int = 0  # ppo_max_token_len_per_gpu and log_prob_max_token_len_per_gpu
    gpu_memory_utilization: float | None = None  # None: parallel.rollout's


@dataclass(frozen=True)
class DatasetEstimate(Section):
    seconds_per_trajectory: float = 0.0


@dataclass(frozen=True)
class DatasetFiles(Section):
    """Per split, a file or glob: in the hub repository, or under the local folder `source` names."""

    train: str | None = None
    val: str | None = None


@dataclass(frozen=True)
class GroundTruth(Section):
    """How the ground truth is taken from the answer field (inputs.rows.ground_truth)."""

    rule: str = "whole"  # whole | after_marker | last_boxed | number
    marker: str | None = None  # after_marker, number: the text after its last occurrence
    remove: list[str] = field(default_factory=list)  # texts removed from the result (GSM8K: ",")


@dataclass(frozen=True)
class Reward(Section):
    """verl's built-in scorer for `data_source`, or a function of the user's own file."""

    data_source: str | None = None  # the rows' data_source; None: the dataset's name
    style: str = "rule"  # reward_model.style
    file: str | None = None  # a Python file (relative to the working directory, or absolute)
    function: str = "compute_score"
    sha256: str | None = None  # the file's, filled in when the study is loaded (study.config)

    @property
    def custom(self) -> bool:
        return self.file is not None


@dataclass(frozen=True)
class SelfCheck(Section):
    """The reward's self-check over the prepared rows (inputs.self_check)."""

    solution: str = "{answer}"  # a row's reference solution: its answer field, in the shape the prompt asks for
    full_score: float = 1.0  # what the reward gives a correct solution (verl's built-in scorers: 1.0)
    min_share: float = 0.9  # below this share of reference solutions earning the full score the data stage fails


# What `source` may be besides a hub id or a path.
SYNTHETIC = "synthetic"
LOCAL_PREFIXES = ("/", "./", "../", "~/")


@dataclass(frozen=True)
class Dataset(Section):
    source: str = ""  # a hub dataset id, a local file or folder (a path: /, ./, ../), or `synthetic`
    revision: str | None = None  # hub: branch, tag or commit; synthetic: seed-N; local: none
    files: DatasetFiles = field(default_factory=DatasetFiles)
    held_out: int | None = None  # val rows held out of train in a fixed hash order (no files.val)
    deduplicate: bool = False  # keep the first row of each prompt
    generator: str | None = None  # synthetic: which toy problems stand in for the upstream rows
    question: str = "question"  # the field (dotted for nested) holding the question
    answer: str = "answer"  # the field holding the answer
    ground_truth: GroundTruth = field(default_factory=GroundTruth)
    prompt: str = "{question}"  # the user message; {question} is replaced by the question
    ability: str = "math"
    extra_info: list[str] = field(default_factory=list)  # fields copied into each row's extra_info
    reward: Reward = field(default_factory=Reward)
    self_check: SelfCheck = field(default_factory=SelfCheck)
    max_prompt_length: int = 0
    max_response_length: int = 0
    memory: Memory = field(default_factory=Memory)
    sweep: list[int] = field(default_factory=list)  # prompts per node on one node
    estimate: DatasetEstimate = field(default_factory=DatasetEstimate)

    @property
    def max_length(self) -> int:
        return self.max_prompt_length + self.max_response_length

    @property
    def kind(self) -> str:
        """hub, local or synthetic: where the rows come from."""
        if self.source == SYNTHETIC:
            return "synthetic"
        return "local" if self.source.startswith(LOCAL_PREFIXES) else "hub"

    def data_source(self, name: str) -> str:
        return self.reward.data_source or name

    def build_settings(self) -> dict[str, Any]:
        """The keys that decide the rows (not the lengths, memory, sweep and estimate of the runs, nor the
        self-check that judges the rows)."""
        runs_only = ("max_prompt_length", "max_response_length", "memory", "sweep", "estimate", "self_check")
        return {key: value for key, value in self.to_dict().items() if key not in runs_only}
