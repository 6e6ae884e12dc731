"""The preflight's all-reduce across two nodes, the way a run's collectives cross them.

A Ray driver in the engine's Python (inside the site's image): on the Ray cluster the launcher formed
over the job's nodes (the runs' launcher, the runs' one job step), or on a private Ray instance whose
two groups of workers stand for two nodes (the local site). One actor per GPU of each node, placed
by the node's own Ray resource, each a torch.distributed rank of the site's library: the process
group's initialisation, then a NEW process group and its first all-reduce (the pattern that hangs
with some RCCL stacks: laifs-container-recipes issue 44), then timed all-reduces large enough for the
bus bandwidth to show. The engine hooks record each rank's process group as they do in a run
(engines.hooks, engines.fabric), so the launcher reads its transport with the runs' own code.

    python -m rlvr_scaling.engines.collective_probe REQUEST.json

Prints one marked JSON line: per iteration the slowest rank's seconds, the ranks' nodes, whether the
sums were right; or where it stopped (`stage`) when the collective did not finish in time.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from typing import Any

from rlvr_scaling.engines.fabric import NODE_RESOURCE

MARK = "RLVR-COLLECTIVE-REPORT "


class Rank:
    """One process of the collective (a Ray actor)."""

    def __init__(self, node: str, env: dict[str, str]) -> None:
        os.environ.update(env)  # before the library initialises: NCCL reads its variables then
        from rlvr_scaling.engines import fabric, hooks

        os.environ[fabric.NODE_VAR] = node
        hooks.record_collectives()  # the runs' record of each process group (hooks.install does it there)

    def address(self) -> tuple[str, int]:
        import ray

        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def run(self, rank: int, world: int, master: str, backend: str, nbytes: int, iterations: int, timeout_s: float):
        import datetime as dt

        import torch
        import torch.distributed as dist

        from rlvr_scaling.engines import fabric

        device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(
            backend, init_method=f"tcp://{master}", rank=rank, world_size=world, timeout=dt.timedelta(seconds=timeout_s)
        )
        group = dist.new_group(list(range(world)))
        tensor = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
        dist.all_reduce(tensor, group=group)  # the first collective on the new group; NCCL connects here
        sum_right = bool(tensor[0].item() == world and tensor[-1].item() == world)
        seconds = []
        for _ in range(iterations):
            dist.barrier(group=group)
            began = time.perf_counter()
            dist.all_reduce(tensor, group=group)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds.append(time.perf_counter() - began)
        dist.destroy_process_group()
        node = fabric.node_name()
        return {"rank": rank, "node": node, "pid": os.getpid(), "seconds": seconds, "sum_right": sum_right}


def _report(report: dict[str, Any]) -> None:
    sys.stdout.write(MARK + json.dumps(report) + "\n")
    sys.stdout.flush()


def main() -> None:
    with open(sys.argv[1]) as handle:
        request = json.load(handle)
    import ray

    nodes, per_node, gpus = request["nodes"], request["ranks_per_node"], request["use_gpus"]
    began = time.monotonic()
    if request["local_groups"]:
        # The local site: no cluster; one private Ray whose groups of workers stand for the nodes.
        resources = {NODE_RESOURCE.format(node): per_node for node in nodes}
        ray.init(
            num_cpus=len(nodes) * per_node, resources=resources, include_dashboard=False, logging_level=logging.ERROR
        )
    else:
        ray.init(address=os.environ["RAY_ADDRESS"], logging_level=logging.ERROR, log_to_driver=False)
    stage = "starting the ranks"
    report: dict[str, Any] = {"nodes": nodes, "ranks": len(nodes) * per_node, "bytes": request["bytes"]}
    try:
        options: dict[str, Any] = {"num_gpus": 1} if gpus else {"num_cpus": 0}
        actor = ray.remote(Rank)
        # Handles of Ray actors: their methods are called through .remote, which Ray's types do not show.
        ranks: list[Any] = [
            actor.options(resources={NODE_RESOURCE.format(node): 0.001}, **options).remote(node, request["env"])
            for node in nodes
            for _ in range(per_node)
        ]
        deadline = began + request["timeout_s"]
        master, port = ray.get(ranks[0].address.remote(), timeout=max(1.0, deadline - time.monotonic()))
        stage = "the process group's initialisation, the new group and its all-reduces"
        calls = [
            rank.run.remote(
                index,
                len(ranks),
                f"{master}:{port}",
                request["backend"],
                request["bytes"],
                request["iterations"],
                request["timeout_s"],
            )
            for index, rank in enumerate(ranks)
        ]
        results = ray.get(calls, timeout=max(1.0, deadline - time.monotonic()))
        report.update(finished=True, ranks_done=results, seconds_total=round(time.monotonic() - began, 2))
    except ray.exceptions.GetTimeoutError:
        report.update(finished=False, stage=stage, seconds_total=round(time.monotonic() - began, 2))
    except Exception as exc:  # a rank's error: the first line of it
        report.update(finished=False, stage=stage, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:800])
    _report(report)
    if request["local_groups"]:
        ray.shutdown()  # the private instance and its ranks, hung ones too
    # No interpreter shutdown: a hung rank on a cluster must not hold the preflight (its processes
    # end with the cluster and the preflight's token).
    os._exit(0)


if __name__ == "__main__":
    main()
