"""A run's predicted step time, and where it comes from.

The site's estimate is ideal scaling: `seconds_per_trajectory` x trajectories / nodes. A published
study does not scale ideally (LUMI: the strong series' 16-node DAPO step is 165 s, not the 75 s ideal
scaling gives; every weak GSM8K step grows by up to 55.6 s), and the time limits, the hang guard, the
engine smoke's length, the budget gate and `plan`'s node-hours all rest on the prediction. Where the
study names a reference (config/references/) that it is comparable with, each scaling run's ideal
step is multiplied by the published shape at its node count:

- weak: 1 + growth x (N - 1) / (N_pub - 1), the published step growth from one node to N_pub nodes
  (seconds, as a share of the site's own one-node step at the published workload), linear in the
  nodes as the published trend is ("about -1.4 points per added node");
- strong: the published step time over the ideal one at the published workload, at each published
  node count; between two of them interpolated in log2(nodes); below the reference node count the
  reference's own factor ("nearly proportional" between one and four nodes), above the last one held.

A run in both series (the reference-node run) takes the larger. The factor is relative, so it applies
to any base: the site's estimate, or the line the measured sweep calibrates (analysis.cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlvr_scaling.study.config import Study


@dataclass(frozen=True)
class Shape:
    """The published step over the ideal one at a node count, and the words that say where from."""

    factor: float
    source: str


def ideal_step_s(study: Study, dataset: str, nodes: int, trajectories: int) -> float:
    return study.config.datasets[dataset].estimate.seconds_per_trajectory * trajectories / nodes


def not_comparable(study: Study, dataset: str, reference: dict[str, Any]) -> str | None:
    """Why the reference's timings say nothing of this study's runs of `dataset`, or None."""
    comparable = reference.get("comparable", {})
    config = study.config
    ours = {
        "site": study.site_name,
        "model": config.model.name,
        "gpus_per_node": study.site.hardware.gpus_per_node,
        "responses_per_prompt": config.algorithm.responses_per_prompt,
        "strong_reference_nodes": config.scaling.strong_reference_nodes,
    }
    for key, value in ours.items():
        if key in comparable and comparable[key] != value:
            return f"{key} {value!r}, the reference's {comparable[key]!r}"
    caps = comparable.get("max_response_length", {})
    if dataset not in comparable.get("workloads", {}) or dataset not in caps:
        return f"dataset {dataset} is not in the reference"
    if caps[dataset] != config.datasets[dataset].max_response_length:
        return f"max_response_length {config.datasets[dataset].max_response_length}, the reference's {caps[dataset]}"
    return None


def _numbers(reference: dict[str, Any], dataset: str, quantity: str) -> dict[int, float]:
    return {
        int(entry["nodes"]): float(entry["value"])
        for entry in reference.get("numbers", [])
        if entry.get("dataset") == dataset and entry.get("quantity") == quantity and "nodes" in entry
    }


class PublishedShape:
    """One dataset's published scaling shape, read from the study's reference."""

    def __init__(self, study: Study, dataset: str, reference: dict[str, Any]) -> None:
        self.name = reference.get("name", "the reference")
        workload = int(reference["comparable"]["workloads"][dataset])
        self.reference_nodes = study.config.scaling.strong_reference_nodes
        responses = study.config.algorithm.responses_per_prompt
        one_node = ideal_step_s(study, dataset, 1, workload * responses)
        growth = _numbers(reference, dataset, "weak_step_growth_s")
        # (nodes, growth as a share of the one-node step): the largest node count published
        self.weak = max(((n, g / one_node) for n, g in growth.items() if n > 1), default=None)
        times = _numbers(reference, dataset, "strong_step_time_s")
        for nodes, speedup in _numbers(reference, dataset, "strong_speedup").items():
            if nodes not in times and self.reference_nodes in times and speedup > 0:
                times[nodes] = times[self.reference_nodes] / speedup
        strong_prompts = workload * self.reference_nodes
        self.strong = {
            n: t / ideal_step_s(study, dataset, n, strong_prompts * responses) for n, t in sorted(times.items())
        }
        self.strong_times = dict(sorted(times.items()))

    def weak_shape(self, nodes: int) -> Shape | None:
        if self.weak is None:
            return None
        last, growth = self.weak
        covered = min(nodes, last)
        factor = 1 + growth * (covered - 1) / (last - 1)
        held = f", held beyond {last}" if nodes > last else ""
        return Shape(factor, f"{self.name}: weak step +{growth:.1%} at {last} nodes{held}")

    def strong_shape(self, nodes: int) -> Shape | None:
        if self.reference_nodes not in self.strong:
            return None
        points = sorted(self.strong.items())
        published = f"{self.name}: strong step " + ", ".join(f"{t:g} s at {n}" for n, t in self.strong_times.items())
        if nodes <= self.reference_nodes:
            how = "" if nodes == self.reference_nodes else f", proportional below {self.reference_nodes}"
            return Shape(self.strong[self.reference_nodes], f"{published} nodes{how}")
        if nodes >= points[-1][0]:
            how = "" if nodes == points[-1][0] else f", held beyond {points[-1][0]}"
            return Shape(points[-1][1], f"{published} nodes{how}")
        below = max((p for p in points if p[0] <= nodes), key=lambda p: p[0])
        above = min((p for p in points if p[0] > nodes), key=lambda p: p[0])
        if below[0] == nodes:
            return Shape(below[1], f"{published} nodes")
        share = (math.log2(nodes) - math.log2(below[0])) / (math.log2(above[0]) - math.log2(below[0]))
        factor = below[1] + share * (above[1] - below[1])
        return Shape(factor, f"{published} nodes, interpolated in log2(nodes)")

    def shape(self, series: list[str], nodes: int) -> Shape | None:
        """The larger factor of the run's series that the reference covers; None: none does."""
        found = [
            shape
            for shape in (
                self.weak_shape(nodes) if "weak" in series else None,
                self.strong_shape(nodes) if "strong" in series else None,
            )
            if shape is not None
        ]
        return max(found, key=lambda shape: shape.factor) if found else None


def published_shapes(study: Study) -> dict[str, PublishedShape]:
    """Per dataset the study shares with its reference, its published shape; empty without one."""
    reference = study.reference()
    if reference is None or "comparable" not in reference:
        return {}
    return {
        dataset: PublishedShape(study, dataset, reference)
        for dataset in study.datasets
        if not_comparable(study, dataset, reference) is None
    }
