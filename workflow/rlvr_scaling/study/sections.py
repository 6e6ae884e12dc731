"""The study's config and the site as typed, frozen records, built once after the schema check.

Each field is one key of config/config.yaml or of a site file (config/schema/ says what values it
takes); an optional key's field holds its effective value, so no caller repeats a default. Every
record keeps the mapping it was built from: `to_dict()` gives back exactly that mapping, which is
what run ids hash and what runs record, so typing the study changed no run id. To change a value,
change the mapping and build again (`from_dict`); the records are not edited in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rlvr_scaling.study.billing import Billing
from rlvr_scaling.study.dataset_section import (  # noqa: F401 - the study's sections, in one namespace
    LOCAL_PREFIXES,
    SYNTHETIC,
    Dataset,
    DatasetEstimate,
    DatasetFiles,
    GroundTruth,
    Memory,
    Reward,
    SelfCheck,
)
from rlvr_scaling.study.identity import digest
from rlvr_scaling.study.section_base import Section
from rlvr_scaling.study.toy_scale import ToyScale

# The site (config/sites/<name>.yaml)


@dataclass(frozen=True)
class Hardware(Section):
    gpus_per_node: int = 0
    gpu_memory_gb: float = 0.0
    # The unit gpu_memory_gb is stated in (the key's name predates it): GiB | GB. GPU makers size HBM
    # in GiB while writing GB; the memory budget (study.memory_budget) turns it into the device's bytes.
    # GB, the unit the budget took before sites stated one, keeps a site file that does not say so as it was.
    gpu_memory_unit: str = "GB"
    cpus_per_node: int = 0  # usable cores per node (LUMI: 56 of 64)
    memory_mb_per_node: int = 0
    # dense BF16 peak per GPU (as the study counts GPUs), for MFU; None: no MFU (a CPU has no such peak)
    peak_tflops_bf16: float | None = None


@dataclass(frozen=True)
class SlurmSite(Section):
    partition: str = ""
    max_nodes: int = 0
    max_walltime_minutes: int = 0
    ntasks_per_node: int = 2  # the Slurm executor needs more than one task per node for a multi-node job
    account_required: bool = False
    account_env: list[str] = field(default_factory=list)  # variables that may hold the account, in order
    preflight_partition: str | None = None  # where the preflight job runs; None: `partition`
    preflight_minutes: int = 20  # the preflight job's time limit
    # The image build needs no GPU: a CPU partition where the site has one (LUMI: small).
    build_partition: str | None = None  # None: `partition`
    build_minutes: int = 120
    build_cpus: int = 8
    build_mem_mb: int = 32000
    build_mem_measured: bool = False  # build_mem_mb measured by a build (docs/lumi.md), or an estimate


@dataclass(frozen=True)
class Launch(Section):
    kind: str = "local"  # local | ray-srun (rlvr_scaling.execution.launchers)
    ray_port: int = 6379
    join_timeout_seconds: float = 600.0
    unset_environment: list[str] = field(default_factory=list)  # removed before Ray and verl start
    node_interface: str | None = None  # whose IPv4 address each node's Ray uses; None: Ray's own pick
    ray_temp_root: str = "/tmp"  # node-local folder holding each cluster's own Ray temporary folder
    # The hang guard's least wait for a step (execution.stall_guard): a run quiet for longer than its
    # bound, never below this, is stopped.
    stall_floor_minutes: float = 10.0
    # How often the launcher looks for new steps: the guard's and the step stamps' resolution.
    poll_seconds: float = 1.0
    # GPU index on a node -> the CPUs closest to it (a Linux CPU list, "49-55"): each verl worker of
    # one GPU binds itself to them (rlvr_scaling.engines.hooks). Empty: no binding.
    gpu_cpu_affinity: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Fabric(Section):
    """How a multi-node run's collectives must travel (execution.fabric_record judges each run)."""

    library: str = "gloo"  # rccl | nccl | gloo
    transport: str = "tcp"  # ofi-<provider> | ib | socket | tcp, as the library's own output names it
    collective_megabytes: float = 256.0
    collective_iterations: int = 5
    collective_timeout_seconds: float = 600.0
    # New process groups made in a row, each with its first all-reduce: the pattern that hangs some
    # RCCL stacks (laifs-container-recipes issue 44's reproducer makes 8).
    collective_new_groups: int = 8
    # The nodes the preflight's collective (and so its job) spans where the study has multi-node runs.
    collective_nodes: int = 2
    bandwidth_floor_gb_per_s: float = 0.0  # an absolute floor; or a share of the expected figure:
    expected_bus_bandwidth_gb_per_s: float | None = None  # what the fabric gives a two-node all-reduce
    bandwidth_floor_share: float | None = None
    expected_source: str = ""  # where the expected figure comes from
    source: str = ""

    @property
    def nccl(self) -> bool:
        return self.library in ("nccl", "rccl")

    @property
    def floor_gb_per_s(self) -> float:
        """The least bus bandwidth the preflight accepts: the share of the expected, or the absolute floor."""
        if self.expected_bus_bandwidth_gb_per_s is not None and self.bandwidth_floor_share is not None:
            return self.expected_bus_bandwidth_gb_per_s * self.bandwidth_floor_share
        return self.bandwidth_floor_gb_per_s

    def floor_text(self) -> str:
        """The floor and how it was set, for the preflight's line and `plan`."""
        if self.expected_bus_bandwidth_gb_per_s is not None and self.bandwidth_floor_share is not None:
            source = f"; {self.expected_source}" if self.expected_source else ""
            return (
                f"{self.floor_gb_per_s:.4g} GB/s ({self.bandwidth_floor_share:g} x the "
                f"{self.expected_bus_bandwidth_gb_per_s:g} GB/s the site expects: "
                f"fabric.bandwidth_floor_share, fabric.expected_bus_bandwidth_gb_per_s{source})"
            )
        return f"{self.bandwidth_floor_gb_per_s:g} GB/s (fabric.bandwidth_floor_gb_per_s)"


