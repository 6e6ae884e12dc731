"""Prints how long ingesting and summarising 1,000 runs x 20 steps takes (target: under 10 s).

The runs are generated here in verl's file-logger format (one JSON line per step, realistic keys).
    .venv/bin/python benchmarks/ingest.py [--runs 1000] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from rlvr_scaling.measured.metrics import read_steps, summarize_steps


def write_run(path: Path, steps: int, rng: random.Random) -> None:
    lines = []
    for step in range(1, steps + 1):
        gen, logp, update, sync = rng.uniform(40, 60), rng.uniform(10, 15), rng.uniform(20, 30), rng.uniform(1, 2)
        total = gen + logp + update + sync + rng.uniform(2, 4)
        tokens = rng.randint(600_000, 700_000)
        data = {
            "timing_s/gen": gen,
            "timing_s/old_log_prob": logp,
            "timing_s/update_actor": update,
            "timing_s/update_weights": sync,
            "timing_s/adv": 0.5,
            "timing_s/step": total,
            "perf/total_num_tokens": tokens,
            "perf/throughput": tokens / total / 8,
            "perf/time_per_step": total,
            "response_length/mean": 700.0,
            "response_length/clip_ratio": 0.5,
            "response_length/max": 1024,
            "prompt_length/mean": 150.0,
            "actor/lr": 0.0,
            "actor/perf/max_memory_allocated_gb": 60.1,
            "training/global_step": step,
        }
        data.update({f"extra/metric_{i}": rng.random() for i in range(70)})  # verl logs ~90 keys per step
        lines.append(json.dumps({"step": step, "data": data}))
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(args.runs):
            path = Path(tmp) / f"run{i}.jsonl"
            write_run(path, args.steps, rng)
            paths.append(path)
        start = time.perf_counter()
        for path in paths:
            steps, _problems, _reader = read_steps(path)
            summarize_steps(steps, n_gpus=8, warmup_steps=1)
        elapsed = time.perf_counter() - start
    print(
        f"ingest + summarise {args.runs} runs x {args.steps} steps: {elapsed:.2f} s "
        f"({1000 * elapsed / args.runs:.2f} ms per run)"
    )


if __name__ == "__main__":
    main()
