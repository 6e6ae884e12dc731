"""What the engine hooks (rlvr_scaling.engines.hooks) recorded in a run's processes: each worker's
CPU binding and the device memory around the rollout's sleep and wake, for job.json and the
preflight's engine smoke."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from rlvr_scaling.engines.hooks import RECORD_DIR_VAR

__all__ = ["RECORD_DIR_VAR", "collective_events", "engine_events", "sleep_freed_gb"]


def _events(folder: Path) -> list[dict[str, Any]]:
    events = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for line in path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed process
            if isinstance(event, dict):
                events.append(event)
    return sorted(events, key=lambda e: e.get("time", 0))


def collective_events(folder: Path) -> list[dict[str, Any]]:
    """Each process group's initialisation as the hooks recorded it (engines.fabric)."""
    return [e for e in _events(folder) if e.get("event") == "collectives"]


def engine_events(folder: Path) -> dict[str, Any]:
    """The masks each GPU's worker was bound to, and the rollout's sleep and wake with device memory."""
    events = _events(folder)
    return {
        "cpu_affinity": [
            {k: e.get(k) for k in ("host", "pid", "process", "gpu", "cpus")}
            for e in events
            if e.get("event") == "affinity"
        ],
        "rollout_memory": [e for e in events if e.get("event") in ("sleep", "wake_up")],
        "collector_pauses": _collector_pauses(events),
    }


def _collector_pauses(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Python's full collections that paused a process of the run (engines.hooks.GC_PAUSE_FLOOR_S or more)."""
    pauses = sorted(float(e["seconds"]) for e in events if e.get("event") == "gc_pause")
    return {
        "count": len(pauses),
        "total_s": round(sum(pauses), 3),
        "longest_s": pauses[-1] if pauses else None,
        "median_s": statistics.median(pauses) if pauses else None,
        "processes": len({(e.get("host"), e.get("pid")) for e in events if e.get("event") == "gc_pause"}),
    }


def sleep_freed_gb(rollout_memory: list[dict[str, Any]]) -> float | None:
    """Device memory the first sleep freed, over the devices it saw (None: no device figures)."""
    for event in rollout_memory:
        before, after = event.get("before"), event.get("after")
        if event.get("event") == "sleep" and isinstance(before, list) and isinstance(after, list):
            return round(sum(a["free_gb"] - b["free_gb"] for a, b in zip(after, before, strict=False)), 3)
    return None
