"""MFU of our own (#33): the model's FLOPs from its shape, the site's peak, per phase; verl's beside it.
In the LUMI study's tables and report: tests/test_publish.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from rlvr_scaling.analysis.per_run.model_flops import summarize_mfu
from rlvr_scaling.study.model_shape import ModelShape, model_record

from .study_runs import QWEN3_8B_CONFIG

QWEN3_8B = json.loads(QWEN3_8B_CONFIG.read_text())


def test_qwen3_8b_parameters_match_its_model_card() -> None:
    # Independent figures: the Qwen3-8B model card gives 8.2B parameters, 6.95B of them non-embedding.
    # The layers' matrices are the non-embedding parameters but for the norms (~0.3M): within the
    # card's rounding. All parameters: the layers plus the input embedding and the untied output layer.
    shape = ModelShape.from_hf_config(QWEN3_8B)
    assert abs(shape.layer_matmul_params() - 6.95e9) < 0.005e9
    assert round((shape.layer_matmul_params() + 2 * shape.vocab_size * shape.hidden_size) / 1e9, 1) == 8.2
    # The count multiplies by the output layer, not by the embedding lookup.
    assert shape.matmul_params() == shape.layer_matmul_params() + 151936 * 4096


def test_training_flops_are_verls_count_less_the_embedding_verl_adds() -> None:
    # verl's own counter (the installed verl 0.9.1), on the same shape and batch: it counts the
    # embedding as a second vocab x hidden matrix (6 FLOPs per token per weight in training); the rest
    # (the layers, the output layer, causal attention) is the same count.
    from verl.utils.flops_counter import _estimate_qwen2_flops

    shape = ModelShape.from_hf_config(QWEN3_8B)
    sequences, length = 800, 850
    tokens = sequences * length
    verl_tflops_per_s = _estimate_qwen2_flops(SimpleNamespace(**QWEN3_8B), tokens, [length] * sequences, 1.0)
    ours = 3 * shape.forward_flops(tokens, sequences)
    assert math.isclose(ours, verl_tflops_per_s * 1e12 - 6 * 151936 * 4096 * tokens, rel_tol=1e-12)


TINY = {
    "model_type": "qwen3",
    "hidden_size": 2,
    "intermediate_size": 3,
    "num_hidden_layers": 1,
    "num_attention_heads": 1,
    "num_key_value_heads": 1,
    "head_dim": 2,
    "vocab_size": 5,
}


def test_mfu_per_phase_from_a_shape_worked_by_hand() -> None:
    # N_matmul = 1 x (2 x (2+2+2+2) + 3 x 2 x 3) + 5 x 2 = 44. Two sequences of 5 tokens, one forward:
    # 2 x 44 x 10 + 2 x 1 x 1 x 2 x 2 x 5^2 = 880 + 200 = 1080 FLOPs. Peak 1e-9 TFLOP/s = 1000 FLOP/s per
    # GPU, 2 GPUs: gen (1 forward) in 0.54 s is 1.0; old_log_prob (1) in 2.16 s and update_actor (3)
    # in 6.48 s are 0.25; the step (5 forwards) in 10.8 s is 0.25.
    shape = asdict_shape(TINY)
    step = {
        "step": 2,
        "perf/total_num_tokens": 10,
        "timing_s/gen": 0.54,
        "timing_s/old_log_prob": 2.16,
        "timing_s/update_actor": 6.48,
        "timing_s/step": 10.8,
        "perf/mfu/actor": 0.125,
    }
    mfu = summarize_mfu([step], shape, None, 1e-9, n_gpus=2, trajectories=2)
    assert mfu["not_measured"] is None and mfu["model_forward_flops_per_token"] == 88
    means = {phase: value["mean"] for phase, value in mfu["by_phase"].items()}
    assert means == pytest.approx({"gen": 1.0, "old_log_prob": 0.25, "update_actor": 0.25, "step": 0.25}, rel=1e-12)
    # verl's figures are carried as logged, beside ours; one it did not log is None.
    assert mfu["verl"] == {"update_actor": 0.125, "old_log_prob": None}


def asdict_shape(config: dict) -> dict:
    from dataclasses import asdict

    return asdict(ModelShape.from_hf_config(config))


def test_mfu_is_not_measured_without_a_peak_or_a_shape_and_says_why() -> None:
    step = {"step": 2, "perf/total_num_tokens": 10, "timing_s/step": 1.0, "perf/mfu/actor": 0.3}
    no_peak = summarize_mfu([step], asdict_shape(TINY), None, None, 1, 2)
    assert no_peak["not_measured"] == "the site file gives no hardware.peak_tflops_bf16" and no_peak["by_phase"] == {}
    assert no_peak["verl"]["update_actor"] == 0.3  # verl's is still there (a CPU has an entry in its table)
    no_shape = summarize_mfu([step], None, "no /x/config.json", 191.5, 8, 2)
    assert no_shape["not_measured"] == "no model shape in the run's job.json (no /x/config.json)"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"model_type": "qwen3_moe"}, "model_type 'qwen3_moe'"),
        ({"num_hidden_layers": 0}, "config.json num_hidden_layers: 0, expected a positive integer"),
        ({"hidden_size": "4096"}, "config.json hidden_size: '4096', expected a positive integer"),
    ],
)
def test_a_model_the_count_does_not_fit_is_recorded_with_the_reason(tmp_path: Path, change, reason) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**QWEN3_8B, **change}))
    record = model_record(config)
    assert record["shape"] is None and record["reason"].startswith(reason), record
    assert model_record(tmp_path / "absent.json") == {"shape": None, "reason": f"no {tmp_path / 'absent.json'}"}
