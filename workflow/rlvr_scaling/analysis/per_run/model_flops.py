"""The model's FLOPs per step from its shape, and model FLOPs utilisation (MFU) of our own.

verl's `perf/mfu/*` divides by a peak taken from its own device table, which has no MI250X: on LUMI
the peak is infinite and verl's MFU reads 0. Ours takes the peak from the site file
(`hardware.peak_tflops_bf16`, per GPU as the study counts GPUs: one MI250X GCD) and counts the
model's FLOPs from the shape recorded in the run's job.json.

Counting, after Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM" (SC'21, section 3.4 / appendix: matrix multiplications only, 2 FLOPs per
multiply-add, a backward pass twice its forward, the output layer counted, the embedding lookup not):
  forward FLOPs per token     2 * N_matmul, where
    N_matmul = layers * (hidden * (q + k + v + o) + 3 * hidden * ffn) + vocab * hidden
    (attention projections with grouped KV heads, a gated (SwiGLU) MLP, the output layer)
  forward FLOPs per sequence  2 * layers * heads * head_dim * s^2 for attention over s tokens
    (QK^T and AV on the unmasked half of the causal s x s scores, which is what flash attention
    computes; verl's flops_counter counts the same, while PaLM's 12LHQT counts the masked half too)
verl's own count (verl/utils/flops_counter.py, `_estimate_qwen2_flops`) adds the embedding as a
second vocab x hidden matrix: for Qwen3-8B its dense term is 8.2% above ours.

Per phase: `gen` is one forward over every trajectory's tokens (a KV cache makes prefill plus
decoding one causal forward); `old_log_prob` one forward; `update_actor` forward + backward, three
forwards (one PPO epoch: the study's runs set no other). Recomputation under activation
checkpointing is not model FLOPs (this is MFU, not hardware FLOPs utilisation); weight transfer
(`update_weights`) has none. The per-sequence lengths are not logged: s is the step's mean
trajectory length, so the attention term is a lower bound (short by the lengths' variance); it is
about 2% of the total at GSM8K's lengths and 11% at DAPO-Math's.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr_scaling.analysis.per_run.findings import measured_with, others_line
from rlvr_scaling.measured.metrics_file import is_finite, is_positive_finite
from rlvr_scaling.measured.stats import describe
from rlvr_scaling.study.model_shape import ModelShape

FORMULA = (
    "model FLOPs per step = forwards x (2 x N_matmul x tokens + 2 x layers x heads x head_dim x "
    "trajectories x s^2), N_matmul = layers x (hidden x (q + k + v + o) + 3 x hidden x ffn) + vocab x "
    "hidden, s = mean trajectory length; forwards: gen 1, old_log_prob 1, update_actor 3 "
    "(Narayanan et al. SC'21 counting, causal attention; rlvr_scaling.analysis.per_run.model_flops)"
)
NO_PEAK = "the site file gives no hardware.peak_tflops_bf16"
# Forward passes' worth of FLOPs each phase does per step.
PHASE_FORWARDS = {"gen": 1, "old_log_prob": 1, "update_actor": 3}
# verl's MFU metrics, by the phase they measure.
VERL_MFU_KEYS = {"update_actor": "perf/mfu/actor", "old_log_prob": "perf/mfu/actor_infer"}


def _verl_mean(steps: list[dict[str, Any]], key: str) -> float | None:
    values = [float(s[key]) for s in steps if is_finite(s.get(key))]
    return sum(values) / len(values) if values else None


def not_measured(reason: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "not_measured": reason,
        "by_phase": {},
        "verl": {phase: _verl_mean(steps, key) for phase, key in VERL_MFU_KEYS.items()},
    }


def summarize_mfu(
    steps: list[dict[str, Any]],
    shape_json: dict[str, Any] | None,
    shape_reason: str | None,
    peak_tflops: float | None,
    n_gpus: int,
    trajectories: int,
) -> dict[str, Any]:
    """MFU per phase and per step over the measured `steps` (each a fraction of the peak), beside
    verl's own figures; "not_measured" says why there are none."""
    if peak_tflops is None:
        return not_measured(NO_PEAK, steps)
    if shape_json is None:
        return not_measured(f"no model shape in the run's job.json ({shape_reason or 'not recorded'})", steps)
    shape = ModelShape.from_json(shape_json)
    peak = peak_tflops * 1e12 * n_gpus
    per_phase: dict[str, list[float]] = {phase: [] for phase in (*PHASE_FORWARDS, "step")}
    for s in steps:
        tokens = s.get("perf/total_num_tokens")
        if not is_positive_finite(tokens):
            continue
        forward = shape.forward_flops(float(tokens), trajectories)
        for phase, forwards in PHASE_FORWARDS.items():
            seconds = s.get(f"timing_s/{phase}")
            if is_positive_finite(seconds):
                per_phase[phase].append(forwards * forward / (seconds * peak))
        if is_positive_finite(s.get("timing_s/step")):
            per_phase["step"].append(sum(PHASE_FORWARDS.values()) * forward / (s["timing_s/step"] * peak))
    return {
        "not_measured": None,
        "peak_tflops_per_gpu": peak_tflops,
        "model_forward_flops_per_token": 2 * shape.matmul_params(),
        "formula": FORMULA,
        "by_phase": {phase: describe(values) for phase, values in per_phase.items()},
        "verl": {phase: _verl_mean(steps, key) for phase, key in VERL_MFU_KEYS.items()},
    }


def _percent(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def mfu_findings(summaries: list[Any]) -> list[str]:
    """The report's lines on MFU: how it is counted, per run the step's and each phase's, verl's beside
    them, or why it was not measured. `summaries`: the valid RunSummary records."""
    measured = measured_with(summaries, "mfu")
    if not measured:
        reasons = sorted({s.measured.mfu["not_measured"] for s in summaries if s.measured and s.measured.mfu})
        why = "; ".join(reasons) or "no run's summary has an MFU record (summaries written before it existed)"
        sites = ", ".join(sorted({s.site for s in summaries}))
        return [f"Not measured: {why} (site {sites})."]
    first = measured[0].measured.mfu
    lines = [
        f"Counted from the model's shape, not taken from verl: {first['formula']}. "
        f"Peak {first['peak_tflops_per_gpu']:g} TFLOP/s per GPU (the site's hardware.peak_tflops_bf16). "
        "verl's own perf/mfu figures are beside ours (its device table has no MI250X: on LUMI they read 0)."
    ]
    for s in sorted(measured, key=lambda s: (s.dataset, s.nodes, s.prompts)):
        mfu = s.measured.mfu
        phases = ", ".join(f"{p} {_percent(mfu['by_phase'][p]['mean'])}" for p in PHASE_FORWARDS)
        verl = ", ".join(f"{p} {_percent(v)}" for p, v in mfu["verl"].items() if v is not None) or "none logged"
        lines.append(
            f"{s.dataset}, {s.nodes} node(s), {s.prompts} prompts: step {_percent(mfu['by_phase']['step']['mean'])} "
            f"({phases}); verl: {verl}"
        )
    return lines + others_line(summaries, measured, "mfu", "no MFU record")
