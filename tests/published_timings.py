"""The published LUMI study's timings, per run, as the tests' fabricated study and the rehearsal's
stand-in trainer (tests/rehearsal) step at them: the phases of each run's step, its peak memory, its
token counts, a warm-up step, and verl's file-logger record of each step. The standard library only:
the stand-in trainer imports it in every run.
"""

from __future__ import annotations

import math
import random
from typing import Any

PHASE_KEYS = ("gen", "old_log_prob", "update_actor", "update_weights")
# Mean seconds per measured step of (gen, old_log_prob, update_actor, update_weights, rest), keyed by
# (dataset, nodes, prompts), shaped like the published series (docs/study.md): GSM8K weak
# 192 -> 247.6 s, strong 4 -> 16 nodes 204 -> 72 s; DAPO weak 300 -> 312.3 s, strong 309 -> 165 s.
PROFILES: dict[tuple[str, int, int], tuple[float, float, float, float, float]] = {
    # GSM8K sweep on one node (100 prompts is the 1-node weak run below); 200 prompts runs out of memory
    ("gsm8k", 1, 25): (20.0, 10.0, 22.0, 6.0, 12.0),
    ("gsm8k", 1, 50): (30.0, 20.0, 43.0, 6.0, 11.0),
    ("gsm8k", 1, 150): (70.0, 57.0, 124.0, 6.0, 18.0),
    # GSM8K weak (100 prompts per node)
    ("gsm8k", 1, 100): (48.0, 38.0, 84.0, 6.0, 16.0),
    ("gsm8k", 2, 200): (49.5, 39.0, 85.0, 6.5, 16.0),
    ("gsm8k", 4, 400): (52.0, 40.5, 88.0, 7.0, 16.5),
    ("gsm8k", 8, 800): (56.0, 43.5, 93.0, 8.0, 17.5),
    ("gsm8k", 16, 1600): (62.6, 49.0, 106.0, 10.0, 20.0),
    # GSM8K strong (400 prompts; the 4-node run is the weak one)
    ("gsm8k", 1, 400): (196.0, 160.0, 345.0, 6.0, 63.0),
    ("gsm8k", 2, 400): (100.0, 80.0, 172.0, 6.5, 37.5),
    ("gsm8k", 8, 400): (33.0, 22.0, 46.0, 8.0, 9.0),
    # 16 nodes: 72 s, of which log-probabilities and update 43 s (60%); generation 60% of the extra
    # time over ideal scaling from 4 nodes (config/references/lumi-rlvr-blog.yaml)
    ("gsm8k", 16, 400): (25.6, 14.0, 29.0, 2.0, 1.4),
    # DAPO's one-node sweep (the rehearsal's; the fabricated study pins 10 prompts): 5 prompts gives 6%
    # less throughput per GPU than the published 10, 15 more but over the memory cap, 20 never runs
    ("dapo_math", 1, 5): (82.0, 23.0, 38.0, 6.0, 11.0),
    ("dapo_math", 1, 15): (200.0, 67.0, 127.0, 6.0, 20.0),
    ("dapo_math", 1, 20): (240.0, 90.0, 170.0, 6.0, 24.0),
    # DAPO weak (10 prompts per node)
    ("dapo_math", 1, 10): (150.0, 45.0, 85.0, 6.0, 14.0),
    ("dapo_math", 2, 20): (151.0, 45.5, 85.5, 6.2, 13.8),
    ("dapo_math", 4, 40): (155.0, 46.5, 87.0, 6.5, 14.0),
    ("dapo_math", 8, 80): (153.0, 46.0, 86.5, 6.5, 14.0),
    ("dapo_math", 16, 160): (158.0, 47.0, 87.5, 6.8, 13.0),
    # DAPO strong (40 prompts)
    ("dapo_math", 1, 40): (560.0, 182.0, 345.0, 6.0, 127.0),
    ("dapo_math", 2, 40): (290.0, 92.0, 174.0, 6.2, 52.8),
    ("dapo_math", 8, 40): (118.0, 24.0, 45.0, 7.0, 21.0),
    # 16 nodes: 165 s, log-probabilities and update 43 s (26%), generation 90% of the extra time
    ("dapo_math", 16, 40): (117.7, 13.0, 30.0, 2.0, 2.3),
}
# Peak training memory (GB per GPU); the 150-prompt sweep point is over the 0.98 x 64 GB cap.
MEMORY_GB: dict[tuple[str, int, int], float] = {
    ("gsm8k", 1, 25): 38.0,
    ("gsm8k", 1, 50): 45.0,
    ("gsm8k", 1, 150): 63.5,
    ("dapo_math", 1, 5): 52.0,
    ("dapo_math", 1, 15): 63.8,
    ("dapo_math", 1, 20): 66.0,
}
DEFAULT_MEMORY_GB = {"gsm8k": 55.0, "dapo_math": 59.0}
FAILED_POINTS = {("gsm8k", 1, 200)}
# Per-trajectory token shape: (prompt mean, response mean, share of responses at the cap).
TOKENS = {"gsm8k": (110.0, 740.0, 0.5), "dapo_math": (180.0, 5900.0, 0.48)}
# Step 1 (warm-up: vLLM graph capture, first Megatron step) is much slower, so that counting it would
# move every mean well beyond the tests' tolerance.
WARMUP_FACTORS = (1.6, 1.3, 1.4, 1.0)
WARMUP_EXTRA_S = 25.0

