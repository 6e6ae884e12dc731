"""The Slurm executor the profiles use (`executor: rlvr-slurm`): snakemake-executor-plugin-slurm
2.8.0 as it is, with two of its parts replaced by the study's own (rlvr_scaling.execution.slurm_jobs
says why):

- job states are read by job id, from squeue and then accounting, and a job neither knows is given
  up after a bound instead of being waited on forever; a failure keeps Slurm's state and reason;
- a step whose Slurm job is still pending or running from an earlier controller (same rule and
  wildcards in the job's comment, same working directory) is not submitted again: that job is
  waited on as if this controller had submitted it.

Everything else (sbatch lines, accounts, partitions, logs, cancelling, excluding the nodes a job lost)
is the plugin's, but for three things: a successful job's Slurm log is kept (a week-long study's
record); array jobs and jobs on another cluster are refused (their states are not read by one job id
on this cluster); and a job's comment is the plugin's, which names the rule and its wildcard values
joined by "_": unambiguous for the rules this workflow submits (run, preflight, container_image: at most
one wildcard each). The settings are the plugin's, under this executor's prefix (`rlvr-slurm-logdir`,
...), and two more below; with `rlvr-slurm-requeue`, a job's NODE_FAIL or PREEMPTED is waited on.
"""

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snakemake_executor_plugin_slurm import Executor as SlurmExecutor
from snakemake_executor_plugin_slurm import ExecutorSettings as SlurmExecutorSettings
from snakemake_executor_plugin_slurm import common_settings
from snakemake_executor_plugin_slurm.utils import get_job_wildcards
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

__all__ = ["Executor", "ExecutorSettings", "common_settings"]
# rlvr_scaling is imported where it is used, not here: Snakemake imports every executor plugin as it
# reads its command line, before the Snakefile puts the clone's own package first on the path, and
# another clone's Snakemake must run that clone's code (tests/test_workflow_dryrun.py).

# The plugin's own pacing of status checks: back off by 10 s while nothing finishes, up to 180 s
# (within Slurm's default MinJobAge of 300 s), and start again from the first interval after a job ends.
BACKOFF_STEP_S = 10
BACKOFF_MAX_S = 180


@dataclass
class ExecutorSettings(SlurmExecutorSettings):
    no_accounting: bool = field(
        default=False,
        metadata={
            "help": "Do not ask Slurm's accounting (sacct) for a job squeue no longer lists: for a cluster "
            "without accounting.",
            "env_var": False,
            "required": False,
        },
    )
    vanished_after_seconds: int = field(
        default=900,
        metadata={
            "help": "Give up a job that neither squeue nor sacct has listed for this long (while both "
            "answered); it is then judged by its outputs.",
            "env_var": False,
            "required": False,
        },
    )


def job_comment(job: Any) -> str:
    """The comment the plugin gives a job's sbatch (its run_job): the rule and its wildcards."""
    wildcards = get_job_wildcards(job)
    return f"rule_{job.name}_wildcards_{wildcards}" if wildcards else f"rule_{job.name}"


