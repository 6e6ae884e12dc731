"""Two studies side by side (`rlvr-scaling compare A B`): bundles or result folders, every scaling point
both measured, a verdict per point by a stated test, what differs between them, a figure that
overlays them and a one-paragraph summary.

The test: B's mean step time over A's, with the 95% interval of that ratio from resampling both runs'
measured steps (measured.stats.bootstrap_ci, the interval the tables give speedups). "faster" or
"slower" (B against A) when the interval excludes 1; "same" only when the whole interval lies within
1 +- the equivalence margin (`--margin`, default 5%): an interval that holds 1 only because it is wide
says nothing, so it is "inconclusive", with the smallest change the point could have detected (the
interval's half-width on the log scale, as a change of the step time). The same measurement on both
sides (one run's metrics, a study against its own bundle) is 1 exactly. Studies of another model, workload or
response cap measure other things: they are refused unless asked (`--force`), and what differs in
image, verl version, site and settings is said either way.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling.analysis.per_run.disturbance import is_disturbed
from rlvr_scaling.analysis.per_run.results_io import StudyResults, load_results
from rlvr_scaling.analysis.shown.tables import per_step_time, ratio_interval
from rlvr_scaling.errors import StudyError
from rlvr_scaling.measured.stats import BOOTSTRAP_METHOD
from rlvr_scaling.publish.unpack import unpack_bundle

SERIES = ("weak", "strong")
DEFAULT_MARGIN = 0.05
VERDICTS = ("same", "faster", "slower", "inconclusive")


def test_text(margin: float) -> str:
    return (
        f"B/A mean step time, {BOOTSTRAP_METHOD}; faster or slower when the interval excludes 1, same when it lies "
        f"within 1 +- {margin:.0%}, else inconclusive"
    )


def check_margin(margin: float) -> float:
    if not (isinstance(margin, int | float) and 0 < margin < 1):
        raise StudyError(
            f"compare: --margin {margin!r}: expected the equivalence margin as a fraction of the step time, "
            "between 0 and 1 (0.05 for 5%)"
        )
    return float(margin)


# Facts that make two studies measure different things, and those that only say how they ran.
DEFINING = ("model", "workloads", "response caps", "responses per prompt")
DESCRIBING = ("site", "verl", "image", "GPUs per node", "engine options")


@dataclass
class OpenedStudy:
    label: str
    root: Path
    results: StudyResults
    facts: dict[str, Any]


def open_study(path: Path, label: str, scratch: Path) -> OpenedStudy:
    """A bundle (unpacked into `scratch` as verify unpacks it) or a study's folder (or its results/)."""
    if path.is_file():
        unpacked = unpack_bundle(path, scratch / label)
        if unpacked.problems:
            raise StudyError(f"compare: {path} cannot be read as a bundle: {unpacked.problems[0]}")
        root = scratch / label
    elif (path / "results" / "index").is_dir():
        root = path
    elif path.name == "results" and (path / "index").is_dir():
        root = path.parent
    else:
        raise StudyError(f"compare: {path} is neither a bundle nor a study folder holding results/index/")
    indexes = sorted((root / "results" / "index").glob("*.json"))
    if not indexes:
        raise StudyError(f"compare: {path} holds no results/index/*.json: not a finished study")
    try:
        results = load_results(indexes, root)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StudyError(f"compare: {path}: its index or summaries cannot be read ({error!r})") from error
    return OpenedStudy(label, root, results, study_facts(results, root))


def _one_or_all(values: set[Any]) -> Any:
    cleaned = {v for v in values if v is not None}
    if not cleaned:
        return None
    return next(iter(cleaned)) if len(cleaned) == 1 else sorted(map(str, cleaned))


