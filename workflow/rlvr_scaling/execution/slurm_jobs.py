"""Slurm's word on the workflow's jobs: what state each is in, from squeue while Slurm's controller
still holds it and from accounting (sacct) after, and which job already works for a step.

Why not the executor plugin's own polling (snakemake-executor-plugin-slurm 2.8.0): it asks for the
jobs of one controller's run (`--name <uuid>`), so a restarted controller cannot see the jobs its
predecessor submitted; a job squeue no longer lists (after MinJobAge) counts as running forever; and
sacct's "CANCELLED by <uid>" is no state it knows, so a cancelled job was waited on without end.

Here a job is asked for by its id; a state is its first word; a job neither squeue nor accounting
knows while both answered is "vanished" once that has lasted a bound, and is then judged by what it
left behind. A source that did not answer (slurmctld or slurmdbd down) does not count towards it:
Slurm is then unreachable, not the job gone.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# Slurm's job states (squeue(1), sacct(1) "JOB STATE CODES"), by what the workflow does on each.
LIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "RESV_DEL_HOLD",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "SUSPENDED",
    }
)
SUCCEEDED_STATES = frozenset({"COMPLETED"})
FAILED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
REQUEUED_ON = frozenset({"NODE_FAIL", "PREEMPTED"})
SQUEUE_FORMAT = "%i|%T|%r"
SACCT_FORMAT = "JobIdRaw,State,ExitCode,Reason"
# What squeue prints when none of the ids asked for is still held by the controller: an answer
# ("none of these"), not a failure of the source.
NO_SUCH_JOBS = "Invalid job id specified"
LIVE_JOB_FORMAT = "%i|%T|%k|%Z|%N|%S|%l|%r"


@dataclass(frozen=True)
class JobState:
    """One job's state as one source gave it."""

    job_id: str
    state: str  # Slurm's state's first word: CANCELLED of "CANCELLED by 1000"
    source: str  # squeue or sacct
    detail: str = ""  # the rest Slurm said: who cancelled, the exit code, Slurm's reason

    @property
    def phase(self) -> str:
        if self.state in SUCCEEDED_STATES:
            return "succeeded"
        if self.state in FAILED_STATES:
            return "failed"
        # A state this list does not know is taken as live: a job is never given up on a word.
        return "live"

    def describe(self) -> str:
        said = f" ({self.detail})" if self.detail else ""
        return f"Slurm job {self.job_id}: {self.state}{said}, according to {self.source}"


@dataclass(frozen=True)
class Verdict:
    job_id: str
    phase: str  # live, succeeded, failed or vanished
    message: str
    state: str = ""  # Slurm's state, where a source gave one


def _reason(text: str) -> str:
    text = text.strip()
    return "" if text in ("", "None", "(null)") else text


def parse_squeue(text: str) -> dict[str, JobState]:
    """squeue --format=%i|%T|%r lines: the job, its state and Slurm's reason for it."""
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and parts[0]:
            reason = _reason(parts[2]) if len(parts) > 2 else ""
            states[parts[0]] = JobState(parts[0], parts[1].strip(), "squeue", f"reason: {reason}" if reason else "")
    return states


