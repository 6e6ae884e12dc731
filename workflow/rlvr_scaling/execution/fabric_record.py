"""The transport each node's collectives used in a run, for job.json: read from what the engine hooks
recorded (each process group's backend; Gloo's connections) and from NCCL's or RCCL's own
initialisation output (NCCL_DEBUG_FILE, one file per process in the run's record folder), and judged
against the site's `fabric` (engines.fabric.judge)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlvr_scaling.engines import fabric
from rlvr_scaling.execution.engine_record import collective_events
from rlvr_scaling.study.config import Study

NCCL_FILE = re.compile(rf"^{fabric.NCCL_FILE_PREFIX}(?P<host>.+)-(?P<pid>\d+)\.log$")


def fabric_environment(study: Study, record_dir: Path) -> dict[str, str]:
    """What the run's processes need for the record: NCCL's initialisation output on a NCCL or RCCL site."""
    return fabric.nccl_debug_environment(str(record_dir)) if study.site.fabric.nccl else {}


def _nccl_by_node(record_dir: Path, node_of: dict[tuple[str, int], str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(record_dir.glob(f"{fabric.NCCL_FILE_PREFIX}*.log")) if record_dir.is_dir() else []:
        match = NCCL_FILE.match(path.name)
        if not match:
            continue
        host, pid = match["host"], int(match["pid"])
        transport, line = fabric.nccl_transport(path.read_text(errors="replace").splitlines())
        node = node_of.get((host, pid), host)
        entry = found.setdefault(node, {"transports": set(), "evidence": None, "processes": 0})
        entry["processes"] += 1
        if transport:
            entry["transports"].add(transport)
            entry["evidence"] = entry["evidence"] or line
    return found


def _gloo_by_node(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        gloo = event.get("gloo")
        if not isinstance(gloo, dict):
            continue
        entry = found.setdefault(str(event.get("node")), {"transports": set(), "evidence": None, "processes": 0})
        entry["processes"] += 1
        entry["transports"].add(gloo.get("transport"))
        addresses = ", ".join(gloo.get("local_addresses") or []) or "no new connection"
        entry["evidence"] = entry["evidence"] or f"gloo: {gloo.get('evidence')} (local {addresses})"
    return found


def _slingshot_by_node(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per node, the Slingshot credentials its ranks saw: each variable's distinct values, and how
    many ranks had no VNI. Records from before the hooks noted them have no `slingshot`: left out."""
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        seen = event.get("slingshot")
        if not isinstance(seen, dict):
            continue
        entry = found.setdefault(str(event.get("node")), {"ranks": 0, "ranks_without_vni": 0})
        entry["ranks"] += 1
        entry["ranks_without_vni"] += "vnis" not in seen
        for key in fabric.SLINGSHOT_VARS:
            if key in seen:
                entry[key] = sorted({*entry.get(key, []), str(seen[key])})
    return found


def transport_record(study: Study, nodes: int, record_dir: Path, node_list: list[str] | None = None) -> dict[str, Any]:
    """job.json's `fabric`: the site's expectation, each node's transport with the line that shows it,
    and whether the run counts as a measurement of the site's scaling. `node_list`: the job's nodes
    (a node of it that recorded nothing is named); None: the nodes that recorded (one host)."""
    expected = study.site.fabric
    events = collective_events(record_dir)
    node_of = {(str(e.get("host")), int(e.get("pid", -1))): str(e.get("node")) for e in events}
    by_node = _nccl_by_node(record_dir, node_of) if expected.nccl else _gloo_by_node(events)
    per_node: dict[str, dict[str, Any]] = {
        node: {"transport": None, "processes": 0, "evidence": None} for node in node_list or []
    }
    for node, entry in by_node.items():
        transports = sorted(t for t in entry["transports"] if t)
        # Two transports on one node (a process over sockets beside others over the fabric) is named.
        transport = transports[0] if len(transports) == 1 else ("+".join(transports) or None)
        per_node[node] = {"transport": transport, "processes": entry["processes"], "evidence": entry["evidence"]}
    slingshot = _slingshot_by_node(events)
    for node, entry in per_node.items():
        entry["slingshot"] = slingshot.get(node)
    valid, detail = fabric.judge(expected.transport, {n: r["transport"] for n, r in per_node.items()}, nodes)
    # A rank without the VNI counts as a node without one: its traffic took another service.
    vnis = {
        node: [] if not entry["slingshot"] or entry["slingshot"]["ranks_without_vni"] else entry["slingshot"]["vnis"]
        for node, entry in per_node.items()
    }
    credentials_valid, credentials_detail = fabric.judge_credentials(expected.transport, vnis, nodes)
    if not credentials_valid:
        detail = credentials_detail if valid else f"{detail}; {credentials_detail}"
        valid = False
    return {
        "expected": {"library": expected.library, "transport": expected.transport},
        "nodes": per_node,
        "backends": sorted({str(e.get("backend")) for e in events}),
        "valid_for_scaling": valid,
        "detail": detail,
    }