class Executor(SlurmExecutor):
    # Snakemake's RemoteExecutor property (seconds until the next status check), set by check_active_jobs.
    next_seconds_between_status_checks: int

    def __post_init__(self, test_mode: bool = False) -> None:
        super().__post_init__(test_mode)
        from rlvr_scaling.execution.slurm_jobs import JobWatch

        settings = self.workflow.executor_settings
        if settings.array_jobs:
            # Array tasks are known to squeue as <id>_<task> and to sacct by another id: not read here.
            raise WorkflowError(
                "rlvr-slurm reads job states by job id: array jobs (rlvr-slurm-array-jobs) are not supported"
            )
        self.job_watch = JobWatch(
            accounting=not settings.no_accounting,
            vanished_after_s=settings.vanished_after_seconds,
            requeue=bool(settings.requeue),
        )
        # The live jobs one squeue read for the jobs of one scheduling round, per job (#62).
        self._round_live_jobs: dict[int, list[Any] | None] = {}

    def run_jobs(self, jobs: list[Any]) -> None:
        """One `squeue --me` for every job Snakemake hands over at once (about 32 at the study's
        start), not one per job: the plugin then submits each in a thread of its own."""
        from rlvr_scaling.execution.slurm_jobs import live_jobs

        if jobs:
            found = live_jobs()
            self._round_live_jobs.update({id(job): found for job in jobs})
        super().run_jobs(jobs)

    def run_job(self, job: Any) -> None:
        from rlvr_scaling.execution.slurm_jobs import jobs_working_for, live_jobs

        if any(job.resources.get(key) for key in ("cluster", "clusters", "slurm_cluster")):
            # squeue and sacct are asked on the local cluster only.
            self._report_job_error_threadsafe(
                SubmittedJobInfo(job), "rlvr-slurm submits to one cluster: drop the job's cluster resource"
            )
            return
        jobs = self._round_live_jobs.pop(id(job)) if id(job) in self._round_live_jobs else live_jobs()
        if jobs is None:
            self.logger.warning(
                f"squeue did not answer: {job_comment(job)} is submitted without checking for a job an "
                "earlier controller left running for it."
            )
        working = jobs_working_for(job_comment(job), str(self.workflow.workdir_init), jobs or [])
        if not working:
            super().run_job(job)
            return
        adopted, *others = working
        # Where the plugin's run_job had that job write its log.
        log = self.slurm_logdir / f"{'group' if job.is_group() else 'rule'}_{job.name}" / get_job_wildcards(job)
        self.logger.warning(
            f"{job_comment(job)} is already in Slurm as job {adopted.job_id} ({adopted.state}), submitted "
            f"by an earlier controller from this folder: waiting for it instead of submitting it again "
            f"(scancel {adopted.job_id} stops it)."
            + (f" Also in Slurm for it: {', '.join(o.job_id for o in others)}." if others else "")
        )
        self._report_job_submission_threadsafe(
            SubmittedJobInfo(job, external_jobid=adopted.job_id, aux={"slurm_logfile": log / f"{adopted.job_id}.log"})
        )

    def _exclude_failed_nodes(self, job_id: str) -> None:
        """As the plugin does: later jobs avoid the nodes a job lost (its --exclude)."""
        self._failed_nodes.update(_failed_nodes_of(job_id))

    async def check_active_jobs(self, active_jobs: list[SubmittedJobInfo]) -> AsyncGenerator[SubmittedJobInfo, None]:
        if not active_jobs:
            return
        async with self.status_rate_limiter:
            verdicts = self.job_watch.verdicts(j.external_jobid for j in active_jobs)
        any_finished = False
        for j in active_jobs:
            verdict = verdicts[j.external_jobid]
            if verdict.phase == "live":
                yield j
                continue
            any_finished = True
            logs = [str(j.aux["slurm_logfile"])] if j.aux.get("slurm_logfile") else []
            if verdict.phase == "succeeded" or (verdict.phase == "vanished" and outputs_present(j)):
                if verdict.phase == "vanished":
                    self.logger.warning(f"{verdict.message}; its outputs are all there, so it is taken as done.")
                self.report_job_success(j)
            else:
                if verdict.state == "NODE_FAIL":
                    self._exclude_failed_nodes(j.external_jobid)
                self.report_job_error(j, msg=f"{verdict.message}. ", aux_logs=logs)
        initial = self.workflow.executor_settings.init_seconds_before_status_checks or 40
        self.next_seconds_between_status_checks = (
            initial if any_finished else min(self.next_seconds_between_status_checks + BACKOFF_STEP_S, BACKOFF_MAX_S)
        )


def _failed_nodes_of(job_id: str) -> set[str]:
    from rlvr_scaling.execution.slurm_jobs import run_command

    answer = run_command(["sacct", "-j", job_id, "-n", "-X", "-o", "NodeList%-256"])
    return {line.strip() for line in answer.stdout.splitlines() if line.strip()} if answer.returncode == 0 else set()


def outputs_present(job_info: SubmittedJobInfo) -> bool:
    return all(Path(str(output)).exists() for output in job_info.job.output)
