"""A failed run names its cause (#61): the last exception (or error line) of the trainer's console and
of the Ray logs the run keeps, in FAILED.txt, job.json and `status`, not only the exit status."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from rlvr_scaling.execution.failure_cause import MAX_CHARS, failure_cause, last_exception

from .conftest import REPO
from .workflow_helpers import assert_no_run_processes, snakemake, study_status

# The shape of a verl console where a Ray actor raised: the wrapper Ray raises in the driver, then
# the actor's own traceback and error, then Hydra's and Ray's lines after it.
VERL_CONSOLE = """(TaskRunner pid=4242) step:0 - val-core/openai/gsm8k/acc/mean@1:0.0
Error executing job with overrides: ['algorithm.adv_estimator=grpo']
Traceback (most recent call last):
  File "verl/trainer/main_ppo.py", line 42, in main
    run_ppo(config)
ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=4242, ip=10.0.0.1)
  File "transformers/tokenization_utils_base.py", line 1702, in apply_chat_template
\x1b[36m(TaskRunner pid=4242)\x1b[0m ValueError: Cannot use chat template functions because chat_template is not set
Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
srun: error: nid001234: task 0: Exited with exit code 1
"""


def test_the_cause_is_the_last_exception_not_the_lines_after_it(tmp_path: Path) -> None:
    assert last_exception(VERL_CONSOLE) == (
        8,
        "ValueError: Cannot use chat template functions because chat_template is not set",
    )
    # Without an exception, the last error line: srun's here.
    assert last_exception("starting\nsrun: error: nid1: task 0: Exited with exit code 1\ndone\n") == (
        2,
        "srun: error: nid1: task 0: Exited with exit code 1",
    )
    assert last_exception("step:1 - loss:0.1\nException ignored in: <function f>\n") is None
    run = tmp_path / "run"
    (run / "ray").mkdir(parents=True)
    (run / "console.log").write_text("nothing went wrong here\n")
    (run / "ray" / "node-nid2.log").write_text("x\nRuntimeError: " + "y" * 2000 + "\n")
    cause = failure_cause(run)
    assert cause is not None and (cause.file, cause.line) == ("ray/node-nid2.log", 2)
    assert len(cause.text) == MAX_CHARS and cause.text.startswith("RuntimeError: yyy")


# A reward that raises inside verl once a file exists: the preflight's engine smoke and the data
# stage's self-check (which run it too) pass before the test plants the file; the run then fails in
# verl's reward computation, far into its console.
REWARD = """
import os


def planted(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    if os.path.exists({trigger!r}):
        raise ValueError("planted failure inside verl's reward computation")
    return 1.0
"""

STUDY = """
site: local
study: {{name: failing, reference: null}}
datasets:
  my_problems:
    source: {data}
    held_out: 2
    question: item.text
    answer: target
    ground_truth: {{rule: number, marker: "The answer is:"}}
    prompt: "Solve: {{question}}"
    ability: arithmetic
    reward: {{file: {reward}, function: planted}}
    max_prompt_length: 96
    max_response_length: 16
    memory: {{recompute: false, offload: false, token_budget: 2048}}
    sweep: [2]
    estimate: {{seconds_per_trajectory: 0.1}}
overrides:
  scaling.weak_nodes: [1]
  scaling.strong_nodes: [1]
  scaling.strong_reference_nodes: 1
"""


@pytest.mark.slow
@pytest.mark.xdist_group("local-engine")
def test_a_failure_planted_inside_verl_is_named_in_failed_txt_job_json_and_status(
    workdir: Path, tmp_path: Path
) -> None:
    trigger = tmp_path / "fail-now"
    reward = tmp_path / "reward.py"
    reward.write_text(REWARD.format(trigger=str(trigger)))
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.format(data=REPO / "config/examples/data/problems.jsonl", reward=reward))
    snakemake(workdir, "--cores", "2", "--configfile", str(study), "--", "results/preflight/local.json")
    trigger.touch()
    failed = snakemake(workdir, "--cores", "2", "--configfile", str(study), check=False)
    assert failed.returncode != 0
    [attempt] = (workdir / "results" / "failed").glob("*/*")
    note = (attempt / "FAILED.txt").read_text()
    planted = "ValueError: planted failure inside verl's reward computation"
    assert planted in note and "console.log, line" in note, note
    job = json.loads((attempt / "job.json").read_text())
    cause = job["cause"]
    # verl 0.9.1 catches a reward's error inside the step and fails later on its own terms: the
    # exception that ended it is named, and the planted one as the first error.
    assert job["trainer"] == "verl.trainer.main_ppo" and cause["first_text"].endswith(planted), cause
    console = (attempt / "console.log").read_text().splitlines()
    assert planted in console[cause["first_line"] - 1] and cause["text"] in console[cause["line"] - 1]
    assert cause["first_line"] < cause["line"] < len(console)  # not the console's last line: Ray's follow
    status = study_status(workdir, study)
    assert planted in status, status
    # verl's Ray kept its session (sockets, logs) in the run's own folder, gone with the run (#61).
    assert job["ray_temp_dir"].startswith(tempfile.gettempdir()) and not Path(job["ray_temp_dir"]).exists()
    assert_no_run_processes()


def test_the_local_launchers_ray_folder_is_the_runs_own_and_goes_with_it(tmp_path: Path) -> None:
    from rlvr_scaling.execution.launchers.local import LocalLauncher
    from rlvr_scaling.execution.process_cleanup import TOKEN_VAR
    from rlvr_scaling.study.config import load_study

    env = {TOKEN_VAR: "tagged-0123456789abcdef0123"}
    job: dict = {}
    started = LocalLauncher(load_study(site="local"), tmp_path).start(None, tmp_path / "ray", env, job)  # type: ignore[arg-type]  # the run is not read
    folder = Path(env["RAY_TMPDIR"])
    assert folder == Path(job["ray_temp_dir"]) and folder.is_dir() and folder.name.endswith("456789abcdef0123")
    # A signal ends verl's Ray at once, without Ray 2.60's 30 s drain of its node.
    assert env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] == "0"
    (folder / "ray" / "session_x").mkdir(parents=True)  # what verl's ray.init makes there
    started.stop()
    assert not folder.exists()
