"""Per-GPU memory of a planned run: does vLLM's share fit beside Megatron's training state?

verl runs generation (vLLM) and training (Megatron) on the same GPUs, one after the other. vLLM takes
`gpu_memory_utilization` of each GPU's memory (its weights, activations and KV cache); between
phases its sleep mode frees that share, if the site's vLLM can (site `engine_options.sleep_mode`).
Where it cannot (LUMI's MI250X with the AI Factory base's vLLM: docs/study.md, "Memory per GCD"),
the share stays allocated while Megatron trains beside it, and the two must fit together.

Every figure is in GB (1e9 bytes), whatever unit the site states its GPUs' memory in
(`hardware.gpu_memory_unit`): vLLM's share and the cap are fractions of the device's bytes, so a GCD
of 64 GiB gives 0.4 x 68.72 = 27.49 GB, not 0.4 x 64 = 25.6.

The counts (bytes per GPU; docs/study.md gives the sources):
- Megatron's state, per GPU of a tensor-parallel group t and pipeline stage p (verl's defaults:
  mixed precision with fp32 gradients, `grad_reduce_in_fp32`; the distributed optimizer,
  `use_distributed_optimizer`, shards Adam over the data-parallel ranks d):
  parameters P/(t p) x (2 bf16 weights + 4 fp32 gradients + 12/d fp32 master weights and Adam's two
  moments).
- Activations of one micro-batch of `token_budget` tokens (dynamic batch size), sequence parallel
  (verl's default: everything divided by t), flash attention (no s^2 term), after Korthikanti et al.
  "Reducing Activation Recomputation in Large Transformer Models" (MLSys 2023), adapted to grouped
  KV heads and a gated MLP: per token and layer, bytes = 14 h + 4 kv_heads head_dim + 8 ffn.
  Full recomputation keeps each layer's input (2 h) and one layer's activations.
- Logits of the micro-batch: tokens x vocab / t x 10 bytes (bf16 logits, their fp32 copy for the
  log-probabilities and its gradient).
- Each GPU also holds two processes' device contexts and communication buffers: CONTEXT_GB.
The two peaks: generation (vLLM's share + what Megatron keeps on the GPU: nothing with CPU offload)
and training (what vLLM keeps: its share without sleep mode, else its context + Megatron's state,
activations and logits). Both must stay under the selection rule's memory cap.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.model_shape import ModelShape
from rlvr_scaling.study.sections import Model, Site

GB = 1e9
# Bytes in one unit a site may state its GPUs' memory in (site hardware.gpu_memory_unit). GPU makers
# size HBM in binary units while writing GB: an MI250X GCD's "64 GB" is 64 GiB (the device reports
# 68,702,699,520 bytes, 16 MiB under it), an A100's "80 GB" 80 GiB.
UNIT_BYTES: dict[str, int] = {"GB": 10**9, "GiB": 2**30}
# Device contexts (vLLM's and Megatron's processes) and RCCL/NCCL buffers per GPU: an allowance, not
# a measurement; the engine smoke's record (device memory around sleep/wake) measures the real one.
CONTEXT_GB = 2.0
# Bytes per parameter: bf16 weights, fp32 gradients, fp32 master weights + Adam's two moments.
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2, 4, 12
LOGIT_BYTES = 10
# Shapes of hub models shipped with the pipeline, for a plan made before the model is downloaded.
SHAPES_DIR = paths.CONFIG_DIR / "models"


@dataclass(frozen=True)
class RunMemory:
    """One run's memory per GPU, in GB (1e9 bytes); the GPU's size also as the site states it."""

    gpu_memory: float  # the GPU's size in gpu_memory_unit (site hardware.gpu_memory_gb)
    gpu_memory_unit: str  # GiB | GB (site hardware.gpu_memory_unit)
    gpu_bytes: int
    gpu_gb: float
    cap_fraction: float
    cap_gb: float  # cap_fraction x the GPU's bytes
    sleep_mode: bool
    rollout_share: float  # vLLM's gpu_memory_utilization
    rollout_share_gb: float  # that fraction of the GPU's bytes, as vLLM takes it
    rollout_in_training_gb: float  # what vLLM holds while Megatron trains
    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    activations_gb: float
    logits_gb: float
    context_gb: float
    generation_peak_gb: float
    training_peak_gb: float
    kv_cache_tokens: int  # tokens one rollout engine's KV cache holds
    kv_tokens_needed: int  # its concurrent trajectories x their longest length

    @property
    def megatron_state_gb(self) -> float:
        """Megatron's weights, gradients and optimizer state, as the plan's table prints them."""
        return round(self.weights_gb + self.gradients_gb + self.optimizer_gb, 2)

    @property
    def fits(self) -> bool:
        # Decided on the figures as printed (0.01 GB): a peak the table shows equal to the cap fits.
        return max(self.generation_peak_gb, self.training_peak_gb) <= self.cap_gb and self.kv_cache_tokens > 0

    def device_text(self) -> str:
        """The GPU's size as the site states it and in GB: '64 GiB = 68.72 GB', or '80 GB'."""
        stated = f"{self.gpu_memory:g} {self.gpu_memory_unit}"
        return stated if self.gpu_memory_unit == "GB" else f"{stated} = {self.gpu_gb:g} GB"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "megatron_state_gb": self.megatron_state_gb, "fits": self.fits}


