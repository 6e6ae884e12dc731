"""The preflight's collective across nodes (engines.collective_probe; fabric.collective_nodes), run
the way the runs reach their nodes, and judged: the transport the library chose against the site's
(fabric.transport), the bus bandwidth against its floor, and the whole of it against its time limit.
Each failure is one line.

On a Slurm site the probe is a Ray driver on the cluster the runs' launcher forms (one job step over
all its nodes, in the site's image); on the local site it starts its own Ray, whose two groups
of workers are the local runs' two "nodes". Bus bandwidth as rccl-tests and nccl-tests count it for an
all-reduce: bytes / time x 2(n-1)/n, with each iteration's time the slowest rank's, and the median
over the iterations.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.engines.collective_probe import MARK, PROGRESS_PREFIX
from rlvr_scaling.execution.engine_record import RECORD_DIR_VAR
from rlvr_scaling.execution.fabric_record import fabric_environment, transport_record
from rlvr_scaling.execution.run_records import TRAINER_MODULE, trainer_module
from rlvr_scaling.inputs.container import python_command
from rlvr_scaling.study.config import Study

PROBE_MODULE = "rlvr_scaling.engines.collective_probe"
MB = 1e6
GB = 1e9


def bus_bandwidth_gb_per_s(nbytes: int, ranks: int, seconds: list[list[float]]) -> float | None:
    """`seconds`: per rank, each iteration's time. None when there is no positive time to divide by."""
    slowest = [max(times) for times in zip(*seconds, strict=True)] if seconds else []
    if not slowest or statistics.median(slowest) <= 0:
        return None
    return nbytes / statistics.median(slowest) * 2 * (ranks - 1) / ranks / GB


def ranks_at(record_dir: Path) -> dict[int, tuple[int, str]]:
    """Each rank's last stage as it noted it (engines.collective_probe.Progress): rank -> (its count
    of stages, the stage)."""
    found = {}
    for path in record_dir.glob(f"{PROGRESS_PREFIX}*.txt") if record_dir.is_dir() else []:
        count, _, stage = path.read_text().strip().partition("\t")
        rank = path.stem.removeprefix(PROGRESS_PREFIX)
        if count.isdigit() and rank.isdigit():
            found[int(rank)] = (int(count), stage)
    return found


def where_stopped(record: dict[str, Any]) -> str:
    """Where the ranks stopped, the least advanced first: what a hang's line names."""
    at = record.get("ranks_at") or {}
    if not at:
        return f"stopped in {record.get('stage', 'its start')}, before any rank noted a stage"
    least = min(count for count, _ in at.values())
    behind = sorted(int(rank) for rank, (count, _) in at.items() if count == least)
    stage = next(stage for count, stage in at.values() if count == least)
    waiting = len(at) - len(behind)
    ahead = f" (the other {waiting} rank(s) past it, waiting on them)" if waiting else ""
    unseen = record.get("ranks", len(at)) - len(at)
    missing = f"; {unseen} rank(s) never started" if unseen > 0 else ""
    return f"rank(s) {', '.join(map(str, behind))} stopped at {stage}{ahead}{missing}"


def judge(study: Study, record: dict[str, Any]) -> list[str]:
    """One line per failure: not in time, the wrong transport, under the floor."""
    fabric = study.site.fabric
    nodes = ", ".join(record.get("nodes", []))
    if not record.get("finished"):
        why = record.get("error") or where_stopped(record)
        return [
            f"the all-reduce across nodes {nodes} on {fabric.collective_new_groups} new process group(s) did not "
            f"finish within {fabric.collective_timeout_seconds:g} s (fabric.collective_timeout_seconds): {why}; "
            f"the ranks' logs are in {record.get('log_dir')}"
        ]
    problems = []
    transport = record["transport"]
    if not transport["valid_for_scaling"]:
        problems.append(f"the all-reduce across nodes {nodes}: {transport['detail']}")
    if not record.get("sums_right"):
        problems.append(f"the all-reduce across nodes {nodes} gave wrong sums")
    bandwidth = record.get("bus_bandwidth_gb_per_s")
    if bandwidth is None or bandwidth < fabric.floor_gb_per_s:
        # Four figures: never rounded up to the floor it is under.
        shown = "not measurable" if bandwidth is None else f"{bandwidth:.4g} GB/s"
        problems.append(
            f"the all-reduce's bus bandwidth across nodes {nodes} is {shown}, under the site's floor of "
            f"{fabric.floor_text()}"
        )
    return problems