def study_facts(results: StudyResults, root: Path) -> dict[str, Any]:
    """What a reader must know to tell whether two studies can be compared, from their own records."""
    summaries = list(results.summaries.values())
    specs = []
    for s in summaries:
        spec_path = root / "results" / "runs" / s.run_id / "spec.json"
        if spec_path.is_file():
            specs.append(json.loads(spec_path.read_text()))
    workloads = {}
    for dataset in results.datasets():
        one = results.run_at(dataset, "weak", 1)
        workloads[dataset] = one.prompts if one else None
    return {
        "model": _one_or_all({spec["study"]["model"]["name"] for spec in specs}),
        "workloads": workloads,
        "response caps": {
            d: _one_or_all({s.max_response_length for s in summaries if s.dataset == d}) for d in workloads
        },
        "responses per prompt": _one_or_all({spec["run"]["responses_per_prompt"] for spec in specs}),
        "site": _one_or_all({s.site for s in summaries}),
        "verl": _one_or_all({(s.provenance.get("versions") or {}).get("verl") for s in summaries}),
        "image": {index.dataset: index.image_sha256 for index in results.indexes},
        "GPUs per node": _one_or_all({s.gpus // s.nodes for s in summaries if s.nodes}),
        "engine options": _one_or_all({repr(spec["site"].get("engine_options")) for spec in specs}),
    }


def fact_differences(a: OpenedStudy, b: OpenedStudy, names: tuple[str, ...]) -> list[str]:
    return [f"{name}: A {a.facts[name]!r}, B {b.facts[name]!r}" for name in names if a.facts[name] != b.facts[name]]


def verdict(low: float, high: float, margin: float) -> str:
    """The point's verdict from B/A's interval; at exactly 1 +- margin an interval still counts as within."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "not comparable (no interval: a run with fewer than two blocks of measured steps)"
    if high < 1.0:
        return "faster"
    if low > 1.0:
        return "slower"
    return "same" if 1.0 - margin <= low and high <= 1.0 + margin else "inconclusive"


def detectable_change(low: float, high: float) -> float:
    """The smallest change of the step time this point could have told from none: the interval's
    half-width on the log scale, as a ratio less 1 (a true change that size is detected about half the
    time; one twice that size nearly always)."""
    if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
        return math.nan
    return math.exp((math.log(high) - math.log(low)) / 2) - 1


def _same_measurement(sa: Any, sb: Any) -> bool:
    """One run's steps on both sides: the same run id and the same metrics file's bytes."""
    digest = sa.provenance.get("metrics_sha256")
    return sa.run_id == sb.run_id and digest is not None and digest == sb.provenance.get("metrics_sha256")


def _disturbed(summary: Any) -> bool:
    return summary is not None and summary.measured is not None and is_disturbed(summary.measured.disturbance)


def comparison_rows(a: OpenedStudy, b: OpenedStudy, margin: float = DEFAULT_MARGIN) -> list[dict[str, Any]]:
    """One row per (dataset, series, nodes) that either study measured."""
    rows = []
    for dataset in sorted(set(a.results.datasets()) | set(b.results.datasets())):
        for series in SERIES:
            runs_a = _series(a.results, dataset, series)
            runs_b = _series(b.results, dataset, series)
            for nodes in sorted(set(runs_a) | set(runs_b)):
                sa, sb = runs_a.get(nodes), runs_b.get(nodes)
                row: dict[str, Any] = {"dataset": dataset, "series": series, "nodes": nodes}
                row["a_step_time_s"] = sa.measured.step_time_s.mean if sa else None
                row["b_step_time_s"] = sb.measured.step_time_s.mean if sb else None
                row["ratio"] = row["ratio_ci_low"] = row["ratio_ci_high"] = row["detectable_change"] = None
                if sa and sb:
                    ratio = row["b_step_time_s"] / row["a_step_time_s"]
                    same = _same_measurement(sa, sb)
                    low, high = ratio_interval(per_step_time(sb), per_step_time(sa), same_run=same)
                    row.update(ratio=ratio, ratio_ci_low=low, ratio_ci_high=high, verdict=verdict(low, high, margin))
                    row["detectable_change"] = detectable_change(low, high)
                else:
                    row["verdict"] = "only in A" if sa else "only in B"
                # which side's run had disturbed steps (analysis.per_run.disturbance): the verdict rests on it
                row["disturbed"] = " ".join(side for side, s in (("A", sa), ("B", sb)) if _disturbed(s))
                row["a_throughput_per_gpu"] = sa.measured.throughput_per_gpu.mean if sa else None
                row["b_throughput_per_gpu"] = sb.measured.throughput_per_gpu.mean if sb else None
                row["a_run_id"], row["b_run_id"] = (sa.run_id if sa else ""), (sb.run_id if sb else "")
                rows.append(row)
    return rows


def _series(results: StudyResults, dataset: str, series: str) -> dict[int, Any]:
    if dataset not in results.datasets():
        return {}
    return {s.nodes: s for s in results.series(dataset, series)}


def _point(row: dict[str, Any]) -> str:
    return f"{row['dataset']} {row['series']} {row['nodes']} node(s)"


def summary_paragraph(
    a: OpenedStudy, b: OpenedStudy, rows: list[dict[str, Any]], margin: float = DEFAULT_MARGIN
) -> str:
    both = [r for r in rows if r["ratio"] is not None]
    counts = {v: sum(r["verdict"] == v for r in both) for v in VERDICTS}
    moved = [r for r in both if r["verdict"] in ("faster", "slower")]
    unsure = [r for r in both if r["verdict"] == "inconclusive"]
    text = (
        f"B ({b.label}) against A ({a.label}): of the {len(both)} scaling points both measured, "
        f"{counts['same']} are the same (interval within 1 +- {margin:.0%}), {counts['faster']} faster, "
        f"{counts['slower']} slower and {counts['inconclusive']} inconclusive (test: {test_text(margin)})."
    )
    if moved:
        text += (
            " Moved: " + "; ".join(f"{_point(r)} {r['verdict']} ({r['ratio']:.3f}x the step time)" for r in moved) + "."
        )
    if unsure:
        text += (
            " Inconclusive, with the smallest change each could detect: "
            + "; ".join(f"{_point(r)} {r['ratio']:.3f}x, +-{r['detectable_change']:.1%}" for r in unsure)
            + "."
        )
    if counts_other := len(both) - sum(counts.values()):
        text += f" {counts_other} point(s) have no interval (too few measured steps)."
    resting = [r for r in both if r["disturbed"]]
    if resting:
        text += (
            f" {len(resting)} verdict(s) rest on a run whose steps were disturbed (analysis.per_run.disturbance): "
            + "; ".join(f"{_point(r)} (run of {r['disturbed']})" for r in resting)
            + "."
        )
    only = len(rows) - len(both)
    if only:
        text += f" {only} point(s) were measured by one study only."
    differs = fact_differences(a, b, (*DEFINING, *DESCRIBING))
    text += " They differ in: " + "; ".join(differs) + "." if differs else " Nothing else differs in their records."
    return text


def compare_studies(
    a_path: Path, b_path: Path, output: Path | None, force: bool, scratch: Path, margin: float = DEFAULT_MARGIN
) -> dict[str, Any]:
    """The comparison's rows, what differs and its paragraph; files under `output` when given.
    `margin`: the equivalence margin, a fraction of the step time."""
    margin = check_margin(margin)
    a, b = open_study(a_path, "A", scratch), open_study(b_path, "B", scratch)
    a.label, b.label = str(a_path), str(b_path)
    defining = fact_differences(a, b, DEFINING)
    if defining and not force:
        raise StudyError(
            "compare: the two studies measure different things (" + "; ".join(defining) + "); "
            "compare them anyway with --force"
        )
    rows = comparison_rows(a, b, margin)
    paragraph = summary_paragraph(a, b, rows, margin)
    written: list[str] = []
    if output is not None:
        from rlvr_scaling.analysis.shown.table_files import write_table

        title = f"B ({b.label}) against A ({a.label}): {test_text(margin)}"
        written = [str(p) for p in write_table(rows, output / "compare", title)]
        written.append(str(write_overlay(a, b, rows, output / "compare.png")))
        (output / "compare.txt").write_text(paragraph + "\n")
        written.append(str(output / "compare.txt"))
    return {
        "rows": rows,
        "margin": margin,
        "differences": fact_differences(a, b, (*DEFINING, *DESCRIBING)),
        "summary": paragraph,
        "written": written,
    }


def write_overlay(a: OpenedStudy, b: OpenedStudy, rows: list[dict[str, Any]], output: Path) -> Path:
    """Step time against nodes, per dataset and series: A solid, B dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["dataset"], r["series"]) for r in rows})
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.5 * max(1, len(panels)), 3.6), squeeze=False)
    for axis, (dataset, series) in zip(axes[0], panels, strict=False):
        mine = [r for r in rows if (r["dataset"], r["series"]) == (dataset, series)]
        for key, style, label in (("a_step_time_s", "o-", f"A: {a.label}"), ("b_step_time_s", "s--", f"B: {b.label}")):
            points = [(r["nodes"], r[key]) for r in mine if r[key] is not None]
            if points:
                axis.plot(*zip(*points, strict=True), style, label=label)
        axis.set_xscale("log", base=2)
        axis.set_title(f"{dataset}, {series} scaling")
        axis.set_xlabel("nodes")
        axis.set_ylabel("mean step time (s)")
        axis.legend(fontsize=7)
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    plt.close(fig)
    return output
