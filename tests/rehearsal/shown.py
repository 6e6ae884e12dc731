"""The rehearsal's findings as a person reads them, and the checks that make `make rehearse` fail."""

from __future__ import annotations

from typing import Any

from tests.rehearsal.outcome import PUBLISHED_SELECTION

FROZEN_PREFIX, SLOW_PREFIX = "gsm8k-n16-p400-", "gsm8k-n1-p150-"


def _lumi(seconds: float | None, factor: float) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s here = {seconds * factor / 60:.1f} min at LUMI's scale"


def judged(found: dict[str, Any], faults: bool) -> dict[str, Any]:
    """Each thing the rehearsal must show, with what it found; `failed` lists what did not hold."""
    factor, runs = found["compression"], found["runs"]
    lines: list[str] = []
    failed: list[str] = []
    jobs = found["slurm_jobs"]
    frozen = [r for r in runs if r["run_id"].startswith(FROZEN_PREFIX) and r["status"] != "succeeded"]
    timed_out = [j for j in jobs if j["state"] == "TIMEOUT"]
    submitted = {r["slurm_job_id"] for r in runs}
    lines.append(
        f"Jobs: {len(jobs)} submitted to Slurm and accepted as written (LUMI's sbatch lines: nodes, 2 tasks x 28 "
        f"CPUs, 480 GB, 8 GPUs per node); states: "
        + ", ".join(f"{s} {sum(j['state'] == s for j in jobs)}" for s in sorted({j["state"] for j in jobs}))
    )
    if not jobs or not submitted <= {j["id"] for j in jobs}:
        failed.append("a run's Slurm job is not in accounting: not every job was accepted")
    if timed_out:
        failed.append(f"jobs over their time limit: {[j['id'] for j in timed_out]}")
    # A job fails only as the planted hang's: its launcher filed the run and exited non-zero.
    failed_jobs = {j["id"] for j in jobs if j["state"].startswith(("FAILED", "CANCELLED", "NODE_FAIL"))}
    unexplained = failed_jobs - {r["slurm_job_id"] for r in frozen}
    if unexplained:
        failed.append(f"Slurm jobs failed or cancelled other than the planted hang's: {sorted(unexplained)}")
    unhealthy = [r for r in runs if r["status"] != "succeeded" and not (faults and r in frozen)]
    ended = [r for r in runs if r["status"] != "succeeded"]
    filed = ", ".join(f"{r['run_id']} {r['status']}" for r in ended) or "none"
    lines.append(f"Runs: {len(runs) - len(ended)} succeeded, {len(ended)} filed as failed ({filed})")
    if unhealthy:
        failed.append(f"healthy runs stopped: {[(r['run_id'], r['status']) for r in unhealthy]}")
    invalid = [r["run_id"] for r in runs if r["status"] == "succeeded" and r["valid_for_scaling"] is False]
    if invalid:
        failed.append(f"runs whose collectives' record is not valid for scaling: {invalid}")
    if faults:
        if len(frozen) != 1 or frozen[0]["status"] != "stalled":
            failed.append(f"the planted hang ({FROZEN_PREFIX}...) was not stopped by the guard once: {frozen}")
        else:
            stall = frozen[0]["stall"]
            within = stall["waited_seconds"] <= stall["bound_seconds"] + 1.0
            lines.append(
                f"Planted hang: {frozen[0]['run_id']} after step {stall['last_step']}: stopped after "
                f"{_lumi(stall['waited_seconds'], factor)} without a step "
                f"(its bound {_lumi(stall['bound_seconds'], factor)}), "
                f"filed in {frozen[0]['folder']}; the study called again ran it whole."
            )
            if not within or stall["last_step"] != 3:
                failed.append(f"the hang was not stopped within its bound after step 3: {stall}")
            if not any(r["run_id"] == frozen[0]["run_id"] and r["status"] == "succeeded" for r in runs):
                failed.append("the hung run was not run again to its end")
        slow = [r for r in runs if r["run_id"].startswith(SLOW_PREFIX)]
        if len(slow) != 1 or slow[0]["status"] != "succeeded":
            failed.append(
                f"the planted slow run ({SLOW_PREFIX}..., steps 2.5 x slower) did not end as succeeded: {slow}"
            )
        else:
            limit = slow[0]["time_limit_minutes"]
            lines.append(
                f"Planted slow run: {slow[0]['run_id']}, steps 2.5 x the plan's prediction: not stopped, ran "
                f"{_lumi(slow[0]['seconds'], factor)} within its time limit of {limit} min here"
            )
    published = {dataset: PUBLISHED_SELECTION[dataset] for dataset in found["datasets"]}
    if found["selection"] != published:
        failed.append(f"selected {found['selection']}, published {published}")
    lines.append(f"Selected one-node workloads: {found['selection']} (published {published})")
    verdicts = found["verdict"]
    reproduced = [v for v in verdicts if v["verdict"] == "reproduced"]
    lines.append(f"Verdict: {len(reproduced)} of {len(verdicts)} published numbers and relations reproduced")
    lines += [f"  {v['id']}: {v['verdict']} ({v['why']})" for v in verdicts if v["verdict"] != "reproduced"]
    if not verdicts or len(reproduced) != len(verdicts):
        failed.append(f"the verdict: {len(reproduced)} of {len(verdicts)} reproduced")
    hours = found["node_hours"]
    lines.append(
        f"Node-hours at LUMI's scale: spent {hours['spent']} (failed attempts included), the plan's estimate "
        f"{hours['planned']}, the published procedure's {hours['published_procedure']} (its grid sweep and 18 runs)"
    )
    if not found["status_running"]:
        failed.append("`rlvr-scaling status --running` showed nothing while the study ran")
    if not found["bundle_verified"]:
        failed.append("the bundle was not made or did not verify")
    return {"lines": lines, "failed": failed}


def text(outcomes: list[dict[str, Any]], checks: list[dict[str, Any]]) -> str:
    parts = []
    for found, check in zip(outcomes, checks, strict=True):
        mode = "on" if found["adaptive_steps"] else "off"
        parts.append(
            f"== The LUMI study rehearsed, adaptive steps {mode}, {found['compression']:g} x compressed: "
            f"{found['wall_seconds']:.0f} s (the study {found['study_seconds']:.0f} s), "
            f"Snakemake's exits {found['calls']}"
        )
        parts += check["lines"]
        parts.append(
            "`rlvr-scaling status --running` while it ran (the fullest of the samples; its clock and "
            f"node-hours are the compressed ones: x {found['compression']:g} at LUMI's scale):"
        )
        parts += [f"  | {line}" for line in found["status_running"].splitlines()]
        parts += [f"NOT AS IT MUST BE: {problem}" for problem in check["failed"]] or ["Everything as it must be."]
    if len(outcomes) == 2:
        off, on = (o["node_hours"]["spent"] for o in outcomes)
        same = [v["verdict"] for v in outcomes[0]["verdict"]] == [v["verdict"] for v in outcomes[1]["verdict"]]
        parts.append(
            f"== Adaptive steps: {off} node-hours off, {on} on ({(1 - on / off) * 100 if off else 0:.0f}% less); "
            f"the verdict {'the same' if same else 'DIFFERS'}"
        )
    return "\n".join(parts)
