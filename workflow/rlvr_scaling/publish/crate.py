"""The bundle's machine-readable provenance: RO-Crate metadata in the Workflow Run Crate profile
(https://w3id.org/ro/wfrun/workflow/0.5), written with the `rocrate` library. The workflow run is
one CreateAction (the Snakefile on the study's config and inputs, giving the tables, figures and
report); each verl run is one more (verl on its spec and command, giving its metrics, log and
summary)."""

from __future__ import annotations

import json
from typing import Any

from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.execution.step_clock import AFTER_STOP

PROFILES = {
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate",
}
VERL = "https://github.com/volcengine/verl"
RO_CRATE_VERSION = "1.1"


def _files(crate: Any, names: list[str], described: dict[str, str]) -> dict[str, Any]:
    return {
        name: crate.add_file(source=None, dest_path=name, properties={"name": described.get(name, name)})
        for name in names
    }


def _run_action(crate: Any, verl: Any, files: dict[str, Any], run_id: str, provenance: dict[str, Any]) -> None:
    base = f"results/runs/{run_id}/"
    inputs = [files[n] for n in (base + "spec.json", base + "command.sh") if n in files]
    logs = ("metrics.jsonl", "console.log", AFTER_STOP)
    outputs = [files[base + n] for n in logs if base + n in files]
    if f"results/summaries/{run_id}.json" in files:
        outputs.append(files[f"results/summaries/{run_id}.json"])
    times = {key: provenance[key] for key in ("start", "end") if provenance.get(key)}
    properties = {"name": f"verl run {run_id}", **{f"{k}Time": v for k, v in times.items()}}
    crate.add_action(verl, identifier=f"#run-{run_id}", object=inputs, result=outputs, properties=properties)


def _verl_entity(crate: Any, version: str | None) -> Any:
    """verl, the software every run's action names as its instrument."""
    from rocrate.model.softwareapplication import SoftwareApplication

    known = version or "unknown"
    return crate.add(
        SoftwareApplication(
            crate, VERL, properties={"name": "verl", "url": VERL, "version": known, "softwareVersion": known}
        )
    )


def crate_metadata(
    names: list[str],
    title: str,
    date: str,
    results: StudyResults,
    verl: str | None,
    license_id: str,
    snakemake: str | None,
) -> bytes:
    """ro-crate-metadata.json for a bundle holding `names`; the same arguments give the same bytes.
    `license_id`: SPDX; `snakemake`: the version that made the bundle. Checked in the tests with the
    RO-Crate community's validator at REQUIRED level for every profile the crate conforms to."""
    from rocrate.model.contextentity import ContextEntity
    from rocrate.rocrate import ROCrate

    # RO-Crate 1.1: the version Workflow RO-Crate 1.0 and the Workflow Run Crate 0.5 profiles are
    # defined on (their validator shapes expect 1.1's terms, e.g. bioschemas:ComputationalWorkflow,
    # which 1.3's context maps elsewhere), and rocrate 0.16's default is 1.3.
    crate = ROCrate(version=RO_CRATE_VERSION)
    crate.root_dataset["name"] = title
    crate.root_dataset["description"] = "Measurements, analysis and provenance of an RLVR scaling study"
    crate.root_dataset["datePublished"] = date
    licence = crate.add(
        ContextEntity(
            crate, f"https://spdx.org/licenses/{license_id}", properties={"@type": "CreativeWork", "name": license_id}
        )
    )
    crate.root_dataset["license"] = licence
    workflow = crate.add_workflow(
        source=None, dest_path="pipeline/Snakefile", main=True, lang="snakemake", properties={"name": "rlvr-scaling"}
    )
    # The language entity rocrate adds has a name and url; RO-Crate 1.2+ wants its version too.
    workflow.lang["version"] = snakemake or "unknown"
    crate.root_dataset["conformsTo"] = [{"@id": profile} for profile in PROFILES]
    for profile, name in PROFILES.items():
        crate.add(ContextEntity(crate, profile, properties={"@type": "CreativeWork", "name": name}))
    files = _files(crate, [n for n in names if n != "pipeline/Snakefile"], {})
    verl_entity = _verl_entity(crate, verl)
    study_inputs = [files[n] for n in names if n.startswith(("study/", "results/data/", "results/models/"))]
    study_outputs = [
        files[n] for n in names if n.startswith(("results/tables/", "results/figures/", "results/report/"))
    ]
    ends = sorted(s.provenance.get("end") or "" for s in results.summaries.values())
    crate.add_action(
        workflow,
        identifier="#study-run",
        object=study_inputs,
        result=study_outputs,
        properties={"name": f"{title}: the workflow run", **({"endTime": ends[-1]} if ends and ends[-1] else {})},
    )
    for run_id in sorted(results.summaries):
        _run_action(crate, verl_entity, files, run_id, results.summaries[run_id].provenance)
    return (json.dumps(crate.metadata.generate(), indent=1, sort_keys=True) + "\n").encode()