def parse_sacct(text: str) -> dict[str, JobState]:
    """sacct -X -P --format=JobIdRaw,State,ExitCode,Reason lines. The state's first word is the state;
    the rest of it (sacct's "CANCELLED by 1000") is kept with the exit code and the reason."""
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2 or not parts[0]:
            continue
        state, _, by = parts[1].strip().partition(" ")
        detail = [by] if by else []
        if len(parts) > 2 and parts[2].strip() not in ("", "0:0"):
            detail.append(f"exit code {parts[2].strip()}")
        if len(parts) > 3 and _reason(parts[3]):
            detail.append(f"reason: {_reason(parts[3])}")
        states[parts[0]] = JobState(parts[0], state, "sacct", "; ".join(detail))
    return states


Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def run_command(command: list[str]) -> subprocess.CompletedProcess[str]:
    """A Slurm command's answer; one that hangs or cannot start is a failed answer, never an exception
    (the executor's threads and the status view go on, and take Slurm as not answering)."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(command, 1, "", f"{command[0]}: {exc}")


def squeue_states(job_ids: list[str], run: Runner = run_command) -> dict[str, JobState] | None:
    """The jobs the controller still holds, by id; None when squeue did not answer."""
    command = ["squeue", "--noheader", "--states=all", f"--jobs={','.join(job_ids)}", f"--format={SQUEUE_FORMAT}"]
    result = run(command)
    if result.returncode != 0:
        return {} if NO_SUCH_JOBS in result.stderr else None
    return parse_squeue(result.stdout)


def sacct_states(job_ids: list[str], run: Runner = run_command) -> dict[str, JobState] | None:
    """The jobs accounting holds, by id; None when sacct did not answer (slurmdbd unreachable)."""
    result = run(["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), f"--format={SACCT_FORMAT}"])
    return parse_sacct(result.stdout) if result.returncode == 0 else None


@dataclass
class JobWatch:
    """The states of the jobs a controller waits on, across its status checks.

    `accounting`: whether to ask sacct about a job squeue no longer lists (false on a cluster
    without accounting). `vanished_after_s`: how long a job may be unknown to every source that
    answered before it is given up as vanished."""

    accounting: bool = True
    vanished_after_s: float = 900.0
    # Jobs submitted with --requeue: Slurm puts a job that lost a node or was preempted back in the
    # queue under the same id, so those states are not its end.
    requeue: bool = False
    run: Runner = run_command
    clock: Callable[[], float] = time.monotonic
    unknown_since: dict[str, float] = field(default_factory=dict)

    def verdicts(self, job_ids: Iterable[str]) -> dict[str, Verdict]:
        ids = sorted(set(job_ids))
        if not ids:
            return {}
        states = squeue_states(ids, self.run)
        answered = states is not None
        states = dict(states or {})
        missing = [job_id for job_id in ids if job_id not in states]
        if missing and self.accounting:
            from_accounting = sacct_states(missing, self.run)
            answered = answered and from_accounting is not None
            states.update(from_accounting or {})
        return {job_id: self._verdict(job_id, states.get(job_id), answered) for job_id in ids}

    def _verdict(self, job_id: str, state: JobState | None, answered: bool) -> Verdict:
        now = self.clock()
        if state is not None:
            self.unknown_since.pop(job_id, None)
            requeued = self.requeue and state.state in REQUEUED_ON
            return Verdict(job_id, "live" if requeued else state.phase, state.describe(), state.state)
        if not answered:
            # Slurm did not answer: the time it was away does not count towards vanishing.
            self.unknown_since.pop(job_id, None)
            return Verdict(job_id, "live", f"Slurm job {job_id}: no answer from Slurm's commands")
        since = self.unknown_since.setdefault(job_id, now)
        unknown_for = now - since
        sources = "squeue and sacct" if self.accounting else "squeue (accounting not read)"
        if unknown_for >= self.vanished_after_s:
            return Verdict(
                job_id,
                "vanished",
                f"Slurm job {job_id} vanished: {sources} have not listed it for {unknown_for:.0f} s "
                f"(the bound: {self.vanished_after_s:.0f} s), so its end state is unknown",
            )
        return Verdict(job_id, "live", f"Slurm job {job_id}: not listed by {sources} for {unknown_for:.0f} s")


@dataclass(frozen=True)
class LiveJob:
    """A job of this user that Slurm still holds, with what identifies the step it works for."""

    job_id: str
    state: str
    comment: str
    workdir: str
    nodes: str
    start: str
    time_limit: str
    reason: str


def parse_live_jobs(text: str) -> list[LiveJob]:
    jobs = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 8 and parts[0]:
            job_id, state, comment, workdir, nodes, start, limit, reason = (p.strip() for p in parts)
            if state in LIVE_STATES:
                jobs.append(LiveJob(job_id, state, comment, workdir, nodes, start, limit, _reason(reason)))
    return jobs


def live_jobs(run: Runner = run_command) -> list[LiveJob] | None:
    """This user's jobs Slurm still holds, pending or running; None when squeue did not answer."""
    result = run(["squeue", "--me", "--noheader", f"--format={LIVE_JOB_FORMAT}"])
    return parse_live_jobs(result.stdout) if result.returncode == 0 else None


def same_folder(first: str, second: str) -> bool:
    return os.path.realpath(first) == os.path.realpath(second)


def jobs_working_for(comment: str, workdir: str, jobs: Iterable[LiveJob]) -> list[LiveJob]:
    """The live jobs submitted for the same step (the executor's comment names the rule and its
    wildcards) from the same working directory, oldest first: another clone's job for the same
    run is not this study's."""
    found = [job for job in jobs if job.comment == comment and same_folder(job.workdir, workdir)]
    return sorted(found, key=lambda job: int(job.job_id) if job.job_id.isdigit() else 0)
