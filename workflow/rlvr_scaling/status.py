"""`rlvr-scaling status`: where the study stands, run by run and stage by stage.

The truth is Snakemake's: every output of the workflow with its state and whether Snakemake would
make it again, as `snakemake --summary` prints them for the same config. What Snakemake cannot say
comes from the results: why a run failed (results/failed/<run_id>/<stamp>/FAILED.txt), and which
scaling runs wait for a selection (the plan).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution.failed_runs import NOTE
from rlvr_scaling.study.config import Study, study_document, study_from_dict
from rlvr_scaling.study.plan import PendingRun

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SUMMARY_HEADER = "output_file\tdate\trule\tlog-file(s)\tstatus\tplan"
# The workflow's rules by stage, in the order the study goes through them; the rest are its wiring.
STAGES = {
    "dataset": "data",
    "model": "model",
    "container_recipe": "container",
    "container_image": "container",
    "preflight": "preflight",
    "run": "runs",
    "summary": "summaries",
    "sweep_step": "selection",
    "selection": "selection",
    "index": "index",
    "tables": "tables",
    "figures": "figures",
    "report": "report",
    "bundle": "bundle",
}
STATES = ("complete", "running", "stale", "failed", "missing", "pending")


@dataclass(frozen=True)
class OutputState:
    """One output as `snakemake --summary` reports it."""

    path: str
    rule: str
    status: str  # ok, missing, updated input files, set of input files changed, ...
    update_pending: bool


@dataclass(frozen=True)
class Entry:
    """One output of a stage (a run's folder for `runs`), or a run that waits for a selection."""

    stage: str
    name: str
    state: str  # one of STATES
    why: str = ""


def parse_summary(text: str) -> list[OutputState]:
    lines = text.splitlines()
    if SUMMARY_HEADER not in lines:
        raise StudyError(f"snakemake --summary printed no summary:\n{text[-2000:]}")
    states = []
    for line in lines[lines.index(SUMMARY_HEADER) + 1 :]:
        fields = line.split("\t")
        if len(fields) == 6:
            path, _, rule, _, status, plan = fields
            states.append(OutputState(path, rule, status, plan == "update pending"))
    return states


def snakemake_summary(workdir: Path, snakemake_args: list[str]) -> list[OutputState]:
    result = subprocess.run([SNAKEMAKE, "--summary", *snakemake_args], cwd=workdir, capture_output=True, text=True)
    if result.returncode != 0:
        raise StudyError(f"snakemake --summary failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return parse_summary(result.stdout)


def snakemake_args(configfiles: list[str], site: str | None) -> list[str]:
    """The options that give Snakemake the study `study_as_snakemake_reads_it` builds."""
    args = ["--configfile", *configfiles] if configfiles else []
    return [*args, "--config", f"site={site}"] if site else args


def study_as_snakemake_reads_it(configfiles: list[str], site: str | None) -> Study:
    """config/config.yaml with each --configfile over it, in order, as the workflow reads them."""
    return study_from_dict(study_document([Path(path) for path in configfiles]), site=site)


def last_failure(root: Path, run_id: str) -> str | None:
    """Why the latest failed attempt of a run failed (the first line of its note), if it failed."""
    attempts = sorted((paths.results_dir(root) / "failed" / run_id).glob(f"*/{NOTE}"))
    if not attempts:
        return None
    lines = attempts[-1].read_text(errors="replace").strip().splitlines()
    return f"{lines[0] if lines else 'no note'} ({attempts[-1].parent.relative_to(paths.results_dir(root))})"


def _entry(output: OutputState, root: Path, running: dict[str, str]) -> Entry:
    stage = STAGES[output.rule]
    name = Path(output.path).name if stage == "runs" else output.path
    if stage == "runs" and name in running:
        return Entry(stage, name, "running", running[name])
    if output.status == "missing":
        failure = last_failure(root, name) if stage == "runs" else None
        return Entry(stage, name, "failed", failure) if failure else Entry(stage, name, "missing")
    if output.update_pending:
        why = output.status if output.status != "ok" else "made again after an input it depends on"
        return Entry(stage, name, "stale", why)
    return Entry(stage, name, "complete")


def study_status(
    outputs: list[OutputState], plan: list[Any], root: Path, running: dict[str, str] | None = None
) -> list[Entry]:
    """Every output of the workflow's stages, then the runs Snakemake cannot name yet: those waiting
    for a first selection, the sweep points a sequential sweep has not reached, and the scaling runs
    of a selection that is made again first (which may choose another workload). `running`: the runs
    going on now (run id: where it stands), which Snakemake sees only as missing."""
    entries = [_entry(output, root, running or {}) for output in outputs if output.rule in STAGES]
    named = {entry.name for entry in entries if entry.stage == "runs"}
    for run in plan:
        if isinstance(run, PendingRun):
            name = f"{run.dataset} {'+'.join(run.series)} {run.nodes} node(s)"
            entries.append(Entry("runs", name, "pending", run.pending))
        elif run.run_id not in named and "sweep" in run.series:
            why = f"waits for the sequential sweep of {run.dataset} to reach it (the point before goes first)"
            entries.append(Entry("runs", run.run_id, "pending", why))
        elif run.run_id not in named:
            why = f"waits for the selection of {run.dataset}, which is made again first"
            entries.append(Entry("runs", run.run_id, "pending", why))
    order = list(dict.fromkeys(STAGES.values()))
    return sorted(entries, key=lambda e: (order.index(e.stage), STATES.index(e.state) != 0, e.name))


def counts_by_stage(entries: list[Entry]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for entry in entries:
        stage = counts.setdefault(entry.stage, dict.fromkeys(STATES, 0))
        stage[entry.state] += 1
    return counts


def status_document(study: Study, entries: list[Entry]) -> dict[str, Any]:
    return {
        "study": study.name,
        "site": study.site_name,
        "stages": counts_by_stage(entries),
        "outputs": [asdict(entry) for entry in entries],
    }


def render_status(study: Study, entries: list[Entry]) -> str:
    lines = [f"Study {study.name} on site '{study.site_name}'", ""]
    lines.append(f"{'stage':<11}" + "".join(f"{state:>10}" for state in STATES))
    for stage, counts in counts_by_stage(entries).items():
        lines.append(f"{stage:<11}" + "".join(f"{counts[state] or '':>10}" for state in STATES))
    runs = [entry for entry in entries if entry.stage == "runs"]
    if runs:
        width = max(len(entry.name) for entry in runs)
        lines += ["", "Runs:"]
        lines += [f"  {e.name:<{width}}  {e.state:<8}  {e.why}".rstrip() for e in runs]
    others = [entry for entry in entries if entry.stage != "runs" and entry.state != "complete"]
    if others:
        lines += ["", "Other outputs not complete:"]
        lines += [f"  {e.stage}: {e.name}  {e.state}  {e.why}".rstrip() for e in others]
    return "\n".join(lines) + "\n"
