"""The reproduction verdict: every number and relation of the published study (a reference,
study.reference) against what this study measured.

Each gets one verdict: reproduced, not reproduced (the rule it broke, by how much), not measured (the
runs it needs are missing or invalid), or not comparable (the study is not the published one: another
site, model or workload; every entry then says what differs). The measured values come from the
tables' own rows (analysis.shown.tables), so a verdict and a table cell never disagree on a definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from rlvr_scaling.analysis.per_run.disturbance import is_disturbed
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.analysis.shown.tables import ALL_PHASES, extra_time_rows, strong_rows, weak_rows
from rlvr_scaling.study.reference import citation_text
from rlvr_scaling.study.sections import StudyConfig

REPRODUCED, NOT_REPRODUCED, NOT_MEASURED, NOT_COMPARABLE = (
    "reproduced",
    "not reproduced",
    "not measured",
    "not comparable",
)
TRAINING_PHASES = ("old_log_prob", "update_actor")
CATEGORICAL = ("strong_efficiency_decreasing_beyond_reference", "largest_extra_time_phase")


@dataclass(frozen=True)
class Measurement:
    value: float | str | None
    runs: tuple[str, ...]
    interval: tuple[float, float] | None = None
    missing: str = ""  # why there is no value


def _nan_free(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and math.isfinite(value)


class StudyFigures:
    """The measured figures a reference can ask for, by quantity, from the tables' rows."""

    def __init__(self, results: StudyResults, reference_nodes: int) -> None:
        self.results = results
        self.reference_nodes = reference_nodes
        self.weak = weak_rows(results)
        self.strong = strong_rows(results, reference_nodes)
        self.extra = extra_time_rows(results, reference_nodes)

    def _row(self, rows: list[dict], dataset: str, nodes: int, **match: Any) -> dict | None:
        return next(
            (
                r
                for r in rows
                if r["dataset"] == dataset and r["nodes"] == nodes and all(r[k] == v for k, v in match.items())
            ),
            None,
        )

    def _run(self, dataset: str, series: str, nodes: int) -> Any:
        return self.results.run_at(dataset, series, nodes)

    def number(self, entry: dict[str, Any]) -> Measurement:
        quantity, dataset, nodes = entry["quantity"], entry["dataset"], entry["nodes"]
        absent = Measurement(None, (), missing=f"no valid {dataset} run at {nodes} node(s) for {quantity}")
        if quantity in ("weak_efficiency", "weak_step_growth", "weak_step_growth_s"):
            row, base = self._row(self.weak, dataset, nodes), self._row(self.weak, dataset, 1)
            if row is None or base is None:
                return absent
            runs = (base["run_id"], row["run_id"]) if base is not row else (row["run_id"],)
            if quantity == "weak_efficiency":
                interval = (row["efficiency_ci_low"], row["efficiency_ci_high"])
                return Measurement(row["efficiency"], runs, interval)
            growth = row["step_time_s"] - base["step_time_s"]
            return Measurement(growth if quantity.endswith("_s") else growth / base["step_time_s"], runs)
        if quantity in ("strong_step_time_s", "strong_speedup"):
            row = self._row(self.strong, dataset, nodes)
            if row is None or (quantity == "strong_speedup" and not row["reference_run_id"]):
                return absent
            if quantity == "strong_step_time_s":
                return Measurement(
                    row["step_time_s"], (row["run_id"],), (row["step_time_ci_low_s"], row["step_time_ci_high_s"])
                )
            runs = tuple(dict.fromkeys((row["reference_run_id"], row["run_id"])))
            return Measurement(row["speedup"], runs, (row["speedup_ci_low"], row["speedup_ci_high"]))
        series = entry.get("series", "weak")
        if quantity == "gen_share_of_extra_time":
            row = self._row(self.extra, dataset, nodes, series=series)
            if row is None:
                return absent
            return Measurement(row["gen_share"], (row["base_run_id"], row["run_id"]))
        run = self._run(dataset, series, nodes)
        if run is None:
            return absent
        phases, step = run.measured.phases_s, run.measured.step_time_s.mean
        value = {
            "gen_share_of_step": phases["gen"].mean / step,
            "training_phases_s": sum(phases[p].mean for p in TRAINING_PHASES),
            "training_share_of_step": sum(phases[p].mean for p in TRAINING_PHASES) / step,
        }[quantity]
        return Measurement(value, (run.run_id,))

    def relation(self, entry: dict[str, Any]) -> Measurement:
        kind, dataset = entry["relation"], entry["dataset"]
        if kind.startswith("weak_"):
            rows = [r for r in self.weak if r["dataset"] == dataset and _nan_free(r["efficiency"])]
            if len(rows) < (3 if kind == "weak_efficiency_slope" else 2):
                return Measurement(
                    None, (), missing=f"fewer than {3 if kind.endswith('slope') else 2} valid weak {dataset} runs"
                )
            runs = tuple(r["run_id"] for r in rows)
            if kind == "weak_efficiency_slope":
                return Measurement(_slope([r["nodes"] for r in rows], [r["efficiency"] for r in rows]), runs)
            return Measurement(min(r["efficiency"] for r in rows), runs)
        if kind.startswith("strong_"):
            rows = [r for r in self.strong if r["dataset"] == dataset and _nan_free(r["efficiency"])]
            below = kind == "strong_efficiency_at_least_up_to_reference"
            chosen = [
                r for r in rows if (r["nodes"] < self.reference_nodes if below else r["nodes"] >= self.reference_nodes)
            ]
            if len(chosen) < (1 if below else 3):
                side = "below" if below else "from"
                return Measurement(
                    None, (), missing=f"too few valid strong {dataset} runs {side} {self.reference_nodes} nodes"
                )
            runs = tuple(dict.fromkeys([*(r["reference_run_id"] for r in chosen), *(r["run_id"] for r in chosen)]))
            if below:
                return Measurement(min(r["efficiency"] for r in chosen), runs)
            effs = [r["efficiency"] for r in sorted(chosen, key=lambda r: r["nodes"])]
            decreasing = all(b < a for a, b in zip(effs, effs[1:], strict=False)) and effs[-1] < 1
            shown = ", ".join(f"{r['nodes']}: {r['efficiency']:.3f}" for r in sorted(chosen, key=lambda r: r["nodes"]))
            return Measurement("yes" if decreasing else "no", runs, missing=shown)
        # largest_extra_time_phase, at the largest strong node count measured
        rows = [r for r in self.extra if r["dataset"] == dataset and r["series"] == "strong"]
        if not rows:
            return Measurement(None, (), missing=f"no strong {dataset} run beyond {self.reference_nodes} nodes")
        row = max(rows, key=lambda r: r["nodes"])
        largest = max(ALL_PHASES, key=lambda p: row[f"{p}_extra_s"])
        return Measurement(largest, (row["base_run_id"], row["run_id"]), missing=f"at {row['nodes']} nodes")


