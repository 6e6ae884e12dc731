"""The LUMI study on a clock `factor` times faster: every duration the study, its site and its
reference set is divided by the factor, so that the same plan, limits, bounds and verdict come out
in compressed seconds. What the test cluster cannot be is changed too, each change with its reason
(`SITE_CHANGES`); everything else is LUMI's site file as it is."""

from __future__ import annotations

import copy
import math
from typing import Any

# The reference's numbers that are durations (seconds): divided; the rest are ratios and shares.
DURATION_QUANTITIES = ("weak_step_growth_s", "strong_step_time_s", "training_phases_s")
# The preflight's own probes are real work on this machine, not compressed (verl's import, torch's
# all-reduce between two groups of workers: about 40 s here): its limit is never under this.
PREFLIGHT_MINUTES_AT_LEAST = 3
# How often the launcher looks for a step (LUMI: 1 s): 0.1 s here, 20 s at LUMI's scale with the
# default factor, the finest a Python loop on this machine's 2 cores keeps up with beside the runs.
POLL_SECONDS = 0.1

SITE_CHANGES = {
    "container": "none: LUMI's image builds from the AI Factory's base, which only LUMI has "
    "(tests/test_apptainer.py builds and runs an image on this cluster)",
    "storage": "none: results in the rehearsal's own folder, not LUMI's scratch",
    "launch.kind": "local: 16 Ray nodes do not start on 2 cores (measured: 2 of 16 joined within 120 s); "
    "the stand-in's workers start one per node as one srun step, as ray-srun starts Ray "
    "(tests/test_slurm.py runs the ray-srun launcher across two nodes)",
    "fabric": "the stand-in's TCP connections, judged as the CI site's Gloo over TCP (LUMI's RCCL over "
    "Slingshot is judged by the same code from RCCL's own lines: tests/test_fabric.py)",
    "environment": "GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME name the loopback: LUMI's Slingshot "
    "interfaces (hsn0-3) are not on this machine",
    "launch.poll_seconds": f"{POLL_SECONDS} s: the finest poll this machine keeps up with",
    "slurm.preflight_minutes": f"at least {PREFLIGHT_MINUTES_AT_LEAST:g} min: its probes are real work here",
}


def site(lumi: dict[str, Any], factor: float) -> dict[str, Any]:
    """LUMI's site file, compressed and fitted to the test cluster (SITE_CHANGES)."""
    changed = copy.deepcopy(lumi)
    changed["container"] = None
    changed.pop("storage", None)
    slurm = changed["slurm"]
    # Whole minutes, as Slurm takes them (and the site schema): rounded up, never shorter.
    slurm["max_walltime_minutes"] = math.ceil(slurm["max_walltime_minutes"] / factor)
    slurm["preflight_minutes"] = math.ceil(max(PREFLIGHT_MINUTES_AT_LEAST, slurm["preflight_minutes"] / factor))
    launch = changed["launch"]
    launch["kind"] = "local"
    launch.pop("node_interface", None)
    launch["stall_floor_minutes"] = launch.get("stall_floor_minutes", 10.0) / factor
    launch["poll_seconds"] = POLL_SECONDS
    launch["join_timeout_seconds"] = launch.get("join_timeout_seconds", 600.0) / factor
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        if name in changed.get("environment", {}):
            changed["environment"][name] = "lo"
    changed["fabric"] = {
        "library": "gloo",
        "transport": "tcp",
        "collective_megabytes": 8,
        "collective_iterations": 3,
        "collective_timeout_seconds": 180,
        "bandwidth_floor_gb_per_s": 0.01,
        "source": "the rehearsal (tests/rehearsal): the stand-in's TCP connections, one per node",
    }
    return changed


def study_overrides(config: dict[str, Any], factor: float) -> dict[str, Any]:
    """The study's durations divided by `factor`, as the dotted `overrides:` of a study file."""
    estimate = config["estimate"]
    found = {
        "estimate.startup_minutes": estimate["startup_minutes"] / factor,
        "estimate.startup_minutes_per_doubling": estimate.get("startup_minutes_per_doubling", 0.0) / factor,
        "estimate.min_time_limit_minutes": estimate.get("min_time_limit_minutes", 10.0) / factor,
    }
    for name, dataset in config["datasets"].items():
        per_trajectory = dataset["estimate"]["seconds_per_trajectory"]
        found[f"datasets.{name}.estimate.seconds_per_trajectory"] = per_trajectory / factor
    return found


def reference(published: dict[str, Any], factor: float) -> dict[str, Any]:
    """The published reference with its durations (and their absolute tolerances) divided."""
    changed = copy.deepcopy(published)
    # Said where every report cites it (the title, in the verdict's line and the bundle's citation).
    changed["title"] = f"{published['title']} (the rehearsal: its durations divided by {factor:g})"
    for number in changed["numbers"]:
        if number["quantity"] in DURATION_QUANTITIES:
            number["value"] = number["value"] / factor
            tolerance = number.get("tolerance", {})
            if "absolute" in tolerance:
                tolerance["absolute"] = tolerance["absolute"] / factor
    return changed
