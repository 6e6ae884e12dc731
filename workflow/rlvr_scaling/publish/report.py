"""The study report (Markdown): every table and figure with what was measured, on which runs, how."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rlvr_scaling.analysis.across_runs.engine_fill import fill_findings
from rlvr_scaling.analysis.cost.adaptive_report import adaptive_findings
from rlvr_scaling.analysis.cost.cost_check import cost_finding, cost_rows
from rlvr_scaling.analysis.cost.sweep_savings import sweep_findings
from rlvr_scaling.analysis.per_run import disturbance
from rlvr_scaling.analysis.per_run.energy_use import energy_findings
from rlvr_scaling.analysis.per_run.model_flops import mfu_findings
from rlvr_scaling.analysis.per_run.overhead import overhead_finding, overhead_rows
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.analysis.shown.table_files import TABLES
from rlvr_scaling.analysis.verdict.reproduction import reproduction_findings, reproduction_rows
from rlvr_scaling.measured.stats import BOOTSTRAP_METHOD, BOOTSTRAP_WHY
from rlvr_scaling.study.sections import StudyConfig


def findings(study: StudyConfig, results: StudyResults, reference: dict[str, Any] | None) -> list[str]:
    """What the study had to explain by eye, in sentences made from the numbers."""
    verdict = reproduction_findings(reproduction_rows(results, study, reference), reference)
    lines = ["## Reproduction of the published study", "", verdict[0], *[f"- {line}" for line in verdict[1:]], ""]
    lines += ["## The one-node sweep", "", *[f"- {finding}" for finding in sweep_findings(results)], ""]
    lines += ["## Strong scaling: under-filled generation engines", ""]
    lines += [f"- {finding}" for finding in fill_findings(results, study.scaling.strong_reference_nodes)]
    overhead = overhead_finding(overhead_rows(results), len(results.summaries))
    lines += ["", "## Outside the steps", "", overhead]
    lines += ["", "## Cost: predicted against measured", "", cost_finding(cost_rows(results))]
    mfu = mfu_findings([s for s in results.summaries.values() if s.valid])
    lines += ["", "## Model FLOPs utilisation", "", mfu[0], *[f"- {line}" for line in mfu[1:]]]
    energy = energy_findings([s for s in results.summaries.values() if s.valid])
    lines += ["", "## Energy", "", energy[0], *[f"- {line}" for line in energy[1:]]]
    adaptive = adaptive_findings(results, study.adaptive_steps.rule())
    if adaptive:
        lines += ["", "## Adaptive step count", "", adaptive[0], *[f"- {line}" for line in adaptive[1:]]]
    return lines


def disturbed_lines(results: StudyResults) -> list[str]:
    """Every measured run whose steps varied beyond analysis.per_run.disturbance's bound, with the steps
    that stand out."""
    lines = ["## Disturbed runs", "", f"A run is flagged when its {disturbance.RULE}; it stays in the tables."]
    records = [(s, s.measured.disturbance) for s in results.summaries.values() if s.measured is not None]
    flagged = [(s, record) for s, record in records if record is not None and disturbance.is_disturbed(record)]
    lines.append("")
    for s, record in sorted(flagged, key=lambda flag: flag[0].run_id):
        series = "/".join(s.series) or "-"
        lines.append(f"- `{s.run_id}` ({s.dataset}, {series}, {s.nodes} node(s)): {disturbance.describe(record)}")
    if not flagged:
        lines.append("None: every run's measured steps stayed within the bound.")
    return lines


def render_report(
    study: StudyConfig,
    results: StudyResults,
    tables: Path,
    figures: Path,
    output: Path,
    reference: dict[str, Any] | None = None,
) -> str:
    """`reference`: the published study it reproduces (study.reference), for the verdict."""
    captions = json.loads((figures / "captions.json").read_text()) if (figures / "captions.json").exists() else {}

    def link(path: Path) -> str:
        # As the report's reader follows it: from the report's own folder.
        return os.path.relpath(path, output.parent)

    model, algorithm = study.model, study.algorithm
    lines = [
        f"# {study.study.name}: RLVR scaling study on site `{study.site}`",
        "",
        f"Model {model.name} ({model.source}, revision {model.revision}), "
        f"GRPO with {algorithm.responses_per_prompt} responses per prompt, lr {algorithm.lr}, "
        f"{'up to ' if study.adaptive_steps.enabled else ''}{algorithm.steps} steps per run of which the first "
        f"{algorithm.warmup_steps} "
        "are warm-up and excluded.",
        "",
        "Throughput per GPU = (prompt + response tokens of all trajectories in a step) / (step time x GPUs). "
        f"Means and sample standard deviations are over the measured steps; intervals: {BOOTSTRAP_METHOD}; "
        f"{BOOTSTRAP_WHY} (coverage measured by simulation: docs/interval-coverage.md).",
        "",
        "## Selection of the one-node workload",
        "",
    ]
    for index in results.indexes:
        selection = index.selection
        if selection and selection.get("reason"):
            lines.append(f"- **{index.dataset}**: {selection['reason']}.")
        elif selection:
            lines.append(f"- **{index.dataset}**: pinned to {selection.get('prompts')} prompts per node in the config.")
    lines += ["", *findings(study, results, reference), "", *disturbed_lines(results), "", "## Tables", ""]
    for name in TABLES:
        path = tables / f"{name}.md"
        if path.exists():
            lines += [path.read_text(), f"Files: `{link(tables / name)}.csv`, `.md`, `.tex`.", ""]
    lines += ["## Figures", ""]
    for name, caption in captions.items():
        lines += [f"![{name}]({link(figures / f'{name}.png')})", "", caption, ""]
    invalid = results.invalid()
    lines += ["## Runs left out", ""]
    if invalid:
        for s in invalid:
            reasons = "; ".join(f"{c.name}: {c.detail}" for c in s.failed_checks())
            lines.append(f"- `{s.run_id}`: {reasons}")
    else:
        lines.append("None: every run passed its validity checks.")
    text = "\n".join(lines) + "\n"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    return text