def _request(study: Study, nodes: list[str], local_groups: bool, record_dir: Path) -> dict[str, Any]:
    fabric, site = study.site.fabric, study.site
    # A test's stand-in trainer (tests/standin_trainer.py, the rehearsal) has one worker per node and no
    # GPU: one CPU rank per node stands in for the node's GPUs. Production: a rank per GPU, on the GPU.
    standin = trainer_module() != TRAINER_MODULE
    return {
        "nodes": nodes,
        "ranks_per_node": 1 if standin else site.hardware.gpus_per_node,
        "use_gpus": not site.cpu_engine and not standin,
        "local_groups": local_groups,
        "backend": "nccl" if fabric.nccl else "gloo",  # torch names RCCL's backend nccl too
        "bytes": int(fabric.collective_megabytes * MB),
        "iterations": fabric.collective_iterations,
        "new_groups": fabric.collective_new_groups,
        "timeout_s": fabric.collective_timeout_seconds,
        "env": {RECORD_DIR_VAR: str(record_dir), **fabric_environment(study, record_dir)},
    }


def run_collective(
    study: Study, root: Path, env: dict[str, str], log_dir: Path, nodes: list[str], local_groups: bool
) -> tuple[dict[str, Any], list[str]]:
    """Run the probe (as a driver of the cluster `env`'s RAY_ADDRESS names, or on its own Ray with
    `local_groups`) and judge it; the record holds the transport per node, the bandwidth and the time."""
    # Fresh: the transport is read from the files in it, and an earlier preflight's must not count.
    shutil.rmtree(log_dir, ignore_errors=True)
    record_dir = log_dir / "engine"
    record_dir.mkdir(parents=True, exist_ok=True)
    request = _request(study, nodes, local_groups, record_dir)
    fabric = study.site.fabric
    limit = fabric.collective_timeout_seconds
    record: dict[str, Any] = {"nodes": nodes, "log_dir": str(log_dir), "library": fabric.library}
    # In results/: on a container site the image sees it there.
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=paths.results_dir(root), delete=False) as handle:
        json.dump(request, handle)
    command = [*python_command(study, root), "-m", PROBE_MODULE, handle.name]
    # Its own limit plus Ray's start: the probe reports a hang itself; this stops a probe that cannot.
    stop_after = limit + 120
    try:
        with open(log_dir / "probe.log", "w") as log:
            result = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env, timeout=stop_after)
        marked = [line[len(MARK) :] for line in result.stdout.splitlines() if line.startswith(MARK)]
        no_report: dict[str, Any] = {"finished": False, "error": f"no report, exit {result.returncode}"}
        report = json.loads(marked[-1]) if marked else no_report
    except subprocess.TimeoutExpired:
        report = {"finished": False, "stage": f"the probe itself, stopped after {stop_after:g} s"}
    finally:
        Path(handle.name).unlink(missing_ok=True)
    record.update({k: v for k, v in report.items() if k != "ranks_done"})
    # What it was judged against, beside what it measured.
    record.update(
        new_groups=fabric.collective_new_groups,
        iterations=fabric.collective_iterations,
        floor_gb_per_s=fabric.floor_gb_per_s,
        floor=fabric.floor_text(),
    )
    if not report.get("finished"):
        record["ranks_at"] = {str(rank): at for rank, at in sorted(ranks_at(record_dir).items())}
    else:
        done = report["ranks_done"]
        seconds = [r["seconds"] for r in done]
        record["bus_bandwidth_gb_per_s"] = bus_bandwidth_gb_per_s(report["bytes"], len(done), seconds)
        record["sums_right"] = all(r["sum_right"] for r in done)
        record["ranks_per_node"] = {node: sum(r["node"] == node for r in done) for node in nodes}
    record["transport"] = transport_record(study, len(nodes), record_dir, nodes)
    return record, judge(study, record)
