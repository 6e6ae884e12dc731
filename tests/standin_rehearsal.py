"""The stand-in trainer at the published LUMI study's timings, compressed (tests/standin_trainer.py's
RLVR_STANDIN_TIMINGS; the rehearsal, tests/rehearsal): production runs verl, whose own start-up and
steps take what the hardware takes. Here each run starts up for its published start-up and steps at
its published phases (tests/published_timings.py), every duration divided by the compression, and
logs verl's record of each step on that clock.

The start-up counts from the launcher's start, as the launcher measures it (Ray's and the image's
start are part of it on LUMI).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.published_timings import compressed, startup_seconds, step_records

PEER_VAR = "RLVR_STANDIN_PEER"
WORKER_TITLE = "ray::WorkerDict"


def run_key(settings: dict[str, str]) -> tuple[str, int, int]:
    """(dataset, nodes, prompts) from verl's overrides: the dataset is its rows' folder (data/<site>/<dataset>/)."""
    dataset = Path(settings["data.train_files"]).parent.name
    return dataset, int(settings["trainer.nnodes"]), int(settings["data.train_batch_size"])


def _launched_at() -> float:
    """When the launcher started the run (job.json beside command.sh), as a wall-clock time: the
    start-up counts from there, as the launcher measures it. What Snakemake's job script and Slurm
    spend on this machine before the launcher (about 5 s) does not compress: it is on top."""
    try:
        start = json.loads(Path("job.json").read_text())["start"]
        return dt.datetime.fromisoformat(start).timestamp()
    except (OSError, ValueError, KeyError):
        return time.time()


def _workers(nodes: int, peer: int) -> subprocess.Popen:
    """One worker per node of the job, as one srun step (every node's in one step, as ray-srun's)."""
    env = {**os.environ, PEER_VAR: str(peer)}
    job = os.environ["SLURM_JOB_ID"]
    command = [
        "srun",
        f"--jobid={job}",
        f"--nodes={nodes}",
        f"--ntasks={nodes}",
        "--ntasks-per-node=1",
        "--cpus-per-task=1",
        "--overlap",
        "--kill-on-bad-exit=0",
        sys.executable,
        "-m",
        "tests.standin_trainer",
        WORKER_TITLE,
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def rehearsal_driver(settings: dict[str, str], timings_file: Path) -> int:
    timings: dict[str, Any] = json.loads(timings_file.read_text())
    factor = float(timings["compression"])
    key = run_key(settings)
    name = "/".join(map(str, key))
    nodes = key[1]
    n_gpus = nodes * int(settings["trainer.n_gpus_per_node"])
    pid = os.getpid()
    records = step_records(
        key,
        int(settings["trainer.total_training_steps"]),
        int(timings.get("warmup_steps", 1)),
        key[2] * int(settings["actor_rollout_ref.rollout.n"]),
        n_gpus,
        int(settings["data.max_response_length"]),
        float(settings["actor_rollout_ref.actor.optim.lr"]),
        float(timings.get("jitter", 0.03)),
        float(timings.get("slower", {}).get(name, 1.0)),
    )
    freeze_after = timings.get("freeze_after", {}).get(name)
    metrics = Path(os.environ.get("VERL_FILE_LOGGER_PATH", "metrics.jsonl"))
    print(f"(TaskRunner pid={pid}) stand-in at the published timings of {name}, {factor:g} x compressed", flush=True)
    peer = socket.create_server(("127.0.0.1", 0), backlog=max(8, nodes))
    workers = _workers(nodes, peer.getsockname()[1]) if os.environ.get("SLURM_JOB_ID") else None
    try:
        startup = startup_seconds(key) / factor
        time.sleep(max(0.0, _launched_at() + startup - time.time()))
        print(f"(TaskRunner pid={pid}) ready to fit after {startup * factor / 60:.1f} min (published)", flush=True)
        for record in records:
            shown = compressed(record, factor, n_gpus)
            time.sleep(shown["data"]["timing_s/step"])
            if workers is not None and workers.poll() is not None:
                print(f"ray.exceptions.ActorDiedError: the workers' step ended ({workers.returncode})", flush=True)
                return 1
            with open(metrics, "a") as handle:
                handle.write(json.dumps(shown) + "\n")
            line = " - ".join(f"{k}:{v}" for k, v in shown["data"].items())
            print(f"(TaskRunner pid={pid}) step:{shown['step']} - {line}", flush=True)
            if shown["step"] == freeze_after:
                print(
                    f"(TaskRunner pid={pid}) frozen after step {freeze_after} (the rehearsal's planted hang)",
                    flush=True,
                )
                while True:
                    time.sleep(1)
        return 0
    finally:
        if workers is not None and workers.poll() is None:
            workers.send_signal(signal.SIGTERM)
            try:
                workers.wait(timeout=10)
            except subprocess.TimeoutExpired:
                workers.kill()