# The published start-up is the study's own estimate: 15 min on one node and 3 min more per doubling
# of nodes (config/config.yaml's estimate: "start-ups of 15 to 27 minutes").
STARTUP_MINUTES, STARTUP_MINUTES_PER_DOUBLING = 15.0, 3.0


def startup_seconds(key: tuple[str, int, int], spread: float = 0.05) -> float:
    """A run's start-up: the study's estimate for its nodes, varied by up to +-spread, seeded by the run."""
    rng = random.Random("startup-" + "-".join(map(str, key)))
    minutes = STARTUP_MINUTES + STARTUP_MINUTES_PER_DOUBLING * math.log2(key[1])
    return 60 * minutes * (1 + spread * rng.uniform(-1, 1))


def profile_of(key: tuple[str, int, int]) -> tuple[float, ...]:
    """A run's phases: its own profile, else (a run the study did not publish, such as a smoke of a sweep
    point over the memory cap) the nearest profile of its dataset and nodes, scaled by the prompts."""
    if key in PROFILES:
        return PROFILES[key]
    dataset, nodes, prompts = key
    near = [k for k in PROFILES if k[0] == dataset and k[1] == nodes] or [k for k in PROFILES if k[0] == dataset]
    closest = min(near, key=lambda k: (abs(k[1] - nodes), abs(k[2] / k[1] - prompts / nodes)))
    scale = (prompts / nodes) / (closest[2] / closest[1])
    return tuple(value * scale for value in PROFILES[closest])


def step_records(
    key: tuple[str, int, int],
    steps: int,
    warmup_steps: int,
    trajectories: int,
    n_gpus: int,
    max_response_length: int,
    lr: float,
    jitter: float,
    slower: float = 1.0,
    disturbed: dict[int, float] | None = None,
) -> list[dict[str, Any]]:
    """verl file-logger records for the run `key` = (dataset, nodes, prompts); each measured step varies
    by up to +-jitter per figure. `slower`: every phase of every step that many times its profile.
    `disturbed`: step -> factor, those steps' phases that many times as long (a busy machine)."""
    # Seeded by what the run is, not by its id: the id's hash changes whenever the identity gains a
    # field, and the study-shaped figures below must not move with it.
    rng = random.Random("-".join(map(str, key)))
    dataset = key[0]
    means = tuple(v * slower for v in profile_of(key))
    prompt_mean, response_mean, clip = TOKENS[dataset]
    memory = MEMORY_GB.get(key, DEFAULT_MEMORY_GB[dataset])
    records = []
    for step in range(1, steps + 1):

        def vary(value: float) -> float:
            return round(value * (1 + jitter * rng.uniform(-1, 1)), 3)

        factor = (disturbed or {}).get(step, 1.0)
        phases = [round(vary(v) * factor, 3) for v in means[:4]]
        other = vary(means[4]) * factor
        if step <= warmup_steps:
            phases = [round(v * f, 3) for v, f in zip(phases, WARMUP_FACTORS, strict=True)]
            other += WARMUP_EXTRA_S
        step_s = round(sum(phases) + other, 3)
        # Whole token counts per step, so that tokens / (prompt mean + response mean) is the
        # trajectory count exactly, as the validity check expects.
        prompt_tokens = round(trajectories * prompt_mean * (1 + jitter * rng.uniform(-1, 1)))
        response_tokens = round(trajectories * response_mean * (1 + jitter * rng.uniform(-1, 1)))
        tokens = prompt_tokens + response_tokens
        data = {
            "training/global_step": step,
            **{f"timing_s/{p}": v for p, v in zip(PHASE_KEYS, phases, strict=True)},
            "timing_s/step": step_s,
            "perf/total_num_tokens": tokens,
            # verl's own figure: tokens / (step time x nnodes x gpus per node)
            "perf/throughput": tokens / (step_s * n_gpus),
            "perf/max_memory_allocated_gb": round(memory + (0.4 if step <= warmup_steps else vary(0.2)), 3),
            "prompt_length/mean": prompt_tokens / trajectories,
            "response_length/mean": response_tokens / trajectories,
            "response_length/max": max_response_length,
            "response_length/clip_ratio": round(clip * (1 + jitter * rng.uniform(-1, 1)), 4),
            "actor/lr": lr,
            # verl's own MFU on LUMI: its device table has no MI250X, the peak is infinite (#33)
            "perf/mfu/actor": 0.0,
            "perf/mfu/actor_infer": 0.0,
        }
        records.append({"step": step, "data": data})
    return records


def compressed(record: dict[str, Any], factor: float, n_gpus: int) -> dict[str, Any]:
    """A step's record on a clock `factor` times faster: every time divided by it, verl's throughput
    (tokens per second per GPU) multiplied; tokens, lengths and memory as they were."""
    data = {key: value / factor if key.startswith("timing_s/") else value for key, value in record["data"].items()}
    data["perf/throughput"] = data["perf/total_num_tokens"] / (data["timing_s/step"] * n_gpus)
    return {"step": record["step"], "data": data}
