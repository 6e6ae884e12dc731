"""The study's scaling relations, written once (docs/study.md).

Weak-scaling efficiency(N) = throughput per GPU at N nodes / throughput per GPU at 1 node.
Strong-scaling speedup(N) = step time at the reference nodes / step time at N nodes; ideal = N / ref;
efficiency = speedup / ideal.
"""

from __future__ import annotations


def weak_efficiency(throughput_n: float, throughput_1: float) -> float:
    return throughput_n / throughput_1


def strong_speedup(step_time_ref: float, step_time_n: float) -> float:
    return step_time_ref / step_time_n


def ideal_speedup(nodes: int, reference_nodes: int) -> float:
    return nodes / reference_nodes


def strong_efficiency(step_time_ref: float, step_time_n: float, nodes: int, reference_nodes: int) -> float:
    return strong_speedup(step_time_ref, step_time_n) / ideal_speedup(nodes, reference_nodes)


def ideal_phase_time(phase_time_base: float, base_nodes: int, nodes: int, series: str) -> float:
    """Weak scaling keeps per-node work constant (ideal: unchanged); strong divides it by N / base."""
    return phase_time_base if series == "weak" else phase_time_base * base_nodes / nodes


def extra_time_shares(phases_n: dict[str, float], ideal: dict[str, float]) -> dict[str, dict[str, float]]:
    """Each phase's time over its ideal, and its share of the total extra step time."""
    extra = {p: phases_n[p] - ideal[p] for p in phases_n}
    total = sum(extra.values())
    return {p: {"extra_s": e, "share": e / total if total else float("nan")} for p, e in extra.items()}
