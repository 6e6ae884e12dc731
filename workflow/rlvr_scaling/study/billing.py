"""What a site's allocation is charged, in the site's own unit (site key `billing`): a node-hour of the
runs' partition, and the image build's CPU job, priced as the site's billing page says."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlvr_scaling.study.section_base import Section


@dataclass(frozen=True)
class Billing(Section):
    unit: str = ""  # what the allocation is counted in (LUMI: GPU-hours); empty: not stated
    per_node_hour: float = 1.0  # units charged for one node-hour of a run's partition
    build_unit: str = ""  # what the image build's CPU job is counted in (LUMI: CPU-core-hours)
    # Memory is charged as cores per slice of this many GiB when that is more than the cores
    # (LUMI's `small`: max(cores, ceil(memory / 2 GB))); 0: cores only.
    build_memory_slice_gb: float = 0.0
    source: str = ""

    def node_hours_in_units(self, node_hours: float) -> float:
        return node_hours * self.per_node_hour


def build_charge(billing: Billing, cpus: int, mem_mb: int, minutes: float) -> float | None:
    """The build job's charge in build_unit at its full time limit, or None where the site states no
    build unit. Slurm's --mem M is MiB; the site's slice is GiB."""
    if not billing.build_unit:
        return None
    slices = math.ceil(mem_mb / 1024 / billing.build_memory_slice_gb) if billing.build_memory_slice_gb else 0
    return max(cpus, slices) * minutes / 60
