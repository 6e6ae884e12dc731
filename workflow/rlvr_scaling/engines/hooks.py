"""What this pipeline adds to every process verl starts on a GPU site (VERL_USE_EXTERNAL_MODULES;
the CPU engine installs the same): no verl source is edited, and nothing here changes what verl
computes.

- CPU affinity: a worker that holds one GPU is bound to the cores closest to it, from the site's
  table (launch.gpu_cpu_affinity, passed as RLVR_GPU_CPU_AFFINITY: {"<gpu>": [cpu, ...]}). LUMI's AI
  guide binds each GCD's process to its CCD; Ray places verl's workers on GPUs itself, so Slurm's
  per-task masks cannot reach them: each worker binds itself once Ray has given it its GPU.
- Device memory around the rollout's sleep and wake: the free and total memory of each GPU the
  rollout server sees, through the engine's own device API (torch.cuda, which is HIP on ROCm),
  before and after each sleep and wake_up, so the first smoke on a site shows whether its vLLM
  frees its share (site engine_options.sleep_mode).
- The collectives' transport: each torch.distributed process group's backend as it is initialised,
  and for Gloo the TCP connections it opened (engines.fabric); NCCL and RCCL write their own
  initialisation output to the file the launcher names (NCCL_DEBUG_FILE), read after the run.
- Python's collector: each full (generation 2) collection that pauses the process GC_PAUSE_FLOOR_S
  or more. With verl, torch and a model loaded one takes about 0.2-0.3 s on a CPU core: within a
  sub-second step of the local engine, a hiccup of 20-50% in whichever phase it lands (#55); beside a
  GPU site's minutes-long steps, nothing.
Each event is one JSON line in RLVR_ENGINE_RECORD_DIR/<host>-<pid>.jsonl (the run's folder, where
the launcher collects them into job.json, the smoke into the preflight record).

Inside the image this module runs in the image's Python: the standard library, and torch, Ray and
verl where they are already imported; nothing else of this package.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr_scaling.engines import fabric

AFFINITY_VAR = "RLVR_GPU_CPU_AFFINITY"
GC_PAUSE_FLOOR_S = 0.05  # a shorter full collection is no hiccup a step time shows
RECORD_DIR_VAR = "RLVR_ENGINE_RECORD_DIR"
GB = 1e9


def record(event: dict[str, Any]) -> None:
    """Append one event to this process's file in the run's record folder (none: nothing kept)."""
    folder = os.environ.get(RECORD_DIR_VAR)
    if not folder:
        return
    entry = {"time": round(time.time(), 3), "host": socket.gethostname(), "pid": os.getpid(), **event}
    path = Path(folder) / f"{socket.gethostname()}-{os.getpid()}.jsonl"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
    except OSError:
        pass  # a record is evidence, never a reason for the run to fail


def affinity_table() -> dict[str, list[int]]:
    try:
        table = json.loads(os.environ.get(AFFINITY_VAR) or "{}")
    except ValueError:
        return {}
    return {str(gpu): [int(cpu) for cpu in cpus] for gpu, cpus in table.items()} if isinstance(table, dict) else {}


def bind_to_gpu(gpu: str, table: dict[str, list[int]]) -> list[int] | None:
    """Every thread of this process on the cores of `gpu`'s row that it may use; None when the
    table has no row for it or none of its cores is allowed here."""
    wanted = set(table.get(str(gpu), [])) & os.sched_getaffinity(0)
    if not wanted:
        return None
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), wanted)
        except OSError:
            continue  # a thread that has just ended
    return sorted(wanted)


def _assigned_gpu() -> str | None:
    """The one GPU Ray gave this worker (by the node's numbering), or None."""
    try:
        import ray

        ids = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
    except Exception:  # outside a Ray worker: nothing to bind
        return None
    return str(ids[0]) if len(ids) == 1 else None


# The GPU this process has bound itself for: verl sets up each role of a fused worker (actor,
# rollout) in the same process, and the binding is the process's, made once.
_bound: dict[str, list[int] | None] = {}


def _bind_after(setup):
    @functools.wraps(setup)
    def wrapper(self, *args, **kwargs):
        result = setup(self, *args, **kwargs)
        table = affinity_table()
        gpu = _assigned_gpu() if table else None
        if gpu is not None and gpu not in _bound:
            _bound[gpu] = bind_to_gpu(gpu, table)
            record({"event": "affinity", "gpu": gpu, "cpus": _bound[gpu], "process": type(self).__name__})
        return result

    wrapper._rlvr_hooked = True  # type: ignore[attr-defined]  # a mark on the wrapper: hooked once per process
    return wrapper


def device_memory() -> list[dict[str, float]] | str:
    """Free and total memory of each GPU this process sees, in GB, or why there is none."""
    try:
        import torch

        if not torch.cuda.is_available():
            return "no GPU in this process (torch.cuda is not available)"
        return [
            {"device": index, "free_gb": round(free / GB, 3), "total_gb": round(total / GB, 3)}
            for index in range(torch.cuda.device_count())
            for free, total in [torch.cuda.mem_get_info(index)]
        ]
    except Exception as error:  # the record must never stop the rollout
        return f"device memory not readable: {error!r}"


def _measured(name: str, method):
    @functools.wraps(method)
    async def wrapper(self, *args, **kwargs):
        before = device_memory()
        began = time.monotonic()
        result = await method(self, *args, **kwargs)
        record(
            {
                "event": name,
                "server": type(self).__name__,
                "seconds": round(time.monotonic() - began, 3),
                "before": before,
                "after": device_memory(),
            }
        )
        return result

    wrapper._rlvr_hooked = True  # type: ignore[attr-defined]  # a mark on the wrapper: hooked once per process
    return wrapper


def measure_sleep_and_wake(server_class: type) -> None:
    """Record device memory around a rollout server's sleep and wake_up (async methods)."""
    for name in ("sleep", "wake_up"):
        method = server_class.__dict__.get(name)
        if method is not None and not getattr(method, "_rlvr_hooked", False):
            setattr(server_class, name, _measured(name, method))


def _record_collectives(init: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(init)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        before = fabric.tcp_connections()
        result = init(*args, **kwargs)
        try:
            import torch.distributed as dist

            backend = str(dist.get_backend())
            event: dict[str, Any] = {"event": "collectives", "node": fabric.node_name(), "backend": backend}
            event.update(rank=dist.get_rank(), world_size=dist.get_world_size())
            event["slingshot"] = fabric.slingshot_credentials()
            if "gloo" in backend:
                event["gloo"] = fabric.gloo_transport(before, fabric.tcp_connections())
            record(event)
        except Exception:  # evidence only
            pass
        return result

    wrapper._rlvr_hooked = True  # type: ignore[attr-defined]  # a mark on the wrapper: hooked once per process
    return wrapper


def record_collectives() -> None:
    """Wrap torch.distributed.init_process_group (verl calls it by attribute at run time)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return
    init = getattr(dist, "init_process_group", None)
    if init is not None and not getattr(init, "_rlvr_hooked", False):
        dist.init_process_group = _record_collectives(init)


def record_collector_pauses() -> None:
    """A record line for each full collection of Python's cyclic collector of GC_PAUSE_FLOOR_S or more."""
    import gc

    if any(getattr(callback, "_rlvr_hooked", False) for callback in gc.callbacks):
        return
    started: dict[str, float] = {}

    def callback(phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            started["at"] = time.perf_counter()
        elif "at" in started:
            seconds = time.perf_counter() - started.pop("at")
            if seconds >= GC_PAUSE_FLOOR_S:
                record({"event": "gc_pause", "seconds": round(seconds, 4), "collected": info.get("collected")})

    callback._rlvr_hooked = True  # type: ignore[attr-defined]  # marks it as ours: installed once per process
    gc.callbacks.append(callback)


def install() -> None:
    """The affinity hook on verl's workers, the collectives' record, the collector's pauses, and the
    memory record on vLLM's server where vLLM is."""
    try:
        from verl.single_controller.base.worker import Worker
    except ImportError:
        return
    setup = Worker.__dict__.get("_setup_env_cuda_visible_devices")
    if setup is not None and not getattr(setup, "_rlvr_hooked", False):
        Worker._setup_env_cuda_visible_devices = _bind_after(setup)  # type: ignore[method-assign]  # wrapped on purpose
    record_collectives()
    record_collector_pauses()
    # vLLM's server module imports vLLM (seconds): hooked when a process imports it, not before.
    after_import(VLLM_SERVER_MODULE, lambda module: measure_sleep_and_wake(module.vLLMHttpServer))


VLLM_SERVER_MODULE = "verl.workers.rollout.vllm_rollout.vllm_async_server"


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function on a module right after its first import, wherever that import happens."""

    def __init__(self, name: str, then) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        execute, then = spec.loader.exec_module, self.then

        def exec_module(module):
            execute(module)
            then(module)

        spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, then) -> None:
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))


# verl loads this module while it imports itself: then the hooks go in. Imported by the launcher or
# the plan (for the names above), it imports nothing: no torch or verl in the workflow's processes.
if "verl" in sys.modules:
    install()