def device_bytes(size: float, unit: str) -> int:
    """A GPU's memory in bytes from its size in the site's unit: what vLLM's gpu_memory_utilization and
    the memory cap take fractions of."""
    if unit not in UNIT_BYTES:
        raise ConfigError("hardware.gpu_memory_unit", unit, f"it must be one of {', '.join(UNIT_BYTES)}", "site")
    return round(size * UNIT_BYTES[unit])


@functools.lru_cache(maxsize=16)
def _read_shape(path: str, mtime_ns: int) -> tuple[ModelShape | None, str]:
    """One read per file and version: the plan asks for every run, and Snakemake's resources for every job."""
    try:
        return ModelShape.from_hf_config(json.loads(Path(path).read_text())), path
    except (ValueError, UnicodeDecodeError) as error:
        return None, f"{path}: {error}"


def shape_for(model: Model, root: Path, site: str) -> tuple[ModelShape | None, str]:
    """The model's shape: a local folder's config.json (model.source local), the downloaded one, else
    the one shipped for that hub id (config/models/<org>__<name>.json); None and why when none is there."""
    candidates = [
        paths.model_dir(root, site, model.folder_name()) / "config.json",
        SHAPES_DIR / f"{model.name.replace('/', '__')}.json",
    ]
    if model.source == "local" and model.path:
        folder = Path(model.path)
        candidates.insert(0, (folder if folder.is_absolute() else root / folder) / "config.json")
    for path in candidates:
        if path.is_file():
            return _read_shape(str(path), path.stat().st_mtime_ns)
    return None, f"no config.json for {model.name} (download the model, or ship {SHAPES_DIR}/<org>__<name>.json)"


def parameters(shape: ModelShape) -> int:
    """All parameters: the layers' matrices and norms, the embedding and an untied output layer."""
    norms = shape.num_hidden_layers * (2 * shape.hidden_size + 2 * shape.head_dim) + shape.hidden_size
    return shape.layer_matmul_params() + 2 * shape.vocab_size * shape.hidden_size + norms


def activation_gb(
    shape: ModelShape, token_budget: int, tensor_parallel: int, pipeline_parallel: int, recompute: bool
) -> float:
    """Activations one GPU holds for a micro-batch of `token_budget` tokens over its pipeline stage's
    layers: every layer's with no recomputation, else each layer's input and one layer's."""
    h = shape.hidden_size
    per_token_layer = 14 * h + 4 * shape.num_key_value_heads * shape.head_dim + 8 * shape.intermediate_size
    stage_layers = math.ceil(shape.num_hidden_layers / pipeline_parallel)
    if recompute:
        return token_budget * (stage_layers * 2 * h + per_token_layer) / tensor_parallel / GB
    return token_budget * stage_layers * per_token_layer / tensor_parallel / GB


