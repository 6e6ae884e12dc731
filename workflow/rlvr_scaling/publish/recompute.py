"""What `verify` recomputes from an unpacked bundle, and compares: every run's summary from its own
metrics, each index from the summaries, every selection by the bundled rule (a pinned workload
against the config), every table from the summaries, and the report from the tables."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.analysis.across_runs.selection import select
from rlvr_scaling.analysis.per_run.results_io import StudyResults, one_image
from rlvr_scaling.analysis.per_run.summary import summarize_run
from rlvr_scaling.analysis.shown.table_files import TABLES, write_tables
from rlvr_scaling.analysis.verdict.reproduction import reproduction_rows
from rlvr_scaling.errors import StudyError
from rlvr_scaling.measured.models import DatasetIndex, RunSummary
from rlvr_scaling.publish.bundle_contents import CONFIG_MEMBER, REFERENCE_MEMBER, SITE_MEMBER
from rlvr_scaling.publish.command_check import command_problems
from rlvr_scaling.publish.compare import as_read, compare_table, described, differences
from rlvr_scaling.publish.report import render_report
from rlvr_scaling.study.reference import check_reference
from rlvr_scaling.study.sections import Site, StudyConfig
from rlvr_scaling.study.validate import check_schema, check_semantics
from rlvr_scaling.study.yaml_file import nesting_problem

# What a malformed record raises when it is read; verify names the file instead.
READ_ERRORS = (OSError, ValueError, KeyError, TypeError, AttributeError, StudyError)


class Findings:
    """The problems found and what was checked."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.checked = {
            "checksums": 0,
            "summaries": 0,
            "commands": 0,
            "indexes": 0,
            "selections": 0,
            "tables": 0,
            "report": 0,
            "figures": 0,
        }
        # The members compared with a recomputed value; every other one is checked by its checksum only.
        self.recomputed: set[str] = set()
        self.evidence: dict[str, int] = {}  # what is checked by checksum only, by kind (verify)

    def add(self, name: str, found: list[str], source: str) -> None:
        if line := described(name, found, source):
            self.problems.append(line)


def inside(root: Path, name: str) -> Path | None:
    """A path a record names, if it stays in the bundle (a record may not make verify read the host)."""
    path = (root / name).resolve()
    return path if path.is_relative_to(root.resolve()) else None


def read_member(root: Path, name: str, findings: Findings) -> Any:
    path = inside(root, name)
    if path is None:
        findings.problems.append(f"{name}: a path outside the bundle; not read")
        return None
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        findings.problems.append(f"{name}: not in the bundle")
    except ValueError as exc:
        findings.problems.append(f"{name}: not JSON ({exc})")
    except RecursionError:
        findings.problems.append(f"{name}: not a record of ours (JSON nested too deeply)")
    return None


def read_indexes(root: Path, config: StudyConfig, findings: Findings) -> list[DatasetIndex]:
    """Every dataset's index the config names (StudyResults puts them in the tables' order, by name);
    each run's names checked."""
    indexes = []
    for dataset in config.datasets:
        name = f"results/index/{dataset}.json"
        if not (root / name).exists():
            continue
        try:
            index = DatasetIndex.from_json(read_member(root, name, findings))
        except READ_ERRORS as exc:
            findings.problems.append(f"{name}: not a dataset index ({exc!r})")
            continue
        unsafe = [r.run_id for r in index.runs if not paths.is_plain_name(r.run_id) or inside(root, r.summary) is None]
        if unsafe:
            findings.problems.append(f"{name}: runs named outside the bundle: {', '.join(unsafe)}; not read")
            continue
        indexes.append(index)
    return indexes


def bundled_peak(root: Path, findings: Findings) -> float | None:
    """The site's BF16 peak the summaries' MFU was counted with (study/site.json)."""
    site = read_member(root, SITE_MEMBER, findings)
    peak = ((site or {}).get("hardware") or {}).get("peak_tflops_bf16") if isinstance(site, dict) else None
    return float(peak) if isinstance(peak, int | float) and math.isfinite(peak) and peak > 0 else None


def recompute_summaries(root: Path, indexes: list[DatasetIndex], warmup: int, findings: Findings) -> dict:
    summaries: dict[str, RunSummary] = {}
    peak = bundled_peak(root, findings)
    for index in indexes:
        for run in index.runs:
            try:
                summary = summarize_run(paths.run_dir(root, run.run_id), warmup, peak)
            except READ_ERRORS as exc:
                findings.problems.append(f"results/runs/{run.run_id}: cannot be summarised again ({exc!r})")
                continue
            bundled = read_member(root, run.summary, findings)
            if bundled is not None:
                findings.add(
                    run.summary, differences(bundled, as_read(summary.to_json())), f"recomputed from {run.run_id}"
                )
            summary.series = run.series
            summaries[run.run_id] = summary
            findings.checked["summaries"] += 1
            findings.recomputed.add(run.summary)
    return summaries