@dataclass(frozen=True)
class Storage(Section):
    results: str | None = None  # where results/ lives (a template); None: in the clone


@dataclass(frozen=True)
class Container(Section):
    base_image: str = ""
    known_issues: str | None = None  # of the base's release, and what the site does about them
    definition: str = ""  # the template: a .def.in (build: definition) or .sh.in (build: venv-squashfs)
    binds: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)  # shell commands run before the runtime (module load)
    runtime: str = "apptainer"  # the command that builds and runs the image (LUMI: singularity)
    base_sha256: str | None = None  # pinned: the build refuses another base, and it enters the run ids
    base_packages: str | None = None  # the base's `pip list` (a file in the repository): the resolve check
    build: str = "definition"  # definition | venv-squashfs
    # How an unprivileged user builds a definition: fakeroot (user namespaces), or proot where the
    # site has no fakeroot (LUMI); build_modules put proot on PATH. See inputs.container_build.
    build_privileges: str = "fakeroot"  # fakeroot | proot
    build_modules: list[str] = field(default_factory=list)  # shell commands run before a build
    build_tmpdir: str | None = None  # the runtime's temporary and cache folders during a build
    squashfs_args: list[str] = field(default_factory=list)
    python: str = "python3"
    verl_extras: list[str] = field(default_factory=lambda: ["verl-core"])
    requirements: list[str] = field(default_factory=list)
    constraints: str | None = None  # a pip constraints file in the repository (a lock)
    build_args: list[str] = field(default_factory=list)
    exec_args: list[str] = field(default_factory=list)
    pass_environment: list[str] = field(default_factory=list)  # further host variables a run gets inside


@dataclass(frozen=True)
class Energy(Section):
    """Where a node counts its energy (execution.energy): pm_counters | nvml | none."""

    source: str = "none"
    path: str | None = None  # pm_counters' folder; None: /sys/cray/pm_counters


