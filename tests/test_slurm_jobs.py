"""The executor's job states (execution/slurm_jobs.py) from squeue's and sacct's answers: every end
state recognised with Slurm's reason kept, a job neither lists given up exactly at its bound, and a
Slurm that does not answer never taken for a job gone. The real cluster's answers are in
tests/test_slurm_restart.py; here the answers are the formats those commands print."""

from __future__ import annotations

import subprocess

import pytest
from rlvr_scaling.execution.slurm_jobs import (
    JobWatch,
    LiveJob,
    jobs_working_for,
    parse_live_jobs,
    parse_sacct,
    parse_squeue,
)


def test_sacct_states_keep_who_cancelled_the_exit_code_and_the_reason() -> None:
    states = parse_sacct("104|CANCELLED by 1000|0:15|None\n105|TIMEOUT|0:0|TimeLimit\n106|COMPLETED|0:0|None\n\n")
    assert (states["104"].state, states["104"].detail) == ("CANCELLED", "by 1000; exit code 0:15")
    assert (states["105"].state, states["105"].detail) == ("TIMEOUT", "reason: TimeLimit")
    assert [states[j].phase for j in ("104", "105", "106")] == ["failed", "failed", "succeeded"]
    assert states["104"].describe() == "Slurm job 104: CANCELLED (by 1000; exit code 0:15), according to sacct"


def test_squeue_states_and_their_phases() -> None:
    text = "7|PENDING|Resources\n8|COMPLETING|None\n9|OUT_OF_MEMORY|None\n10|NODE_FAIL|(null)\n11|NEW_STATE|None\n"
    states = parse_squeue(text)
    assert {job: s.phase for job, s in states.items()} == {
        "7": "live",
        "8": "live",  # still ending: its processes may still write
        "9": "failed",
        "10": "failed",
        "11": "live",  # a word this code does not know never gives a job up
    }
    assert states["7"].detail == "reason: Resources" and states["10"].detail == ""