def check_index(index: DatasetIndex, config: StudyConfig, summaries: dict[str, RunSummary], findings: Findings) -> None:
    """Each entry against its run's summary; the image; a pinned workload against the config."""
    found = []
    for number, run in enumerate(index.runs):
        summary = summaries.get(run.run_id)
        if summary is None:
            continue
        recomputed = {"nodes": summary.nodes, "prompts": summary.prompts, "valid": summary.valid}
        found += differences({k: getattr(run, k) for k in recomputed}, recomputed, f"runs[{number}]")
    found += differences(index.image_sha256, one_image(index.dataset, summaries_of(index, summaries)), "image_sha256")
    pinned = config.selection.get(index.dataset)
    if pinned is not None:
        found += differences(index.selection, {"prompts": pinned, "pinned": True}, "selection")
    findings.add(f"results/index/{index.dataset}.json", found, "against the summaries and study/config.json")
    findings.checked["indexes"] += 1
    findings.recomputed.add(f"results/index/{index.dataset}.json")


def summaries_of(index: DatasetIndex, summaries: dict[str, RunSummary]) -> dict[str, RunSummary]:
    return {r.run_id: summaries[r.run_id] for r in index.runs if r.run_id in summaries}


def recompute_selection(
    root: Path, config: StudyConfig, index: DatasetIndex, summaries: dict, findings: Findings
) -> None:
    name = f"results/selection/{index.dataset}.json"
    rule = config.selection_rule
    sweep = [s for s in summaries_of(index, summaries).values() if "sweep" in s.series]
    try:
        planned = config.datasets[index.dataset].sweep
        chosen = select(index.dataset, sweep, rule.memory_cap_fraction, rule.tolerance, planned, rule.sweep_order)
        recomputed = as_read(chosen)
    except StudyError as exc:
        findings.problems.append(f"{name}: the bundled sweep gives no selection ({exc})")
        return
    bundled = read_member(root, name, findings)
    if bundled is not None:
        findings.add(name, differences(bundled, recomputed), "recomputed by the rule in study/config.json")
        findings.add(f"results/index/{index.dataset}.json", differences(index.selection, bundled, "selection"), name)
    findings.checked["selections"] += 1
    findings.recomputed.add(name)


def read_reference(root: Path, config: StudyConfig, findings: Findings) -> dict[str, Any] | None:
    """The published numbers the bundled verdicts were made against, checked as the study's were."""
    if not config.study.reference:
        return None
    document = read_member(root, REFERENCE_MEMBER, findings)
    if document is None:
        return None
    try:
        return check_reference(document, REFERENCE_MEMBER)
    except StudyError as exc:
        findings.problems.append(f"{REFERENCE_MEMBER}: not a reference ({exc}); the verdicts are made without it")
        return None


def recompute_tables_and_report(root: Path, config: StudyConfig, results: StudyResults, findings: Findings) -> None:
    """Tables into a results tree of their own, beside the bundle's figures, and the report from them:
    its links then read as the bundled report's do."""
    reference = read_reference(root, config, findings)
    with tempfile.TemporaryDirectory(prefix="rlvr-verify-") as scratch:
        again = Path(scratch) / "results"
        verdicts = reproduction_rows(results, config, reference)
        write_tables(results, config.scaling.strong_reference_nodes, again / "tables", verdicts)
        for table in TABLES:
            for suffix in (".csv", ".md", ".tex"):
                name = f"results/tables/{table}{suffix}"
                recomputed = (again / "tables" / f"{table}{suffix}").read_text()
                if not (root / name).exists():
                    findings.problems.append(f"{name}: not in the bundle")
                elif suffix == ".csv":
                    findings.add(
                        name, compare_table(table, (root / name).read_text(), recomputed), "from the summaries"
                    )
                elif (root / name).read_text() != recomputed:
                    findings.problems.append(f"{name}: differs from the table recomputed from the summaries")
            findings.checked["tables"] += 1
            findings.recomputed |= {f"results/tables/{table}{suffix}" for suffix in (".csv", ".md", ".tex")}
        (again / "figures").symlink_to(root / "results" / "figures")
        output = again / "report" / "study.md"
        report = render_report(config, results, again / "tables", again / "figures", output, reference)
        bundled = root / "results" / "report" / "study.md"
        if bundled.exists() and bundled.read_text() != report:
            line = _first_different_line(bundled.read_text(), report)
            findings.problems.append(f"results/report/study.md: differs from the report made again, {line}")
        findings.checked["report"] += 1
        findings.recomputed.add("results/report/study.md")