def run_memory(
    shape: ModelShape,
    *,
    gpu_memory: float,
    gpu_memory_unit: str,
    cap_fraction: float,
    sleep_mode: bool,
    rollout_share: float,
    rollout_tensor_parallel: int,
    training_tensor_parallel: int,
    pipeline_parallel: int,
    data_parallel: int,
    token_budget: int,
    recompute: bool,
    offload: bool,
    trajectories_per_engine: float,
    max_length: int,
) -> RunMemory:
    device = device_bytes(gpu_memory, gpu_memory_unit)
    t, p = training_tensor_parallel, pipeline_parallel
    params_per_gpu = parameters(shape) / (t * p)
    weights = params_per_gpu * WEIGHT_BYTES / GB
    gradients = params_per_gpu * GRADIENT_BYTES / GB
    optimizer = params_per_gpu * OPTIMIZER_BYTES / data_parallel / GB
    layers = shape.num_hidden_layers
    activations = activation_gb(shape, token_budget, t, p, recompute)
    logits = token_budget * shape.vocab_size / t * LOGIT_BYTES / GB
    share = rollout_share * device / GB
    in_training = 0.0 if sleep_mode else share
    megatron_state = weights + gradients + optimizer
    generation = share + (0.0 if offload else megatron_state) + CONTEXT_GB
    training = in_training + megatron_state + activations + logits + CONTEXT_GB
    # vLLM's KV cache: its share less its weights (split over the engine's tensor-parallel GPUs) and
    # an activation workspace of about 1 GB; K and V of every layer, the KV heads split likewise.
    kv_heads_per_gpu = max(1, shape.num_key_value_heads // rollout_tensor_parallel)
    kv_bytes_per_token = 2 * layers * kv_heads_per_gpu * shape.head_dim * 2
    rollout_weights = parameters(shape) * WEIGHT_BYTES / rollout_tensor_parallel / GB
    kv_gb = share - rollout_weights - 1.0
    return RunMemory(
        gpu_memory=gpu_memory,
        gpu_memory_unit=gpu_memory_unit,
        gpu_bytes=device,
        gpu_gb=round(device / GB, 2),
        cap_fraction=cap_fraction,
        cap_gb=round(cap_fraction * device / GB, 2),
        sleep_mode=sleep_mode,
        rollout_share=rollout_share,
        rollout_share_gb=round(share, 2),
        rollout_in_training_gb=round(in_training, 2),
        weights_gb=round(weights, 2),
        gradients_gb=round(gradients, 2),
        optimizer_gb=round(optimizer, 2),
        activations_gb=round(activations, 2),
        logits_gb=round(logits, 2),
        context_gb=CONTEXT_GB,
        generation_peak_gb=round(generation, 2),
        training_peak_gb=round(training, 2),
        kv_cache_tokens=max(0, int(kv_gb * GB / kv_bytes_per_token)),
        kv_tokens_needed=int(math.ceil(trajectories_per_engine) * max_length),
    )


def largest_fitting_share(fit: Callable[[float], bool], start: float) -> float | None:
    """The largest rollout share, in steps of 0.05 below `start`, for which `fit(share)` holds."""
    share = round(math.floor(start * 20 - 1e-9) / 20, 2)
    while share >= 0.1:
        if fit(share):
            return share
        share = round(share - 0.05, 2)
    return None


def refusal(dataset: str, nodes: int, trajectories: int, memory: RunMemory, fixes: list[str], site: str) -> ConfigError:
    """A run that does not fit: the part that does not, and the settings that would."""
    if memory.kv_cache_tokens <= 0:
        what = f"vLLM's share of {memory.rollout_share_gb:g} GB holds its weights but no KV cache: vLLM would not start"
    elif memory.training_peak_gb >= memory.generation_peak_gb:
        held = (
            f"vLLM's {memory.rollout_in_training_gb:g} GB stays allocated (site '{site}' engine_options.sleep_mode: "
            "unavailable) beside "
            if not memory.sleep_mode
            else ""
        )
        what = (
            f"training needs {memory.training_peak_gb:g} GB of the GPU's cap of {memory.cap_gb:g} GB: {held}Megatron's "
            f"weights {memory.weights_gb:g}, gradients {memory.gradients_gb:g}, optimizer {memory.optimizer_gb:g}, "
            f"activations {memory.activations_gb:g} and logits {memory.logits_gb:g} GB"
        )
    else:
        what = (
            f"generation needs {memory.generation_peak_gb:g} GB of the GPU's cap of {memory.cap_gb:g} GB: vLLM's "
            f"share {memory.rollout_share_gb:g} GB beside Megatron's state kept on the GPU"
        )
    would = "; would fit: " + ", or ".join(fixes) if fixes else "; no single memory setting makes it fit"
    return ConfigError(
        f"datasets.{dataset}.memory",
        {"nodes": nodes, "trajectories": trajectories},
        f"the run does not fit a GPU's memory: {what}{would} (rlvr-scaling plan shows every run's memory)",
    )


def sleep_mode_available(site: Site) -> bool:
    """verl turns vLLM's sleep mode on by default; a site says when its vLLM cannot free memory."""
    return site.engine_options.sleep_mode != "unavailable"


def memory_of(
    study: Study, dataset: str, nodes: int, trajectories_per_engine: float, root: Path, **changed: Any
) -> RunMemory | None:
    """A run's memory per GPU on a GPU site whose model shape is known, else None. `changed` tries
    another setting (rollout_share, recompute, offload, sleep_mode) in place of the study's."""
    memory, _ = memory_or_reason(study, dataset, nodes, trajectories_per_engine, root, **changed)
    return memory


def memory_or_reason(
    study: Study, dataset: str, nodes: int, trajectories_per_engine: float, root: Path, **changed: Any
) -> tuple[RunMemory | None, str]:
    """memory_of's answer, and when it is None, why no budget is computed."""
    site, cfg = study.site, study.config
    if site.cpu_engine:
        return None, f"site '{study.site_name}' runs the CPU engine: no GPU memory to budget"
    if not site.hardware.gpu_memory_gb:
        return None, f"site '{study.site_name}' states no hardware.gpu_memory_gb"
    shape, why = shape_for(cfg.model, root, site.name)
    if shape is None:
        return None, why
    data = cfg.datasets[dataset]
    rollout, training = cfg.parallel.rollout, cfg.parallel.training
    share = (
        rollout.gpu_memory_utilization
        if data.memory.gpu_memory_utilization is None
        else data.memory.gpu_memory_utilization
    )
    settings = {
        "sleep_mode": sleep_mode_available(site),
        "rollout_share": share,
        "recompute": data.memory.recompute,
        "offload": data.memory.offload,
        **changed,
    }
    memory = run_memory(
        shape,
        gpu_memory=site.hardware.gpu_memory_gb,
        gpu_memory_unit=site.hardware.gpu_memory_unit,
        cap_fraction=cfg.selection_rule.memory_cap_fraction,
        rollout_tensor_parallel=rollout.tensor_parallel,
        training_tensor_parallel=training.tensor_parallel,
        pipeline_parallel=training.pipeline_parallel,
        data_parallel=training.data_parallel(nodes * site.hardware.gpus_per_node),
        token_budget=data.memory.token_budget,
        trajectories_per_engine=trajectories_per_engine,
        max_length=data.max_length,
        **settings,
    )
    return memory, ""


def check_run_memory(
    study: Study, dataset: str, nodes: int, trajectories: int, per_engine: float, root: Path
) -> RunMemory | None:
    """The run's memory; a ConfigError naming the part that does not fit and the settings that would."""
    memory = memory_of(study, dataset, nodes, per_engine, root)
    if memory is None or memory.fits:
        return memory
    key = f"datasets.{dataset}.memory"

    def fits(**changed: Any) -> bool:
        trial = memory_of(study, dataset, nodes, per_engine, root, **changed)
        return trial is not None and trial.fits

    data = study.config.datasets[dataset].memory
    fixes = []
    share = largest_fitting_share(lambda u: fits(rollout_share=u), memory.rollout_share)
    if share is not None:
        fixes.append(f"{key}.gpu_memory_utilization: {share}")
    if not data.recompute and fits(recompute=True):
        fixes.append(f"{key}.recompute: true")
    if not data.offload and fits(offload=True):
        fixes.append(f"{key}.offload: true")
    if not memory.sleep_mode and fits(sleep_mode=True):
        fixes.append("a vLLM whose sleep mode frees memory here (site engine_options.sleep_mode: available)")
    raise refusal(dataset, nodes, trajectories, memory, fixes, study.site_name)