@dataclass(frozen=True)
class EngineOptions(Section):
    rollout_enforce_eager: bool | None = None  # None: verl's default
    enforce_eager_reason: str | None = None
    # How verl's Megatron workers build models from Hugging Face weights: megatron-bridge (verl's
    # default, megatron.bridge) or mbridge (vanilla_mbridge=True). None: verl's default.
    megatron_bridge: str | None = None
    # Megatron's fused weight-gradient accumulation (CUDA-only kernel); None: the bridge's default.
    gradient_accumulation_fusion: bool | None = None
    attention_backend: str | None = None  # flash | fused | unfused | local | auto; None: verl's (flash)
    # Whether the site's vLLM can free its memory between generation and training (verl turns sleep
    # mode on by default). unavailable: verl is told not to sleep, and the plan's memory budget
    # counts vLLM's share as held during training (study.memory_budget). None: available.
    sleep_mode: str | None = None  # available | unavailable
    reasons: dict[str, str] = field(default_factory=dict)  # why each option is set, with its source


@dataclass(frozen=True)
class Site(Section):
    name: str = ""
    engine: str = "verl"  # verl | verl-cpu (the real trainer on CPU, rlvr_scaling.engines.cpu)
    scheduler: str = "local"  # slurm | local
    hardware: Hardware = field(default_factory=Hardware)
    slurm: SlurmSite = field(default_factory=SlurmSite)
    launch: Launch = field(default_factory=Launch)
    fabric: Fabric = field(default_factory=Fabric)
    storage: Storage = field(default_factory=Storage)
    container: Container | None = None  # None: runs use this host's Python
    engine_options: EngineOptions = field(default_factory=EngineOptions)
    energy: Energy = field(default_factory=Energy)
    billing: Billing = field(default_factory=Billing)
    # The preflight's engine smoke protects an expensive allocation; where the first run costs what a
    # smoke costs (the local site), it proves nothing more and is not run.
    engine_smoke: bool = True
    environment: dict[str, str] = field(default_factory=dict)  # set in every run; ${NAME} expands at start
    study_overrides: dict[str, Any] = field(default_factory=dict)
    toy_scale: ToyScale | None = None  # how a study of one's own is shrunk here (study/toy_scale.py)

    @property
    def cpu_engine(self) -> bool:
        return self.engine == "verl-cpu"

    def recorded(self) -> dict[str, Any]:
        """The site as a run records it: its facts, not the study it scales down (nor how)."""
        return {key: value for key, value in self.to_dict().items() if key not in ("study_overrides", "toy_scale")}


# The study (config/config.yaml, after the site's study_overrides)


@dataclass(frozen=True)
class StudyName(Section):
    name: str = ""
    title: str = ""  # empty: the bundle calls the study by its name
    authors: list[dict[str, str]] = field(default_factory=list)  # {name, affiliation?, orcid?}
    reference: str | None = None  # config/references/<name>.yaml: the published study it reproduces
    license: str = "CC-BY-4.0"  # SPDX identifier the bundle is published under (CITATION.cff, RO-Crate)


@dataclass(frozen=True)
class Software(Section):
    verl: str = ""


@dataclass(frozen=True)
class Model(Section):
    name: str = ""
    source: str = "huggingface"  # huggingface (downloaded at `revision`) | local (a folder) | tiny (built here)
    revision: str = "main"
    max_context: int = 0
    path: str | None = None  # source local: the folder, relative to the working directory or absolute
    chat_template: str | None = None  # a Jinja file, or a named template (inputs.chat_template.NAMED)

    def folder_name(self) -> str:
        """The model's folder under results/models/<site>/: its name, then a digest of what makes it
        another model (its source and revision, a local folder's path, a supplied chat template; the
        tiny one's context, which sizes it). One folder held every model of a site: a study's own
        model replaced the demo's, and going back made it again (#61)."""
        what: dict[str, Any] = {"name": self.name, "source": self.source, "revision": self.revision}
        if self.source == "tiny":
            what["max_context"] = self.max_context
        if self.source == "local":
            what["path"] = str(self.path)
        if self.chat_template:
            what["chat_template"] = self.chat_template
        return f"{re.sub(r'[^A-Za-z0-9._-]+', '-', self.name).strip('-') or 'model'}-{digest(what, 8)}"