def recompute_figures(root: Path, config: StudyConfig, results: StudyResults, findings: Findings) -> None:
    """The figures drawn again from the summaries: their captions and what they plot (figure_data.json)
    must be the bundle's. The PNG and PDF bytes are not compared (fonts and matplotlib's build draw
    them), so they stay evidence checked by checksum."""
    from rlvr_scaling.analysis.shown.figure_data import DATA_FILE, first_difference
    from rlvr_scaling.analysis.shown.figures import write_figures

    with tempfile.TemporaryDirectory(prefix="rlvr-verify-") as scratch:
        drawn = Path(scratch)
        write_figures(results, config.scaling.strong_reference_nodes, drawn, formats=())
        for member in ("captions.json", DATA_FILE):
            name = f"results/figures/{member}"
            bundled = read_member(root, name, findings)
            if bundled is None:
                continue
            difference = first_difference(bundled, json.loads((drawn / member).read_text()))
            if difference:
                findings.problems.append(
                    f"{name}: differs from the figures drawn again from the summaries, {difference}"
                )
            findings.recomputed.add(name)
        findings.checked["figures"] = len(json.loads((drawn / "captions.json").read_text()))


def _first_different_line(bundled: str, recomputed: str) -> str:
    old, new = bundled.splitlines(), recomputed.splitlines()
    for number, (a, b) in enumerate(zip(old, new, strict=False), 1):
        if a != b:
            return f"line {number}: {a[:120]!r} in the bundle, made again {b[:120]!r}"
    return f"{len(old)} lines in the bundle, made again {len(new)}"


def validated_config(root: Path, findings: Findings) -> tuple[StudyConfig, Site] | None:
    """The bundled config and site, through the same checks as `plan` (schema, then semantics), before
    anything is recomputed from them; None, with the problem named, otherwise."""
    raw = read_member(root, CONFIG_MEMBER, findings)
    site_raw = read_member(root, SITE_MEMBER, findings)
    if raw is None or site_raw is None:
        return None
    for name, document in ((CONFIG_MEMBER, raw), (SITE_MEMBER, site_raw)):
        if problem := nesting_problem(document):
            findings.problems.append(f"{name}: not a study config: {problem}; nothing can be recomputed")
            return None
    try:
        check_schema(raw, paths.CONFIG_SCHEMA, source=f"bundled {CONFIG_MEMBER}")
        check_schema(site_raw, paths.SITE_SCHEMA, source=f"bundled {SITE_MEMBER}")
        config, site = StudyConfig.from_dict(raw), Site.from_dict(site_raw)
        check_semantics(config, site)
    except StudyError as exc:
        findings.problems.append(f"{CONFIG_MEMBER}: not a study config: {exc}; nothing can be recomputed")
        return None
    except READ_ERRORS as exc:
        findings.problems.append(f"{CONFIG_MEMBER}: not a study config ({exc!r}); nothing can be recomputed")
        return None
    return config, site


def check_commands(
    root: Path, indexes: list[DatasetIndex], config: StudyConfig, site: Site, findings: Findings
) -> None:
    """Each run's verl arguments and command.sh, recomputed from the bundled config and site."""
    for index in indexes:
        for run in index.runs:
            folder = f"results/runs/{run.run_id}"
            spec, job = (
                read_member(root, f"{folder}/spec.json", findings),
                read_member(root, f"{folder}/job.json", findings),
            )
            command = inside(root, f"{folder}/command.sh")
            if spec is None or job is None or command is None or "imported" in spec:
                continue  # an imported run has no command; a missing record is named already
            if not command.is_file():
                findings.problems.append(f"{folder}/command.sh: not in the bundle (every run of the study has one)")
                continue
            try:
                found = command_problems(spec, job, command.read_text(errors="replace"), config, site)
            except READ_ERRORS as exc:
                found = [f"cannot be recomputed ({exc!r})"]
            for problem in found:
                findings.problems.append(f"{folder}/{problem}")
            findings.recomputed |= {f"{folder}/command.sh", f"{folder}/spec.json"}
            findings.checked["commands"] += 1


def check_study(root: Path, findings: Findings) -> None:
    validated = validated_config(root, findings)
    if validated is None:
        return
    config, site = validated
    indexes = read_indexes(root, config, findings)
    summaries = recompute_summaries(root, indexes, config.algorithm.warmup_steps, findings)
    check_commands(root, indexes, config, site, findings)
    named = {run.summary for index in indexes for run in index.runs}
    for stray in sorted((root / "results" / "summaries").glob("*.json")):
        if f"results/summaries/{stray.name}" not in named:
            findings.problems.append(f"results/summaries/{stray.name}: named by no index, so checked by nothing")
    for index in indexes:
        check_index(index, config, summaries, findings)
        if index.selection and not index.selection.get("pinned"):
            recompute_selection(root, config, index, summaries, findings)
    # Runs that could not be summarised again are already named; the tables are made without them.
    kept = [
        DatasetIndex(i.dataset, i.selection, i.image_sha256, [r for r in i.runs if r.run_id in summaries])
        for i in indexes
    ]
    recompute_tables_and_report(root, config, StudyResults(kept, summaries), findings)
    recompute_figures(root, config, StudyResults(kept, summaries), findings)
