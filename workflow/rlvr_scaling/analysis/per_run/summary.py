"""A run's summary: its measured figures, named validity checks, and where every number came from."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rlvr_scaling.analysis.per_run import disturbance
from rlvr_scaling.analysis.per_run.energy_use import summarize_energy
from rlvr_scaling.analysis.per_run.model_flops import summarize_mfu
from rlvr_scaling.analysis.per_run.overhead import run_overhead
from rlvr_scaling.engines import fabric
from rlvr_scaling.fsutil import sha256_file
from rlvr_scaling.measured.adaptive_steps import expected_steps, stop_check
from rlvr_scaling.measured.metrics import finite_values, read_steps, summarize_steps
from rlvr_scaling.measured.metrics_file import is_positive_finite, measurement_problems
from rlvr_scaling.measured.models import Check, Measured, RunSummary


def _check(name: str, passed: bool, detail: str) -> Check:
    return Check(name, bool(passed), detail)


def measurement_check(steps: list[dict[str, Any]], reader_problems: list[str], last: int) -> Check:
    """`last`: the step the run had to reach (all its steps, or where the adaptive step count stopped it)."""
    problems = measurement_problems(steps, reader_problems, last)
    if not problems:
        return _check("measurement", True, f"steps 1..{last} once each, every required figure finite and positive")
    more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
    return _check("measurement", False, "; ".join(problems[:5]) + more)


def validity_checks(
    run: dict[str, Any],
    study: dict[str, Any],
    steps: list[dict[str, Any]],
    reader_problems: list[str],
    job: dict[str, Any],
) -> list[Check]:
    """Named checks; the ones after `measurement` read only the numeric values, so a broken record is
    reported by it and never raises here. `job`: the run's job.json (where the adaptive step count
    stopped it, if it did)."""
    expected_lr = float(study["algorithm"]["lr"])
    checks = [measurement_check(steps, reader_problems, expected_steps(run, job))]
    stop = stop_check(run, job, steps)
    if stop is not None:
        checks.append(stop)
    lrs = set(finite_values(steps, "actor/lr"))
    checks.append(
        _check(
            "actor_lr",
            bool(lrs) and all(math.isclose(lr, expected_lr, abs_tol=1e-12) for lr in lrs),
            f"actor/lr seen {sorted(lrs)}, configured {expected_lr}",
        )
    )
    # The trajectory count is not logged; prompt + response tokens over their per-sample means give it.
    counts = set()
    for s in steps:
        parts = [finite_values([s], k) for k in ("prompt_length/mean", "response_length/mean", "perf/total_num_tokens")]
        if all(parts) and parts[0][0] + parts[1][0] > 0:
            counts.add(round(parts[2][0] / (parts[0][0] + parts[1][0])))
    expected = run["prompts"] * run["responses_per_prompt"]
    checks.append(
        _check(
            "trajectories",
            counts == {expected} and run["trajectories"] == expected,
            f"prompts x responses = {expected}; measured per step {sorted(counts)}",
        )
    )
    longest = max(finite_values(steps, "response_length/max"), default=0)
    checks.append(
        _check(
            "responses_within_cap",
            longest <= run["max_response_length"],
            f"longest response {longest:g} tokens, cap {run['max_response_length']}",
        )
    )
    fabric_check = transport_check(run, job)
    if fabric_check is not None:
        checks.append(fabric_check)
    return checks


def transport_check(run: dict[str, Any], job: dict[str, Any]) -> Check | None:
    """Whether a multi-node run's collectives travelled as its site says, judged again from the
    transports job.json recorded per node (execution.fabric_record); None for a run whose launcher
    recorded no `fabric` (an imported run, or one made before the record existed)."""
    record = job.get("fabric")
    if not isinstance(record, dict) or not isinstance(record.get("expected"), dict):
        return None
    nodes = record.get("nodes")
    nodes = nodes if isinstance(nodes, dict) else {}
    transports = {str(n): (r.get("transport") if isinstance(r, dict) else None) for n, r in nodes.items()}
    valid, detail = fabric.judge(str(record["expected"].get("transport")), transports, int(run["nodes"]))
    return _check("fabric", valid, detail)


def _identity_fields(spec: dict[str, Any]) -> dict[str, Any]:
    run = spec["run"]
    return {
        "run_id": run["run_id"],
        "dataset": run["dataset"],
        "series": run["series"],
        "nodes": run["nodes"],
        "gpus": run["nodes"] * run["gpus_per_node"],
        "prompts": run["prompts"],
        "trajectories": run["trajectories"],
        "trajectories_per_engine": run["trajectories_per_engine"],
        "concurrency": run["concurrency"],
        "max_response_length": run["max_response_length"],
        "memory_settings": run["memory"],
        "site": spec["site"]["name"],
        "gpu_memory_gb": spec["site"]["hardware"]["gpu_memory_gb"],
        "estimated_node_hours": run.get("node_hours"),
    }


def failed_summary(spec: dict[str, Any], job: dict[str, Any]) -> RunSummary:
    """A sweep point that failed: no figures, the failure as its reason, and the sign that it ran out of
    memory if its console had one (only such points land in results/runs/, see outcome.py)."""
    failure = "; ".join(job.get("problems") or []) or f"exit status {job.get('exit_status')}"
    return RunSummary(
        **_identity_fields(spec),
        measured=None,
        checks=[_check("run_completed", False, f"{job.get('status')}: {failure}")],
        valid=False,
        status="failed",
        failure=failure,
        memory_evidence=job.get("memory_evidence"),
        steps=[],
        provenance={"slurm_job_id": job.get("slurm_job_id"), "start": job.get("start"), "end": job.get("end")},
    )


# `summarize_run`'s peak when none is given: the one the run's spec.json recorded with its site.
PEAK_OF_SPEC = "spec"


def summarize_run(
    run_dir: Path, warmup_steps: int | None = None, peak_tflops_bf16: float | None | str = PEAK_OF_SPEC
) -> RunSummary:
    """`warmup_steps`: the study's, which the workflow passes (warm-up is the analysis's choice, not
    part of a run's identity while adaptive_steps is off: changing it re-summarises the runs and reruns
    none); None: the run's own. `peak_tflops_bf16`: the site's, which the workflow passes likewise (a
    corrected peak re-summarises, it reruns nothing); None: no peak, so no MFU."""
    spec = json.loads((run_dir / "spec.json").read_text())
    job = json.loads((run_dir / "job.json").read_text())
    run = spec["run"]
    if job.get("status") != "succeeded":
        return failed_summary(spec, job)
    source = run_dir / "metrics.jsonl"
    if not source.exists():
        source = run_dir / "console.log"
    steps, problems, reader = read_steps(source)
    n_gpus = run["nodes"] * run["gpus_per_node"]
    checks = validity_checks(run, spec["study"], steps, problems, job)
    warmup = run["warmup_steps"] if warmup_steps is None else warmup_steps
    model = job.get("model") or {}
    measured_steps = [s for s in steps if s["step"] > warmup]
    timed = [
        (s["step"], float(s["timing_s/step"])) for s in measured_steps if is_positive_finite(s.get("timing_s/step"))
    ]
    mfu = summarize_mfu(
        measured_steps,
        model.get("shape"),
        model.get("reason"),
        spec["site"]["hardware"].get("peak_tflops_bf16") if isinstance(peak_tflops_bf16, str) else peak_tflops_bf16,
        n_gpus,
        run["trajectories"],
    )
    return RunSummary(
        **_identity_fields(spec),
        measured=Measured.from_json(
            {
                **summarize_steps(steps, n_gpus, warmup),
                "mfu": mfu,
                "energy": summarize_energy(job, run["nodes"], run["trajectories"]),
                "disturbance": disturbance.assess(timed),
            }
        ),
        checks=checks,
        valid=all(c.passed for c in checks),
        status="succeeded",
        steps=steps,
        overhead=run_overhead(job, steps),
        adaptive_stop=job.get("adaptive_stop"),
        provenance=_provenance(spec, job, source, reader, problems),
    )


def _provenance(
    spec: dict[str, Any], job: dict[str, Any], source: Path, reader: str, problems: list[str]
) -> dict[str, Any]:
    """Where every number of the summary came from: the file and reader, the file's digest, the job,
    its image, its packages and the repository's commit."""
    return {
        "metrics_file": source.name,
        "reader": reader,
        "metrics_sha256": sha256_file(source),
        "reader_problems": problems,
        "slurm_job_id": job.get("slurm_job_id"),
        "container": job.get("container"),
        "versions": job.get("versions"),
        "repository_commit": spec.get("repository_commit"),
        "start": job.get("start"),
        "end": job.get("end"),
        # A run made elsewhere (analysis.per_run.imported_run): where its log came from.
        **({"imported": spec["imported"]} if "imported" in spec else {}),
    }
