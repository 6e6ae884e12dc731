"""Running one run of the plan: a self-describing run directory, moved into place only on success.

Layout written for every run (results/runs/<run_id>/ on success, results/failed/<run_id>/<stamp>/
otherwise): spec.json, command.sh, console.log, metrics.jsonl, job.json. The pieces: the run's folder
(run_directory), what it records (run_records), how verl reaches its nodes (launchers/), what the end
means for the study (outcome), and the guard no death of the launcher escapes (watchdog).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.errors import StudyError
from rlvr_scaling.execution.energy import EnergyMeter
from rlvr_scaling.execution.engine_record import RECORD_DIR_VAR, engine_events
from rlvr_scaling.execution.fabric_record import fabric_environment, transport_record
from rlvr_scaling.execution.failed_runs import now, recover_leftovers
from rlvr_scaling.execution.failure_cause import failure_cause
from rlvr_scaling.execution.launchers import Started, launcher_for
from rlvr_scaling.execution.outcome import judge
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, end_processes
from rlvr_scaling.execution.run_directory import RunDirectory
from rlvr_scaling.execution.run_environment import expanded_environment
from rlvr_scaling.execution.run_records import job_record, render_command, spec_document
from rlvr_scaling.execution.stall_guard import StallBound, run_stall_bound, stall_record
from rlvr_scaling.execution.step_clock import POLL_SECONDS, EarlyStop, StepClock, keep_steps_to_stop
from rlvr_scaling.execution.watchdog import Guard
from rlvr_scaling.inputs.container import module_environment, record_path, require_runtime
from rlvr_scaling.inputs.container_build import base_changed_since_build
from rlvr_scaling.inputs.step_size import step_problem
from rlvr_scaling.measured.adaptive_steps import StopRule
from rlvr_scaling.study.config import Study
from rlvr_scaling.study.plan import Run


class RunFailed(Exception):
    """The run ran and failed; its evidence is kept under results/failed/."""


class StopRequested(Exception):
    """The adaptive step count stops the run: its mean step time is known well enough."""


class Stalled(Exception):
    """The hang guard stops the run: no step within its bound (execution.stall_guard)."""


def check_inputs(study: Study, run: Run, root: Path, site_env: dict[str, str]) -> None:
    """Fail before anything starts when the inputs cannot serve this run."""
    manifest_path = paths.dataset_dir(root, study.site_name, run.dataset) / "manifest.json"
    if not manifest_path.exists():
        raise StudyError(f"dataset {run.dataset} is missing: {manifest_path} (run the data stage first)")
    rows = json.loads(manifest_path.read_text())["files"]["train"]["rows"]
    too_large = step_problem(study, run, rows, f"counted by the data stage ({manifest_path})")
    if too_large:
        raise StudyError(too_large)
    model = paths.model_dir(root, study.site_name, study.model_folder)
    if not (model / "config.json").exists():
        raise StudyError(f"model is missing: {model} (run the model stage first)")
    if study.site.container is not None:
        # As the run's commands will see it: after the site's module commands (which may provide it).
        require_runtime(study, {**os.environ, **site_env})
        changed = base_changed_since_build(study, record_path(study, root))
        if changed:
            raise StudyError(changed)


def wait_watching(process: subprocess.Popen, timeout_s: float | None, clock: StepClock | None) -> int:
    """process.wait(timeout_s), stamping the steps as they are logged (verl's file logger writes no
    time; start-up and tear-down are measured from these stamps). Raises StopRequested once the clock's
    stop rule holds. If verl has just ended on its own, exit 0, its end is judged as it is; if it failed
    after the step where the rule held, the run stopped there all the same: a poll a second earlier
    would have ended it, and its steps up to the stop are the measurement."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(process.args, timeout_s or 0)
        try:
            poll = clock.poll_seconds if clock is not None else POLL_SECONDS
            code = process.wait(timeout=poll if left is None else min(poll, left))
        except subprocess.TimeoutExpired:
            code = None
        if clock is not None:
            # Also once verl has exited: a last step logged within the last second is stamped now,
            # before the launcher's own tear-down (Ray, processes) is counted as the run's.
            clock.poll()
            if code is None and clock.stalled() is not None:
                raise Stalled
            if clock.stop is not None:
                # verl may have ended between the wait and the look: judged as it ended, as above.
                code = process.poll() if code is None else code
                if code != 0:
                    raise StopRequested
                clock.cancel_stop()
        if code is not None:
            return code


