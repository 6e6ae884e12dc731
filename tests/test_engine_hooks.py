"""The engine hooks verl loads in every process (rlvr_scaling.engines.hooks): a GPU's worker bound to
the site's CPUs for that GPU, the rollout's device memory around sleep and wake, and how the launcher
and the smoke read them back. The real trainer with them: the Apptainer test (a worker bound in the
image) and the shared local study (the rollout's sleep and wake recorded)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rlvr_scaling.engines import hooks
from rlvr_scaling.execution.engine_record import engine_events, sleep_freed_gb
from rlvr_scaling.execution.run_environment import cpu_list, environment_templates
from rlvr_scaling.study.config import load_study

from .conftest import PYTHON


def test_a_cpu_list_reads_as_linux_writes_it() -> None:
    assert cpu_list("49-55") == [49, 50, 51, 52, 53, 54, 55]
    assert cpu_list("1-3,9,12-13") == [1, 2, 3, 9, 12, 13]


def test_lumi_passes_its_gcd_table_and_loads_the_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVR_SLURM_ACCOUNT", "project_465000000")
    env = environment_templates(load_study(site="lumi"))
    assert env["VERL_USE_EXTERNAL_MODULES"] == "rlvr_scaling.engines.hooks"
    table = json.loads(env[hooks.AFFINITY_VAR])
    # The LUMI AI guide: GCD0 -> cores 49-55, GCD4 -> 1-7; 8 GCDs x 7 cores, none shared, none reserved.
    assert table["0"] == list(range(49, 56)) and table["4"] == list(range(1, 8))
    cores = [cpu for cpus in table.values() for cpu in cpus]
    assert len(table) == 8 and len(cores) == len(set(cores)) == 56 and not {0, 8, 16, 24, 32, 40, 48, 56} & set(cores)


def test_a_worker_binds_every_thread_to_its_gpus_cpus(tmp_path: Path) -> None:
    # In a process of its own (this one's binding stays): a thread started before the binding is
    # bound too, and the record names the GPU and the CPUs.
    script = textwrap.dedent(
        """
        import json, os, sys, threading, time
        from rlvr_scaling.engines import hooks
        thread = threading.Thread(target=time.sleep, args=(2,)); thread.start()
        allowed = sorted(os.sched_getaffinity(0))
        cpus = hooks.bind_to_gpu("3", {"3": [allowed[-1]], "0": [allowed[0]]})
        hooks.record({"event": "affinity", "gpu": "3", "cpus": cpus})
        print(json.dumps({"cpus": cpus, "main": sorted(os.sched_getaffinity(0)),
                          "thread": sorted(os.sched_getaffinity(thread.native_id)), "last": allowed[-1]}))
        """
    )
    env = {**os.environ, hooks.RECORD_DIR_VAR: str(tmp_path / "engine")}
    out = json.loads(subprocess.run([PYTHON, "-c", script], env=env, capture_output=True, text=True, check=True).stdout)
    assert out["cpus"] == out["main"] == out["thread"] == [out["last"]]
    events = engine_events(tmp_path / "engine")
    assert [(e["gpu"], e["cpus"]) for e in events["cpu_affinity"]] == [("3", [out["last"]])]


def test_no_row_or_no_allowed_cpu_binds_nothing() -> None:
    assert hooks.bind_to_gpu("7", {"0": [0]}) is None
    assert hooks.bind_to_gpu("0", {"0": [10**6]}) is None  # a CPU this machine does not have


def test_sleep_and_wake_are_recorded_with_device_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hooks.RECORD_DIR_VAR, str(tmp_path))
    free = iter([10.0, 40.0, 40.0, 12.0])  # sleep frees 30 GB, wake takes 28 back

    def device_memory() -> list[dict[str, float]]:
        return [{"device": 0, "free_gb": next(free), "total_gb": 64.0}]

    monkeypatch.setattr(hooks, "device_memory", device_memory)

    class Server:
        async def sleep(self) -> str:
            return "slept"

        async def wake_up(self) -> None:
            return None

    hooks.measure_sleep_and_wake(Server)
    hooks.measure_sleep_and_wake(Server)  # twice: wrapped once
    assert asyncio.run(Server().sleep()) == "slept"
    asyncio.run(Server().wake_up())
    memory = engine_events(tmp_path)["rollout_memory"]
    assert [e["event"] for e in memory] == ["sleep", "wake_up"] and memory[0]["server"] == "Server"
    assert sleep_freed_gb(memory) == 30.0
    # Without a device API (the CPU engine) there is no figure, and the record says why.
    assert sleep_freed_gb([{"event": "sleep", "before": "no GPU", "after": "no GPU"}]) is None


def test_a_module_is_hooked_at_its_first_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rlvr_late_module.py").write_text("class Server:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    hooks.after_import("rlvr_late_module", lambda module: seen.append(module.Server))
    assert seen == []  # not imported by the hook itself (vLLM's server module costs seconds)
    import rlvr_late_module  # noqa: F401

    assert len(seen) == 1 and seen[0].__name__ == "Server"
    sys.modules.pop("rlvr_late_module", None)


def test_a_fused_worker_binds_and_records_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # verl sets up each role of a fused worker (actor, rollout) in one process: one binding, one record.
    allowed = sorted(os.sched_getaffinity(0))  # the row is what this process may use already: no change
    monkeypatch.setenv(hooks.AFFINITY_VAR, json.dumps({"0": allowed}))
    monkeypatch.setenv(hooks.RECORD_DIR_VAR, str(tmp_path))
    monkeypatch.setattr(hooks, "_assigned_gpu", lambda: "0")
    monkeypatch.setattr(hooks, "_bound", {})

    class WorkerDict:
        def _setup_env_cuda_visible_devices(self) -> str:
            return "set up"

    setup = hooks._bind_after(WorkerDict._setup_env_cuda_visible_devices)
    assert [setup(WorkerDict()) for _ in range(3)] == ["set up"] * 3
    bound = engine_events(tmp_path)["cpu_affinity"]
    assert [(b["gpu"], b["cpus"], b["process"]) for b in bound] == [("0", allowed, "WorkerDict")]


def test_a_full_collection_of_pythons_collector_is_recorded_with_its_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local engine's step hiccups (#55): each full collection at or over the floor is one record
    line, and the run's engine record counts them."""
    import gc

    from rlvr_scaling.execution.engine_record import engine_events

    monkeypatch.setenv(hooks.RECORD_DIR_VAR, str(tmp_path))
    monkeypatch.setattr(hooks, "GC_PAUSE_FLOOR_S", 0.0)  # every full collection, however short
    before = list(gc.callbacks)
    try:
        hooks.record_collector_pauses()
        hooks.record_collector_pauses()  # installed once per process
        assert len(gc.callbacks) == len(before) + 1
        gc.collect(1)  # a young collection is no pause of the whole heap: not recorded
        gc.collect(2)
        gc.collect(2)
    finally:
        gc.callbacks[:] = before
    events = [json.loads(line) for path in tmp_path.glob("*.jsonl") for line in path.read_text().splitlines()]
    assert [e["event"] for e in events] == ["gc_pause", "gc_pause"] and all(e["seconds"] >= 0 for e in events)
    pauses = engine_events(tmp_path)["collector_pauses"]
    assert pauses["count"] == 2 and pauses["processes"] == 1
    assert pauses["longest_s"] == max(e["seconds"] for e in events)
    assert pauses["total_s"] == round(sum(e["seconds"] for e in events), 3)