class Answers:
    """squeue's and sacct's answers in turn, as the commands print them."""

    def __init__(self) -> None:
        self.squeue: tuple[int, str, str] = (0, "", "")
        self.sacct: tuple[int, str, str] = (0, "", "")
        self.asked: list[list[str]] = []

    def __call__(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        self.asked.append(command)
        code, out, err = self.squeue if command[0] == "squeue" else self.sacct
        return subprocess.CompletedProcess(command, code, out, err)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _watch(accounting: bool = True, bound: float = 60.0) -> tuple[JobWatch, Answers, Clock]:
    answers, clock = Answers(), Clock()
    return JobWatch(accounting=accounting, vanished_after_s=bound, run=answers, clock=clock), answers, clock


def test_a_job_squeue_no_longer_lists_is_asked_of_accounting_only() -> None:
    watch, answers, _ = _watch()
    answers.squeue = (0, "1|RUNNING|None\n", "")
    answers.sacct = (0, "2|CANCELLED by 0|0:0|None\n", "")
    verdicts = watch.verdicts(["1", "2"])
    assert verdicts["1"].phase == "live" and verdicts["2"].phase == "failed"
    assert "CANCELLED (by 0)" in verdicts["2"].message
    sacct = [c for c in answers.asked if c[0] == "sacct"]
    assert len(sacct) == 1 and sacct[0][sacct[0].index("-j") + 1] == "2"


def test_squeue_knowing_none_of_the_ids_is_an_answer_not_a_failure() -> None:
    watch, answers, clock = _watch(bound=60)
    answers.squeue = (1, "", "slurm_load_jobs error: Invalid job id specified\n")
    assert watch.verdicts(["3"])["3"].phase == "live"  # the first time: unknown since now
    clock.now += 59.9
    assert watch.verdicts(["3"])["3"].phase == "live"
    clock.now += 0.1  # exactly the bound
    verdict = watch.verdicts(["3"])["3"]
    assert verdict.phase == "vanished"
    assert verdict.message == (
        "Slurm job 3 vanished: squeue and sacct have not listed it for 60 s (the bound: 60 s), "
        "so its end state is unknown"
    )


@pytest.mark.parametrize("down", ["squeue", "sacct"])
def test_time_without_an_answer_from_slurm_never_counts_towards_vanishing(down: str) -> None:
    watch, answers, clock = _watch(bound=60)
    failure = (1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")
    answers.squeue = failure if down == "squeue" else (0, "", "")
    answers.sacct = failure if down == "sacct" else (0, "", "")
    for _ in range(5):
        assert watch.verdicts(["4"])["4"].phase == "live"
        clock.now += 100
    # Slurm answers again and still does not know the job: the bound starts now, not before.
    answers.squeue, answers.sacct = (0, "", ""), (0, "", "")
    assert watch.verdicts(["4"])["4"].phase == "live"
    clock.now += 59
    assert watch.verdicts(["4"])["4"].phase == "live"
    clock.now += 1
    assert watch.verdicts(["4"])["4"].phase == "vanished"


def test_a_job_seen_again_starts_its_bound_afresh() -> None:
    watch, answers, clock = _watch(bound=60)
    watch.verdicts(["5"])
    clock.now += 50
    answers.squeue = (0, "5|RUNNING|None\n", "")
    assert watch.verdicts(["5"])["5"].phase == "live"
    answers.squeue = (0, "", "")
    clock.now += 50
    assert watch.verdicts(["5"])["5"].phase == "live"  # 50 s unknown since it was last seen, not 100


def test_without_accounting_sacct_is_never_run_and_the_message_says_so() -> None:
    watch, answers, clock = _watch(accounting=False, bound=10)
    watch.verdicts(["6"])
    clock.now += 10
    verdict = watch.verdicts(["6"])["6"]
    assert verdict.phase == "vanished" and "squeue (accounting not read) have not listed it for 10 s" in verdict.message
    assert all(command[0] == "squeue" for command in answers.asked)


def test_the_live_job_for_a_step_is_the_oldest_one_from_the_same_folder(tmp_path) -> None:
    here, elsewhere = tmp_path / "study", tmp_path / "other-clone"
    here.mkdir(), elsewhere.mkdir()
    (tmp_path / "link").symlink_to(here)
    text = "\n".join(
        [
            f"31|RUNNING|rule_run_wildcards_gsm8k-n1-p2-abc|{elsewhere}|n1|2026-12-05T10:00:00|1:00:00|None",
            f"40|PENDING|rule_run_wildcards_gsm8k-n1-p2-abc|{tmp_path / 'link'}|||1:00:00|Priority",
            f"33|RUNNING|rule_run_wildcards_gsm8k-n1-p2-abc|{here}|n2|2026-12-05T10:01:00|1:00:00|None",
            f"34|RUNNING|rule_run_wildcards_gsm8k-n1-p2-abcd|{here}|n3|2026-12-05T10:02:00|1:00:00|None",
            f"35|COMPLETED|rule_run_wildcards_gsm8k-n1-p2-abc|{here}|n4|2026-12-05T09:00:00|1:00:00|None",
        ]
    )
    jobs = parse_live_jobs(text)
    assert [job.job_id for job in jobs] == ["31", "40", "33", "34"]  # a finished job is not live
    found = jobs_working_for("rule_run_wildcards_gsm8k-n1-p2-abc", str(here), jobs)
    assert [job.job_id for job in found] == ["33", "40"]
    assert found[1] == LiveJob(
        "40", "PENDING", "rule_run_wildcards_gsm8k-n1-p2-abc", str(tmp_path / "link"), "", "", "1:00:00", "Priority"
    )


def test_with_requeue_a_lost_node_or_a_preemption_is_waited_on_and_without_it_is_the_end() -> None:
    for requeue, phase in ((True, "live"), (False, "failed")):
        answers = Answers()
        answers.squeue = (0, "8|NODE_FAIL|None\n9|PREEMPTED|None\n10|TIMEOUT|None\n", "")
        verdicts = JobWatch(requeue=requeue, run=answers).verdicts(["8", "9", "10"])
        assert (verdicts["8"].phase, verdicts["9"].phase, verdicts["10"].phase) == (phase, phase, "failed")
        assert verdicts["8"].state == "NODE_FAIL"


def test_a_slurm_command_that_hangs_or_is_missing_is_a_failed_answer_not_an_exception(monkeypatch) -> None:
    from rlvr_scaling.execution import slurm_jobs

    def hangs(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(slurm_jobs.subprocess, "run", hangs)
    answer = slurm_jobs.run_command(["squeue", "--me"])
    assert answer.returncode == 1 and "squeue: Command '['squeue', '--me']' timed out after 60 seconds" in answer.stderr
    assert slurm_jobs.live_jobs() is None
    assert JobWatch().verdicts(["11"])["11"].phase == "live"  # Slurm did not answer: still waited on
    answer = slurm_jobs.run_command(["no-such-slurm-command-rlvr"])
    assert answer.returncode == 1 and "no-such-slurm-command-rlvr" in answer.stderr


def test_one_squeue_serves_every_submission_of_a_scheduling_round(monkeypatch) -> None:
    """The study's start hands the executor about 32 jobs at once; each asked squeue --me before
    its submission (#62). Now the round asks once and each job's submission reads that answer."""
    from rlvr_scaling.execution import slurm_jobs
    from snakemake_executor_plugin_rlvr_slurm import Executor, SlurmExecutor

    asked = []
    monkeypatch.setattr(slurm_jobs, "live_jobs", lambda: asked.append(1) or [])
    submitted = []
    monkeypatch.setattr(SlurmExecutor, "run_jobs", lambda self, jobs: submitted.extend(jobs))
    executor = Executor.__new__(Executor)  # the round's bookkeeping only: no workflow, no Slurm
    executor._round_live_jobs = {}
    jobs = [object() for _ in range(32)]
    executor.run_jobs(jobs)
    assert len(asked) == 1 and submitted == jobs
    assert all(executor._round_live_jobs[id(job)] == [] for job in jobs)
    executor.run_jobs([])  # nothing handed over: nothing asked
    assert len(asked) == 1
