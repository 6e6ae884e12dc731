"""A stand-in for `python -m verl.trainer.main_ppo`, for the tests of the workflow's own plumbing.

Production never runs it: command.sh runs it instead of verl only where a test sets
RLVR_STANDIN_TRAINER=tests.standin_trainer (execution/run_records.trainer_module; job.json records
which trainer ran). It is enough where what is tested is the launcher, the guard, Slurm or Snakemake,
not verl: it behaves like verl's process tree as those see it, in seconds instead of verl's ~60 s
start-up on 2 cores (~65-80 s):

- it reads the run's shape from the same Hydra overrides verl gets (batch, responses per prompt,
  lengths, learning rate, steps, nodes and GPUs per node);
- it forks one worker process per GPU slot that carries the run's token, with `ray::WorkerDict` in
  its command line, as verl's Ray actors have; the workers do not end with the
  driver (Ray's actors outlive a killed driver too: the launcher and its guard must end them);
- it logs each step as verl does, to the file logger (VERL_FILE_LOGGER_PATH, JSONL) and to the
  console (`(TaskRunner pid=N) step:K - key:value - ...`), with the figures the summary checks
  consistent with the run (trajectories, response cap, learning rate, throughput per GPU);
- a worker that dies ends the driver with an error, as Ray's ActorDiedError ends verl's;
- each worker records a TCP connection to its driver as its process group's (join_collective), so a
  run's job.json has a transport; all on the driver's host, so a run across Slurm nodes records
  none on its other nodes and is not a measurement of the site's scaling (test_slurm says so).

Through the environment: RLVR_STANDIN_STEP_SECONDS (each step's time, default 0.3);
RLVR_STANDIN_FREEZE_AFTER (a step after which it hangs, alive and silent, as a hung collective does). Its workers'
command lines end in `ray::WorkerDict` (they start with the Python that runs them).
RLVR_STANDIN_TIMINGS: a JSON file that makes it step at the published LUMI study's timings, compressed
(the rehearsal, tests/rehearsal): each run's start-up and per-phase step times, memory and tokens from
tests/published_timings.py, every duration divided by the file's `compression`; `slower` and
`freeze_after` (keyed "dataset/nodes/prompts") plant a slow run and a hang. Its workers then run one
per node of the Slurm job, as one srun step (a node's workers as one process: production's verl has
one Ray worker per GPU, started over one srun step by the ray-srun launcher).
RLVR_STANDIN_PM_COUNTERS: a folder in HPE Cray's pm_counters layout whose counters it advances by
RLVR_STANDIN_JOULES_PER_STEP (node; each of 4 accelerators an eighth) in each step, before logging it:
on LUMI the node's counters advance as it works (execution/energy.py reads them).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

WORKER_TITLE = "ray::WorkerDict"
PEER_VAR = "RLVR_STANDIN_PEER"
FREEZE_VAR = "RLVR_STANDIN_FREEZE_AFTER"  # the step after which the stand-in logs nothing more
TIMINGS_VAR = "RLVR_STANDIN_TIMINGS"  # the rehearsal's published timings (tests/rehearsal)
# A worker nobody ended still goes by itself after this long, so a broken test leaks nothing for ever.
WORKER_LIFETIME_S = 900.0


def overrides(argv: list[str]) -> dict[str, str]:
    return dict(arg.lstrip("+").split("=", 1) for arg in argv if "=" in arg)


def join_collective() -> None:
    """Record this worker's "process group" as verl's workers do (engines.hooks). Production's record
    comes from torch.distributed's own initialisation in verl's workers (Gloo's TCP connections, or
    NCCL's output); the stand-in opens one real TCP connection to its driver instead and records it
    with the same functions, so the launcher reads it with the runs' code. A worker whose driver
    offers no peer (RLVR_STANDIN_PEER unset) records nothing."""
    peer = os.environ.get(PEER_VAR)
    if not peer:
        return
    from rlvr_scaling.engines import fabric, hooks

    before = fabric.tcp_connections()
    connection = socket.create_connection(("127.0.0.1", int(peer)), timeout=30)
    gloo = fabric.gloo_transport(before, fabric.tcp_connections())
    event = {"event": "collectives", "node": fabric.node_name(), "backend": "gloo (stand-in)", "gloo": gloo}
    hooks.record({**event, "slingshot": fabric.slingshot_credentials()})
    _kept.append(connection)


_kept: list[socket.socket] = []


def worker() -> None:
    # A rehearsal's worker is its node's (one srun task per node): it records under the node's name,
    # as each LUMI node's Ray processes do (engines.fabric.NODE_VAR, set by every node's start).
    if os.environ.get(TIMINGS_VAR) and os.environ.get("SLURMD_NODENAME"):
        os.environ["RLVR_NODE_NAME"] = os.environ["SLURMD_NODENAME"]
    join_collective()
    deadline = time.monotonic() + WORKER_LIFETIME_S
    while time.monotonic() < deadline:
        time.sleep(0.2)


def step_record(step: int, settings: dict[str, str], step_s: float) -> dict[str, float | int]:
    trajectories = int(settings["data.train_batch_size"]) * int(settings["actor_rollout_ref.rollout.n"])
    prompt_mean = int(settings["data.max_prompt_length"]) / 2
    response_cap = int(settings["data.max_response_length"])
    response_mean = response_cap / 2
    tokens = round(trajectories * (prompt_mean + response_mean))
    gpus = int(settings["trainer.nnodes"]) * int(settings["trainer.n_gpus_per_node"])
    return {
        "training/global_step": step,
        "timing_s/gen": round(0.5 * step_s, 6),
        "timing_s/old_log_prob": round(0.2 * step_s, 6),
        "timing_s/update_actor": round(0.25 * step_s, 6),
        "timing_s/step": round(step_s, 6),
        "perf/total_num_tokens": tokens,
        "perf/throughput": tokens / (step_s * gpus),
        "perf/max_memory_allocated_gb": 0.5,
        "prompt_length/mean": prompt_mean,
        "response_length/mean": response_mean,
        "response_length/max": response_cap,
        "response_length/clip_ratio": 0.0,
        "actor/lr": float(settings["actor_rollout_ref.actor.optim.lr"]),
    }


ACCELERATORS = 4


def advance_counters(folder: Path, joules: float) -> None:
    """One step's energy added to the node's cumulative counters, as pm_counters shows them."""
    stamp = int(time.time() * 1e6)
    added = {"energy": joules, **{f"accel{i}_energy": joules / 8 for i in range(ACCELERATORS)}}
    for name, value in added.items():
        path = folder / name
        before = int(path.read_text().split()[0]) if path.exists() else 0
        path.write_text(f"{before + round(value)} J {stamp} us\n")


def driver(argv: list[str]) -> int:
    if os.environ.get(TIMINGS_VAR):
        from tests.standin_rehearsal import rehearsal_driver

        return rehearsal_driver(overrides(argv), Path(os.environ[TIMINGS_VAR]))
    settings = overrides(argv)
    steps = int(settings["trainer.total_training_steps"])
    gpus = int(settings["trainer.nnodes"]) * int(settings["trainer.n_gpus_per_node"])
    step_seconds = float(os.environ.get("RLVR_STANDIN_STEP_SECONDS", "0.3"))
    metrics = Path(os.environ.get("VERL_FILE_LOGGER_PATH", "metrics.jsonl"))
    pid = os.getpid()
    print(f"(TaskRunner pid={pid}) stand-in trainer (tests/standin_trainer.py): {steps} steps on {gpus} workers")
    # The workers' peer: each opens a TCP connection to it, as a process group's ranks connect.
    peer = socket.create_server(("127.0.0.1", 0), backlog=max(8, gpus))
    env = {**os.environ, PEER_VAR: str(peer.getsockname()[1])}
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.standin_trainer", WORKER_TITLE], start_new_session=False, env=env
        )
        for _ in range(gpus)
    ]
    # A per-job cache where the site names one (ci-slurm's XDG_CACHE_HOME), as verl's torch, Triton and
    # vLLM fill LUMI's: the launcher must leave none behind on any node (tests/test_slurm.py).
    if os.environ.get("XDG_CACHE_HOME"):
        cache = Path(os.environ["XDG_CACHE_HOME"]) / "standin"
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "kernel.bin").write_bytes(b"\0" * 1024)
        print(f"(TaskRunner pid={pid}) cache written: {cache}", flush=True)
    time.sleep(1)  # a start-up of its own, so a test can see the workers before the first step
    print(f"(TaskRunner pid={pid}) ready to fit", flush=True)
    for step in range(1, steps + 1):
        began = time.monotonic()
        time.sleep(step_seconds)
        dead = [w.pid for w in workers if w.poll() is not None]
        if dead:
            # Ray's words for a worker that died, with the root causes it guesses: no memory evidence.
            print(
                f"ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task "
                f"(workers {dead}). There are some potential root causes. (1) The process is killed by "
                "SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called.",
                flush=True,
            )
            return 1
        if os.environ.get("RLVR_STANDIN_PM_COUNTERS"):
            joules = float(os.environ.get("RLVR_STANDIN_JOULES_PER_STEP", "2000"))
            advance_counters(Path(os.environ["RLVR_STANDIN_PM_COUNTERS"]), joules)
        record = step_record(step, settings, time.monotonic() - began)
        with open(metrics, "a") as handle:
            handle.write(json.dumps({"step": step, "data": record}) + "\n")
        line = " - ".join(f"{key}:{value}" for key, value in record.items())
        print(f"(TaskRunner pid={pid}) step:{step} - {line}", flush=True)
        if step == int(os.environ.get(FREEZE_VAR, "0")):
            # A hang as a collective hangs: every process alive, no step, no error, until ended.
            print(f"(TaskRunner pid={pid}) frozen after step {step} ({FREEZE_VAR})", flush=True)
            while True:
                time.sleep(1)
    for w in workers:
        w.terminate()
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == [WORKER_TITLE]:
        worker()
    else:
        sys.exit(driver(sys.argv[1:]))
