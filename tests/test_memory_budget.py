"""The per-GPU memory budget of every planned run (study.memory_budget): what it counts, where it
refuses, the unit a site states its GPUs in, and the LUMI settings that make all 18 published runs
fit without vLLM's sleep mode."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.memory_budget import SHAPES_DIR, memory_of, parameters, run_memory
from rlvr_scaling.study.model_shape import ModelShape
from rlvr_scaling.study.plan import build_plan, known_runs

from .study_edits import edited

QWEN3_8B = ModelShape.from_hf_config(json.loads((SHAPES_DIR / "Qwen__Qwen3-8B.json").read_text()))
PUBLISHED = ["selection={gsm8k: 100, dapo_math: 10}"]


@pytest.fixture(autouse=True)
def _account(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVR_SLURM_ACCOUNT", "project_465000000")


def test_parameters_of_qwen3_8b_are_the_model_cards() -> None:
    # 36 layers x (q, k, v, o: 4096 x (4096 + 1024 + 1024 + 4096); gated MLP 3 x 4096 x 12288; two
    # norms of 4096 and the q/k norms of 128) + untied embedding and output (2 x 151936 x 4096) + the
    # final norm: 8,190,735,360, the safetensors index's total of Qwen/Qwen3-8B.
    assert parameters(QWEN3_8B) == 8_190_735_360


def small_run(**changed: object) -> dict[str, object]:
    # A model whose numbers are easy by hand: 1e9 parameters' worth of shape is not needed, only the
    # formula's parts. hidden 1000, ffn 3000, 10 layers, 10 heads of 100 (KV 10), vocab 10000.
    shape = ModelShape("qwen3", 1000, 3000, 10, 10, 10, 100, 10000)
    settings = {
        "gpu_memory": 10.0,
        "gpu_memory_unit": "GB",
        "cap_fraction": 1.0,
        "sleep_mode": False,
        "rollout_share": 0.5,
        "rollout_tensor_parallel": 1,
        "training_tensor_parallel": 1,
        "pipeline_parallel": 1,
        "data_parallel": 1,
        "token_budget": 1000,
        "recompute": False,
        "offload": False,
        "trajectories_per_engine": 4,
        "max_length": 100,
    }
    return {"shape": shape, **settings, **changed}


def memory(**changed: object):
    settings = small_run(**changed)
    return run_memory(settings.pop("shape"), **settings)


def test_each_part_counted_by_hand() -> None:
    # parameters: 10 x (1000 x 4000 + 3 x 1000 x 3000 + 2000 + 200) + 2 x 10000 x 1000 + 1000 = 150,023,000
    m = memory()
    assert m.weights_gb == pytest.approx(0.30, abs=0.005)  # x 2 bytes
    assert m.gradients_gb == pytest.approx(0.60, abs=0.005)  # x 4
    assert m.optimizer_gb == pytest.approx(1.80, abs=0.005)  # x 12
    # 1000 tokens x 10 layers x (14 x 1000 + 4 x 10 x 100 + 8 x 3000 = 42,000 bytes) = 0.42 GB
    assert m.activations_gb == pytest.approx(0.42, abs=0.005)
    assert m.logits_gb == pytest.approx(0.10, abs=0.005)  # 1000 x 10000 x 10 bytes
    # Without sleep mode vLLM's 5 GB stays: 5 + 2.7 + 0.42 + 0.1 + 2 (contexts) = 10.22 > 10
    assert m.rollout_in_training_gb == 5.0 and m.training_peak_gb == pytest.approx(10.22, abs=0.01)
    assert not m.fits
    # With sleep mode it does not: 5.22; generation 5 + 2.7 + 2 = 9.7
    slept = memory(sleep_mode=True)
    assert slept.training_peak_gb == pytest.approx(5.22, abs=0.01) and slept.fits
    assert slept.generation_peak_gb == pytest.approx(9.70, abs=0.01)


def test_the_cap_is_inclusive_and_one_step_over_refuses() -> None:
    # Training peak 10.22 GB: a cap of exactly 10.22 fits, 10.21 does not.
    assert memory(cap_fraction=1.022).fits
    assert not memory(cap_fraction=1.021).fits


def test_a_gib_gpu_gives_vllm_and_the_cap_fractions_of_its_bytes() -> None:
    # 10 GiB = 10,737,418,240 bytes = 10.74 GB: vLLM's half is 5.37 GB (5.0 for a 10 GB GPU) and the
    # training peak 5.3687 + 2.7004 + 0.42 + 0.1 + 2 = 10.589 GB; Megatron's parts do not change.
    gib, gb = memory(gpu_memory_unit="GiB"), memory()
    assert gib.gpu_bytes == 10_737_418_240 and gib.gpu_gb == 10.74 and gb.gpu_bytes == 10_000_000_000
    assert gib.rollout_share_gb == 5.37 and gib.rollout_in_training_gb == 5.37 and gb.rollout_share_gb == 5.0
    assert gib.training_peak_gb == 10.59 and gib.weights_gb == gb.weights_gb
    assert gib.cap_gb == 10.74 and gib.fits  # cap 1.0 x 10.74 GB; the same run misses a 10 GB GPU
    assert not gb.fits
    # The cap in GB is cap_fraction x the bytes: a peak equal to it fits, 0.01 GB over does not.
    at_cap = memory(gpu_memory_unit="GiB", cap_fraction=10.59e9 / 10_737_418_240)
    assert at_cap.cap_gb == 10.59 and at_cap.fits
    over = memory(gpu_memory_unit="GiB", cap_fraction=10.58e9 / 10_737_418_240)
    assert over.cap_gb == 10.58 and not over.fits
    assert dataclasses.replace(gib, cap_gb=gib.training_peak_gb).fits
    assert not dataclasses.replace(gib, cap_gb=round(gib.training_peak_gb - 0.01, 2)).fits


def test_an_unknown_unit_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError) as refused:
        memory(gpu_memory_unit="GIB")
    assert refused.value.key == "hardware.gpu_memory_unit" and "'GIB'" in str(refused.value)
    assert "GB, GiB" in str(refused.value)


def test_recompute_offload_and_data_parallel_shrink_their_parts() -> None:
    base = memory()
    # Full recomputation: each layer's input (2 x 1000 bytes a token) and one layer: 1000 x (10 x 2000 + 42000)
    recomputed = memory(recompute=True).activations_gb
    assert recomputed == pytest.approx(0.062, abs=0.005) and recomputed < base.activations_gb
    # Offload takes Megatron's state off the GPU during generation only.
    offloaded = memory(offload=True)
    assert offloaded.generation_peak_gb == pytest.approx(7.0, abs=0.01)
    assert offloaded.training_peak_gb == base.training_peak_gb
    # The distributed optimizer shards Adam over the data-parallel ranks; weights and gradients stay.
    sharded = memory(data_parallel=4)
    assert sharded.optimizer_gb == pytest.approx(0.45, abs=0.005) and sharded.weights_gb == base.weights_gb


def test_no_kv_cache_left_means_no_fit() -> None:
    # A share of 0.13 x 10 GB = 1.3 GB holds the 0.3 GB of weights and 1 GB of workspace, nothing more.
    m = memory(rollout_share=0.13, sleep_mode=True)
    assert m.kv_cache_tokens == 0 and not m.fits


def test_lumi_all_published_runs_fit_without_sleep_mode(tmp_path: Path) -> None:
    study = load_study(site="lumi", sets=PUBLISHED)
    assert study.site.engine_options.sleep_mode == "unavailable"
    runs = known_runs(build_plan(study, root=tmp_path))
    assert len(runs) == 18
    # verl is told that vLLM keeps its memory.
    for run in runs:
        assert "+actor_rollout_ref.rollout.enable_sleep_mode=False" in run.verl_args
        assert "actor_rollout_ref.rollout.free_cache_engine=False" in run.verl_args


def test_lumi_refuses_gsm8k_at_the_default_share_naming_what_would_fit(tmp_path: Path) -> None:
    share = 'overrides={"datasets.gsm8k.memory.gpu_memory_utilization": 0.6}'
    study = load_study(site="lumi", sets=[*PUBLISHED, share])
    with pytest.raises(ConfigError) as refused:
        build_plan(study, root=tmp_path)
    message = str(refused.value)
    # 0.6 x 64 GiB = 0.6 x 68.72 = 41.23 GB held beside Megatron's 18.44 + 11.78 + 3.11 + 2: 76.55 GB
    # (76.56 from the rounded parts) over 0.98 x 68.72 = 67.35. At 0.45 (30.92 GB) the peak is 66.24:
    # the largest share that fits.
    assert "datasets.gsm8k.memory" in message and "41.23 GB stays allocated" in message
    assert "training needs 76.55 GB of the GPU's cap of 67.35 GB" in message
    assert "gpu_memory_utilization: 0.45" in message


def test_a_site_whose_vllm_sleeps_holds_nothing_in_training(tmp_path: Path) -> None:
    study = load_study(site="lumi", sets=PUBLISHED)
    held = memory_of(study, "gsm8k", 1, 400, tmp_path)
    slept = memory_of(study, "gsm8k", 1, 400, tmp_path, sleep_mode=True)
    assert held.rollout_in_training_gb == 27.49 and slept.rollout_in_training_gb == 0.0
    assert held.training_peak_gb - slept.training_peak_gb == pytest.approx(27.49, abs=0.01)


def test_lumis_gcd_is_64_gib_and_vllms_shares_are_fractions_of_its_bytes(tmp_path: Path) -> None:
    study = load_study(site="lumi", sets=PUBLISHED)
    gsm8k = memory_of(study, "gsm8k", 1, 400, tmp_path)
    dapo = memory_of(study, "dapo_math", 1, 40, tmp_path)
    # 64 x 2**30 = 68,719,476,736 bytes = 68.72 GB; 0.4 x that = 27.49 GB, 0.6 x = 41.23 GB, the cap
    # 0.98 x = 67.35 GB (not 25.6, 38.4 and 62.72: 64 read as GB).
    assert (gsm8k.gpu_memory, gsm8k.gpu_memory_unit, gsm8k.gpu_bytes) == (64, "GiB", 68_719_476_736)
    assert gsm8k.gpu_gb == 68.72 and gsm8k.cap_gb == 67.35 and dapo.cap_gb == 67.35
    assert gsm8k.rollout_share_gb == 27.49 and dapo.rollout_share_gb == 41.23
    # GSM8K's training peak: 27.49 + 18.44 + 11.78 + 3.11 + 2 = 62.81 (62.82 from the rounded parts)
    assert gsm8k.training_peak_gb == pytest.approx(62.81, abs=0.015) and gsm8k.fits
    # DAPO's: 41.23 + 18.44 + 0.58 + 1.94 + 2 = 64.19
    assert dapo.training_peak_gb == pytest.approx(64.19, abs=0.015) and dapo.fits
    assert gsm8k.device_text() == "64 GiB = 68.72 GB"


def test_a_gb_site_keeps_the_figures_it_had(tmp_path: Path) -> None:
    # The same GPU stated as 64 GB (the unit the budget took before sites stated one): 0.4 x 64 = 25.6.
    study = edited(load_study(site="lumi", sets=PUBLISHED), site={"hardware": {"gpu_memory_unit": "GB"}})
    gsm8k = memory_of(study, "gsm8k", 1, 400, tmp_path)
    dapo = memory_of(study, "dapo_math", 1, 40, tmp_path)
    assert gsm8k.gpu_bytes == 64_000_000_000 and gsm8k.cap_gb == 62.72 and gsm8k.device_text() == "64 GB"
    assert gsm8k.rollout_share_gb == 25.6 and dapo.rollout_share_gb == 38.4
    assert gsm8k.training_peak_gb == pytest.approx(60.92, abs=0.015)


def test_cpu_sites_have_no_budget(tmp_path: Path) -> None:
    assert memory_of(load_study(site="local"), "gsm8k", 1, 4, tmp_path) is None
