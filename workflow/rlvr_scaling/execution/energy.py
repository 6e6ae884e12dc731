"""A node's energy counters, as the site names them (`energy.source`), read by the launcher at the
run's start and end and at each step boundary it sees (execution.step_clock).

- `pm_counters`: HPE Cray's /sys/cray/pm_counters (LUMI): cumulative joules of the node (`energy`),
  each accelerator (`accel<N>_energy`: on LUMI one per MI250X, two GCDs), the CPU and the memory,
  each file "<joules> J <microseconds> us".
- `nvml`: NVIDIA's per-GPU total energy since the driver loaded (nvmlDeviceGetTotalEnergyConsumption,
  millijoules), through pynvml when the image has it; the node's figure is then the GPUs' sum.
- `none` (and any counter that cannot be read): nothing is recorded, and the summaries say "not
  measured", never 0.

The launcher runs on a run's first node: the counters read are that node's. A summary's joules per
step are per node, and per trajectory they assume the run's nodes draw alike (summary says so).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

PM_COUNTERS = Path("/sys/cray/pm_counters")
_PM_LINE = re.compile(r"^\s*(\d+)\s+J\b")
_PM_FILES = re.compile(r"^(energy|cpu_energy|memory_energy|accel\d+_energy)$")


def read_pm_counters(folder: Path) -> dict[str, float] | None:
    """Joules by counter (`node`, `cpu`, `memory`, `accel0`, ...); None when the node's total is not there."""
    found: dict[str, float] = {}
    try:
        names = sorted(p.name for p in folder.iterdir() if _PM_FILES.match(p.name))
    except OSError:
        return None
    for name in names:
        try:
            match = _PM_LINE.match((folder / name).read_text())
        except (OSError, UnicodeDecodeError):
            continue
        if match:
            found["node" if name == "energy" else name.removesuffix("_energy")] = float(match.group(1))
    return found if "node" in found else None


def read_nvml() -> dict[str, float] | None:
    """Joules by GPU (`gpu0`, ...) and their sum as `node`; None without pynvml or a GPU."""
    try:
        import pynvml  # type: ignore[import-not-found]  # optional, NVIDIA sites only; not in the local environment
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            found = {
                f"gpu{i}": pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(i)) / 1000.0
                for i in range(pynvml.nvmlDeviceGetCount())
            }
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None
    return {**found, "node": sum(found.values())} if found else None


class EnergyMeter:
    """The site's counters; `read()` is None whenever they cannot be read (the run goes on)."""

    def __init__(self, source: str, path: str | None = None) -> None:
        self.source = source
        self.path = Path(path) if path else PM_COUNTERS

    def read(self) -> dict[str, float] | None:
        if self.source == "pm_counters":
            return read_pm_counters(self.path)
        if self.source == "nvml":
            return read_nvml()
        return None

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, **({"path": str(self.path)} if self.source == "pm_counters" else {})}


def joules_between(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    """Each counter's increase; None unless both readings have the node's total and it did not go back
    (a counter reset, e.g. a node rebooted: no figure rather than a wrong one)."""
    if not before or not after or "node" not in before or "node" not in after:
        return None
    spent = {key: after[key] - before[key] for key in before.keys() & after.keys()}
    return spent if spent["node"] >= 0 and all(v >= 0 for v in spent.values()) else None