@dataclass(frozen=True)
class Algorithm(Section):
    name: str = "grpo"
    responses_per_prompt: int = 0
    lr: float = 0.0
    steps: int = 0
    warmup_steps: int = 0  # the first steps, left out of every summary


@dataclass(frozen=True)
class Rollout(Section):
    engine: str = "vllm"
    tensor_parallel: int = 1
    data_parallel: int = 1
    gpu_memory_utilization: float = 0.5


@dataclass(frozen=True)
class Training(Section):
    engine: str = "megatron"
    tensor_parallel: int = 1
    pipeline_parallel: int = 1

    @property
    def model_parallel(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    def data_parallel(self, gpus: int) -> int:
        """Megatron's data-parallel size over a run's `gpus` (nodes x GPUs per node): its world size over
        one model replica's tensor x pipeline GPUs (context and expert parallelism are 1 here)."""
        return max(1, gpus // self.model_parallel)


@dataclass(frozen=True)
class Parallel(Section):
    rollout: Rollout = field(default_factory=Rollout)
    training: Training = field(default_factory=Training)


@dataclass(frozen=True)
class Scaling(Section):
    weak_nodes: list[int] = field(default_factory=list)
    strong_nodes: list[int] = field(default_factory=list)
    strong_reference_nodes: int = 1


@dataclass(frozen=True)
class SelectionRule(Section):
    memory_cap_fraction: float = 0.98  # of the site's GPU memory
    tolerance: float = 0.02  # points within this share of the best throughput tie
    # sequential (the study's way: increasing prompts until throughput falls or memory runs out) or grid
    sweep_order: str = "sequential"


@dataclass(frozen=True)
class Estimate(Section):
    startup_minutes: float = 0.0
    time_limit_factor: float = 2.0
    startup_minutes_per_doubling: float = 0.0
    # The hang guard's factor (execution.stall_guard); None: time_limit_factor. A time limit costs only
    # a later start in the queue (a site bills what a job used), a hang holds every node of its run for
    # the guard's whole wait: the guard may be tighter than the limit.
    stall_factor: float | None = None
    min_time_limit_minutes: float = 10.0

    @property
    def guard_factor(self) -> float:
        return self.time_limit_factor if self.stall_factor is None else self.stall_factor


@dataclass(frozen=True)
class Preflight(Section):
    # Steps of the engine smoke (execution/preflight/engine_smoke.py) before any run; 0: none.
    engine_smoke_steps: int = 2


@dataclass(frozen=True)
class AdaptiveSteps(Section):
    enabled: bool = False  # off: every run takes all algorithm.steps (the published study)
    min_measured_steps: int = 8  # steps after the warm-up before a run may stop
    relative_halfwidth: float = 0.05  # stop once the 95% interval of the mean step time is within this share

    def rule(self) -> dict[str, Any] | None:
        """What a run carries (plan.Run.adaptive_steps) and its id hashes: nothing while the count is off."""
        if not self.enabled:
            return None
        return {"min_measured_steps": self.min_measured_steps, "relative_halfwidth": self.relative_halfwidth}


@dataclass(frozen=True)
class Budget(Section):
    node_hours: float | None = None  # None: no limit


@dataclass(frozen=True)
class StudyConfig(Section):
    site: str = "local"
    slurm_account: str | None = None
    only_datasets: list[str] | None = None
    overrides: dict[str, Any] | None = None
    study: StudyName = field(default_factory=StudyName)
    software: Software = field(default_factory=Software)
    model: Model = field(default_factory=Model)
    algorithm: Algorithm = field(default_factory=Algorithm)
    parallel: Parallel = field(default_factory=Parallel)
    datasets: dict[str, Dataset] = field(default_factory=dict)
    scaling: Scaling = field(default_factory=Scaling)
    selection: dict[str, int | None] = field(default_factory=dict)  # pinned prompts per node
    selection_rule: SelectionRule = field(default_factory=SelectionRule)
    estimate: Estimate = field(default_factory=Estimate)
    budget: Budget = field(default_factory=Budget)
    adaptive_steps: AdaptiveSteps = field(default_factory=AdaptiveSteps)
    preflight: Preflight = field(default_factory=Preflight)