def _slope(x: list[float], y: list[float]) -> float:
    """Least-squares slope of y on x."""
    mx, my = sum(x) / len(x), sum(y) / len(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sum((a - mx) ** 2 for a in x)


def differences_from_reference(config: StudyConfig, results: StudyResults, comparable: dict[str, Any]) -> list[str]:
    """What makes this study another one than the published: each as `what: ours, the reference's`."""
    found = []

    def differs(what: str, ours: Any, theirs: Any) -> None:
        if ours != theirs:
            found.append(f"{what} {ours}, the reference's {theirs}")

    differs("site", config.site, comparable["site"])
    differs("model", config.model.name, comparable["model"])
    differs("responses per prompt", config.algorithm.responses_per_prompt, comparable["responses_per_prompt"])
    differs("strong reference nodes", config.scaling.strong_reference_nodes, comparable["strong_reference_nodes"])
    gpus = {s.gpus // s.nodes for s in results.summaries.values() if s.nodes}
    if gpus and gpus != {comparable["gpus_per_node"]}:
        differs("GPUs per node", sorted(gpus), comparable["gpus_per_node"])
    for dataset in results.datasets():
        one = results.run_at(dataset, "weak", 1)
        if dataset not in comparable["workloads"]:
            found.append(f"dataset {dataset} is not in the reference")
            continue
        if one is not None:
            differs(f"{dataset} workload (prompts per node)", one.prompts, comparable["workloads"][dataset])
        cap = config.datasets[dataset].max_response_length if dataset in config.datasets else None
        differs(f"{dataset} response cap", cap, comparable["max_response_length"].get(dataset))
    return found


def _tolerance_text(rule: dict[str, float]) -> str:
    [(kind, amount)] = rule.items()
    return {
        "relative": f"within {amount:.0%}",
        "absolute": f"within {amount:g}",
        "interval_factor": f"in the 95% interval x {amount:g}",
    }[kind]


def judge_number(measured: Measurement, published: float, rule: dict[str, float]) -> tuple[str, str]:
    """Verdict and why, for a number under one tolerance rule."""
    value = measured.value
    if not _nan_free(value):
        return NOT_MEASURED, measured.missing or "no finite value"
    [(kind, amount)] = rule.items()
    difference = value - published
    if kind == "relative":
        ok = abs(difference) <= amount * abs(published)
        why = f"differs by {abs(difference) / abs(published):.1%}" if published else f"differs by {difference:g}"
    elif kind == "absolute":
        ok = abs(difference) <= amount
        why = f"differs by {abs(difference):.3g}"
    else:
        if measured.interval is None or not all(_nan_free(v) for v in measured.interval):
            return NOT_MEASURED, "no interval for this figure (a run with one measured step?)"
        low, high = measured.interval
        low, high = value - amount * (value - low), value + amount * (high - value)
        ok = low <= published <= high
        why = f"widened interval [{low:.4g}, {high:.4g}]"
    return (REPRODUCED if ok else NOT_REPRODUCED), f"{why}; rule: {_tolerance_text(rule)}"


def judge_relation(entry: dict[str, Any], measured: Measurement, rule: dict[str, float]) -> tuple[str, str]:
    kind = entry["relation"]
    if measured.value is None:
        return NOT_MEASURED, measured.missing
    if kind == "weak_efficiency_slope":
        verdict, why = judge_number(measured, entry["value"], rule)
        return verdict, f"slope {measured.value:.4f} per node; {why}"
    if kind in ("weak_efficiency_at_least", "strong_efficiency_at_least_up_to_reference"):
        floor = entry["value"] - rule.get("absolute", 0.0)
        ok = measured.value >= floor
        return (
            REPRODUCED if ok else NOT_REPRODUCED
        ), f"lowest efficiency {measured.value:.3f}, at least {floor:g} asked"
    if kind == "strong_efficiency_decreasing_beyond_reference":
        ok = measured.value == "yes"
        return (
            REPRODUCED if ok else NOT_REPRODUCED
        ), f"efficiency by nodes {measured.missing}: decreasing and below 1 asked"
    ok = measured.value == entry["value"]
    return (REPRODUCED if ok else NOT_REPRODUCED), f"largest extra time {measured.missing}: {measured.value}"


def _row(
    entry: dict[str, Any], kind: str, measured: Measurement | None, verdict: str, why: str, rule: dict
) -> dict[str, Any]:
    value = measured.value if measured else None
    published = entry.get("value")
    interval = measured.interval if measured and measured.interval else (math.nan, math.nan)
    return {
        "id": entry["id"],
        "kind": kind,
        "dataset": entry["dataset"],
        "what": entry.get("quantity") or entry.get("relation"),
        "nodes": entry.get("nodes"),
        "measured": value,
        "ci_low": interval[0],
        "ci_high": interval[1],
        "published": published,
        "difference": value - published if _nan_free(value) and _nan_free(published) else None,
        # a yes/no relation (a trend, which phase dominates) has no tolerance
        "tolerance": "" if kind == "relation" and entry["relation"] in CATEGORICAL else _tolerance_text(rule),
        "verdict": verdict,
        "why": why,
        "source": entry["source"],
        "run_ids": " ".join(measured.runs) if measured else "",
    }


def reproduction_rows(
    results: StudyResults, config: StudyConfig, reference: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """One row per published number and relation, with its verdict; none without a reference."""
    if reference is None:
        return []
    figures = StudyFigures(results, config.scaling.strong_reference_nodes)
    differences = differences_from_reference(config, results, reference["comparable"])
    rows = []
    for kind, entries in (("number", reference["numbers"]), ("relation", reference.get("relations", []))):
        for entry in entries:
            rule = entry.get("tolerance", reference["default_tolerance"])
            measured = figures.number(entry) if kind == "number" else figures.relation(entry)
            if differences:
                verdict, why = NOT_COMPARABLE, "; ".join(differences)
            elif kind == "number":
                verdict, why = judge_number(measured, entry["value"], rule)
            else:
                verdict, why = judge_relation(entry, measured, rule)
            row = _row(entry, kind, measured, verdict, why, rule)
            # the runs it is made from whose steps were disturbed (analysis.per_run.disturbance): the verdict says so
            row["rests_on_disturbed"] = " ".join(r for r in measured.runs if _disturbed(results, r))
            rows.append(row)
    return rows


def _disturbed(results: StudyResults, run_id: str) -> bool:
    summary = results.summaries.get(run_id)
    return summary is not None and summary.measured is not None and is_disturbed(summary.measured.disturbance)


def reproduction_findings(rows: list[dict[str, Any]], reference: dict[str, Any] | None) -> list[str]:
    """The report's lines: the verdict count, then every number that is not reproduced."""
    if reference is None:
        return ["No published study named (study.reference): nothing to judge against."]
    counts = {
        v: sum(r["verdict"] == v for r in rows) for v in (REPRODUCED, NOT_REPRODUCED, NOT_MEASURED, NOT_COMPARABLE)
    }
    head = (
        f"Against {citation_text(reference)} ({reference['name']}): "
        + ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n)
        + f" of {len(rows)} published numbers and relations."
    )
    if counts[NOT_COMPARABLE]:
        return [head, f"Not comparable: {rows[0]['why']}."]
    lines = [head, *(f"{r['id']}: {r['verdict']} ({r['why']})" for r in rows if r["verdict"] != REPRODUCED)]
    resting = [r for r in rows if r.get("rests_on_disturbed")]
    if resting:
        lines.append(
            f"{len(resting)} of these verdicts rest on a run whose steps were disturbed (see Disturbed runs): "
            + "; ".join(f"{r['id']} ({r['verdict']}, run {r['rests_on_disturbed']})" for r in resting)
        )
    return lines
