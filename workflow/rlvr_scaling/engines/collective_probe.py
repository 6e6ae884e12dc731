"""The preflight's all-reduce across two nodes, the way a run's collectives cross them.

A Ray driver in the engine's Python (inside the site's image): on the Ray cluster the launcher formed
over the job's nodes (the runs' launcher, the runs' one job step), or on a private Ray instance whose
two groups of workers stand for two nodes (the local site). One actor per GPU of each node, placed
by the node's own Ray resource, each a torch.distributed rank of the site's library: the process
group's initialisation, then NEW process groups in a row, each with its first all-reduce (the pattern
that hangs with some RCCL stacks: laifs-container-recipes issue 44's reproducer makes 8), then timed
all-reduces large enough for the bus bandwidth to show. Each rank notes where it is in a file of its
own, so a hang is named by the stage its ranks stopped at. The engine hooks record each rank's
process group as they do in a run (engines.hooks, engines.fabric), so the launcher reads its
transport with the runs' own code.

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
from rlvr_scaling.engines.hooks import RECORD_DIR_VAR

MARK = "RLVR-COLLECTIVE-REPORT "
PROGRESS_PREFIX = "progress-rank"
PLANT_HANG_VAR = "RLVR_PLANT_COLLECTIVE_HANG"


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

    def run(self, rank: int, world: int, master: str, request: dict[str, Any]) -> dict[str, Any]:
        import datetime as dt

        import torch
        import torch.distributed as dist

        from rlvr_scaling.engines import fabric

        backend, groups, iterations = request["backend"], request["new_groups"], request["iterations"]
        progress = Progress(request["env"].get(RECORD_DIR_VAR), rank)
        device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        progress.at("the process group's initialisation")
        timeout = dt.timedelta(seconds=request["timeout_s"])
        dist.init_process_group(backend, init_method=f"tcp://{master}", rank=rank, world_size=world, timeout=timeout)
        tensor = torch.ones(max(1, request["bytes"] // 4), dtype=torch.float32, device=device)
        sum_right = True
        # New groups in a row, each with its first all-reduce (NCCL and RCCL connect a communicator
        # there): the reproducer's pattern. The timed all-reduces then run on the last of them.
        for number in range(1, groups + 1):
            progress.at(f"new process group {number} of {groups}")
            group = dist.new_group(list(range(world)))
            progress.at(f"the first all-reduce on new process group {number} of {groups}")
            planted_hang(rank, number)
            tensor.fill_(1)
            dist.all_reduce(tensor, group=group)
            sum_right = sum_right and bool(tensor[0].item() == world and tensor[-1].item() == world)
        seconds = []
        progress.at(f"the {iterations} timed all-reduces")
        for _ in range(iterations):
            dist.barrier(group=group)
            began = time.perf_counter()
            dist.all_reduce(tensor, group=group)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds.append(time.perf_counter() - began)
        dist.destroy_process_group()
        progress.at("done")
        node = fabric.node_name()
        return {"rank": rank, "node": node, "pid": os.getpid(), "seconds": seconds, "sum_right": sum_right}


class Progress:
    """Where a rank is, in a file of its own in the record folder: a hung rank cannot answer, but what
    it wrote last says where it hangs (read by execution.preflight.collective)."""

    def __init__(self, folder: str | None, rank: int) -> None:
        self.path = os.path.join(folder, f"{PROGRESS_PREFIX}{rank}.txt") if folder else None
        self.count = 0

    def at(self, stage: str) -> None:
        self.count += 1
        if self.path:
            with open(self.path, "w") as handle:
                handle.write(f"{self.count}\t{stage}\n")


def planted_hang(rank: int, group: int) -> None:
    """A test's planted hang (PLANT_HANG_VAR="<rank>:<group>"): that rank never joins that group's
    first all-reduce, as a rank stuck in the library would not. Production never sets it."""
    if os.environ.get(PLANT_HANG_VAR) == f"{rank}:{group}":
        while True:
            time.sleep(3600)


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
        stage = "the ranks' collectives"
        calls = [rank.run.remote(index, len(ranks), f"{master}:{port}", request) for index, rank in enumerate(ranks)]
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