def execute(
    command_file: Path,
    console: Path,
    env: dict[str, str],
    token: str,
    timeout_s: float | None,
    before: Callable[[], Started | None] | None = None,
    clock: StepClock | None = None,
) -> tuple[int, str]:
    """Run command.sh (after `before()`, e.g. forming the Ray cluster); on any exit, also a signal to
    us, end every process the run started."""
    status = "failed"
    received: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    started = None
    try:
        try:
            started = before() if before else None
        except KeyboardInterrupt:
            return 128 + (received[0] if received else signal.SIGINT), "terminated"
        except Exception as exc:  # the evidence goes into console.log; the run is marked failed
            with open(console, "a") as note:
                note.write(f"rlvr-scaling: the launcher failed before verl started: {exc!r}\n")
                note.write(traceback.format_exc())
            return -1, "launch failed"
        with open(console, "ab") as log:
            process = subprocess.Popen(
                ["bash", str(command_file)], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            try:
                code = wait_watching(process, timeout_s, clock)
                status = "succeeded" if code == 0 else "failed"
            except subprocess.TimeoutExpired:
                code, status = -1, "timed out"
            except StopRequested:
                code, status = _stop(process, token, received)
            except Stalled:
                code, status = _stop(process, token, received)
                status = "stalled" if status == "stopped early" else status
            except KeyboardInterrupt:
                code = 128 + (received[0] if received else signal.SIGINT)
                status = "terminated"
    finally:
        if started is not None:
            started.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        end_processes(token)
    return code, status


def _stop(process: subprocess.Popen, token: str, received: list[int]) -> tuple[int, str]:
    """End a run the adaptive step count stopped. verl cannot be told to stop after a step: its
    processes are ended, as on any exit, and the launcher keeps the steps up to the stop
    (step_clock.keep_steps_to_stop). A signal to us meanwhile makes it a run terminated."""
    try:
        end_processes(token)
        return process.wait(timeout=30), "stopped early"
    except KeyboardInterrupt:
        return 128 + (received[0] if received else signal.SIGINT), "terminated"
    except subprocess.TimeoutExpired:  # it outlived SIGKILL (a process stuck in the kernel)
        return -1, "stopped early"


def _clock(
    study: Study,
    run: Run,
    metrics: Path,
    bound: StallBound,
    meter: EnergyMeter,
    on_stop: Callable[[EarlyStop], None],
) -> StepClock:
    """The run's step clock: its adaptive stop rule, energy readings, the guard's bound, the site's poll."""
    rule = StopRule.of_run(run.to_dict())
    return StepClock(metrics, rule, on_stop, meter.read, bound, study.site.launch.poll_seconds)


def _stall_of(clock: StepClock, bound: StallBound, run: Run, elapsed_s: float, folder: Path) -> dict[str, Any]:
    """What job.json keeps of a run the hang guard stopped (stall_guard.stall_record)."""
    waited = time.monotonic() - clock.last_progress
    last = clock.last[0] if clock.last else None
    return stall_record(bound, waited, last, clock.longest_measured(), run, elapsed_s, folder)


def _failure_detail(problems: list[str], code: int | None, job: dict[str, Any]) -> str:
    """Why a failed run failed, for its note and the error: the hang guard's finding where it fired."""
    if "stall" in job:
        return f"{job['stall']['detail']}; {job['stall']['node_hours_saved']:g} node-hours of its time limit saved"
    detail = "; ".join(problems) if problems else f"exit status {code}"
    cause = job.get("cause")
    return f"{detail}: {cause['described']}" if cause else detail


def launch(study: Study, run: Run, root: Path, timeout_s: float | None = None) -> Path:
    """Run `run`; return its directory under results/runs/ or raise RunFailed."""
    directory = RunDirectory(root, run.run_id)
    directory.refuse_existing()
    # What the site's module commands set (LUMI: the AIF bindings), for the checks and the run.
    site_env = module_environment(study, dict(os.environ))
    check_inputs(study, run, root, site_env)
    expanded_environment(study, dict(os.environ))  # a ${NAME} the job lacks stops the run here
    for leftover in recover_leftovers(root, run.run_id):
        print(
            f"rlvr-scaling: an earlier launch of {run.run_id} did not finish; filed it in {leftover}", file=sys.stderr
        )
    # The guard first: from the staging folder's first moment, no death of ours leaves it behind.
    guard = Guard(directory.token, directory.staging, directory.failed)
    done = False  # the launch got through its own cleanup and filed the run
    try:
        directory.create()
        result = _run_in(study, run, root, directory, timeout_s, site_env)
        done = True
        return result
    except RunFailed:
        done = True
        raise
    except BaseException as exc:
        if directory.staging.is_dir():
            directory.file_failed(f"The launcher stopped on an error of its own: {exc!r}", status="launcher error")
        raise
    finally:
        # Only a launch that got through its own cleanup tells the guard it is done; otherwise the
        # guard ends whatever of the run is left (a second Ctrl-C during cleanup, an error).
        guard.release(done=done)


def _run_in(
    study: Study, run: Run, root: Path, directory: RunDirectory, timeout_s: float | None, site_env: dict[str, str]
) -> Path:
    """Everything between the staging folder's creation and its filing, under the guard."""
    launcher = launcher_for(study, root)
    directory.write_json("spec.json", spec_document(study, run))
    command_file = directory.write_script("command.sh", render_command(study, run, root, launcher.verl_args()))
    # The engine hooks' records (each worker's CPU binding, the rollout's memory): in the run's folder.
    record_dir = directory.path("engine")
    env = {**os.environ, TOKEN_VAR: directory.token, **site_env, RECORD_DIR_VAR: str(record_dir)}
    env.update(fabric_environment(study, record_dir))
    job = job_record(study, run, root, env)
    meter = EnergyMeter(study.site.energy.source, study.site.energy.path)
    job["energy"] = {**meter.describe(), "start": meter.read()}
    directory.write_json("job.json", job)

    def before() -> Started | None:
        started = launcher.start(run, directory.path("ray"), env, job)
        directory.write_json("job.json", job)
        return started

    began = time.monotonic()
    job["stall_bound"] = (bound := run_stall_bound(study, run)).to_dict()
    keep_stop = lambda stop: directory.write_json("job.json", {**job, "adaptive_stop": stop.record})  # noqa: E731
    clock = _clock(study, run, directory.path("metrics.jsonl"), bound, meter, keep_stop)
    console = directory.path("console.log")
    code, exit_status = execute(command_file, console, env, directory.token, timeout_s, before, clock)
    last_step = run.steps
    if clock.stop is not None:  # also when a signal cut the stop short: why verl was ended stays on record
        job.update(adaptive_stop=clock.stop.record)
        if exit_status == "stopped early":
            job["adaptive_stop"] = {**clock.stop.record, **keep_steps_to_stop(clock.metrics, clock.stop)}
            last_step = clock.stop.step
    if exit_status == "stalled":
        job["stall"] = _stall_of(clock, bound, run, time.monotonic() - began, directory.staging)
    outcome = judge(directory.staging, run.series, exit_status, last_step)
    job.update(end=now(), seconds=round(time.monotonic() - began, 1), exit_status=code, status=outcome.status)
    job["energy"]["end"] = meter.read()
    job.update(step_clock=clock.record(), engine=engine_events(record_dir))
    job.update(fabric=transport_record(study, run.nodes, record_dir, job.get("node_list")))
    job.update(problems=outcome.problems, memory_evidence=outcome.memory_evidence)
    if outcome.status not in ("succeeded", "stalled") and (cause := failure_cause(directory.staging)):
        job["cause"] = cause.to_dict()
    directory.write_json("job.json", job)
    if outcome.lands_in_runs:
        final = directory.commit()
        if outcome.status != "succeeded":
            print(
                f"rlvr-scaling: sweep point {run.run_id} ran out of memory ({outcome.memory_evidence}); recorded "
                f"as a memory-bound point in {final}",
                file=sys.stderr,
            )
        return final
    detail = _failure_detail(outcome.problems, code, job)
    failed = directory.file_failed(f"run {run.run_id} {outcome.status} ({detail})")
    raise RunFailed(f"run {run.run_id} {outcome.status} ({detail}); its logs are in {failed}")
