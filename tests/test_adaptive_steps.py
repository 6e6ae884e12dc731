"""The optional adaptive step count: the rule, the launcher's clock applying it as steps are logged,
the stop itself (the run's processes ended, its steps kept up to the stop), the summary applying the
rule again, the setting's checks and identity, the report's saving, and the real verl trainer stopped
early through Snakemake (the last test)."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rlvr_scaling import paths
from rlvr_scaling.analysis.cost.adaptive_report import adaptive_findings, steps_not_run_node_hours
from rlvr_scaling.analysis.per_run.results_io import StudyResults
from rlvr_scaling.analysis.per_run.summary import summarize_run
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.execution.launch import execute, wait_watching
from rlvr_scaling.execution.process_cleanup import TOKEN_VAR, new_token, processes_with_token
from rlvr_scaling.execution.run_records import spec_document
from rlvr_scaling.execution.step_clock import AFTER_STOP, StepClock, keep_steps_to_stop
from rlvr_scaling.measured.adaptive_steps import StopRule, stop_record
from rlvr_scaling.measured.metrics_file import read_metrics_jsonl
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import Run, build_plan, known_runs

from .test_metrics import step_fields
from .workflow_helpers import STANDIN, assert_no_run_processes, snakemake

ON = ["adaptive_steps.enabled=true", "adaptive_steps.min_measured_steps=3", "adaptive_steps.relative_halfwidth=0.05"]
# Step 1 is the warm-up; from step 2 the step time is steady to +-0.2%, then a step that is not.
STEADY = [9.0, 5.0, 5.01, 4.99, 5.0, 5.01, 5.0, 4.99, 5.0, 5.01, 5.0]
NOISY = [9.0, 5.0, 8.0, 3.0, 7.5, 4.0, 8.0, 3.5, 7.0, 4.5, 6.0]


def rule(configured: int = 11, min_steps: int = 3, width: float = 0.05) -> StopRule:
    return StopRule(min_steps, width, warmup_steps=1, configured_steps=configured)


def records(times: list[float]) -> list[dict]:
    return [{"step": step, "timing_s/step": seconds} for step, seconds in enumerate(times, 1)]


def test_a_steady_run_stops_after_its_minimum_of_measured_steps_and_a_noisy_one_never() -> None:
    stop = rule().first_stop(records(STEADY))
    assert stop is not None and stop[0] == 4  # warm-up + 3 measured steps
    # The share it stopped on is what the rule compares with its width: a width exactly equal to it
    # still stops there (within is <=), one a hair narrower no longer does.
    assert 0 < stop[1] <= 0.05
    assert rule(width=stop[1]).first_stop(records(STEADY))[0] == 4
    narrower = rule(width=stop[1] * (1 - 1e-9)).first_stop(records(STEADY))
    assert narrower is None or narrower[0] > 4
    assert rule().first_stop(records(NOISY)) is None
    # More measured steps first, a narrower share required: later, or never.
    assert rule(min_steps=6).first_stop(records(STEADY))[0] == 7
    assert rule(width=1e-6).first_stop(records(STEADY)) is None


def test_the_last_step_is_never_a_stop_and_a_broken_sequence_stops_nothing() -> None:
    assert rule(configured=4).first_stop(records(STEADY[:4])) is None  # step 4 ends the run anyway
    shuffled = records(STEADY)
    shuffled[1], shuffled[2] = shuffled[2], shuffled[1]
    assert rule().first_stop(shuffled) is None
    untimed = records(STEADY)
    untimed[2]["timing_s/step"] = None
    assert rule().first_stop(untimed) is None


def metrics_line(step: int, seconds: float) -> bytes:
    return (json.dumps({"step": step, "data": step_fields(step, seconds)}) + "\n").encode()


def test_the_clock_stops_at_the_step_the_rule_names_and_keeps_the_rest_aside(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    clock = StepClock(metrics, rule())
    lines = [metrics_line(step, seconds) for step, seconds in enumerate(STEADY, 1)]
    metrics.write_bytes(b"".join(lines[:3]))
    clock.poll()
    assert clock.stop is None
    # Steps 4 to 6 arrive in one look, with half of step 7: the stop is after step 4.
    metrics.write_bytes(b"".join(lines[:6]) + lines[6][:20])
    clock.poll()
    assert clock.stop is not None and clock.stop.step == 4
    assert clock.stop.offset == len(b"".join(lines[:4]))
    assert clock.stop.record["measured_steps"] == 3 and clock.stop.record["configured_steps"] == 11
    assert clock.record()["last_step"] == 4  # tear-down is counted from the stop's step
    metrics.write_bytes(b"".join(lines))
    clock.poll()  # what is logged after the stop is not read
    assert clock.record()["last_step"] == 4
    verl_handle = open(metrics, "ab")  # noqa: SIM115 - the logger's file, still open as the run ends
    moved = keep_steps_to_stop(metrics, clock.stop)
    assert metrics.read_bytes() == b"".join(lines[:4])
    assert (tmp_path / AFTER_STOP).read_bytes() == b"".join(lines[4:])
    assert moved == {"bytes_logged_after": len(b"".join(lines[4:])), "steps_logged_after": 7}
    verl_handle.write(b"late\n")  # a logger that outlived the stop writes to the file it had, not the kept one
    verl_handle.close()
    assert metrics.read_bytes() == b"".join(lines[:4])


def test_the_clock_and_the_summarys_recheck_pick_the_same_step_however_the_lines_arrive(tmp_path: Path) -> None:
    rng = random.Random(7)
    stops = set()
    for case in range(40):
        times = [9.0] + [5.0 * (1 + rng.uniform(-0.05, 0.05)) for _ in range(19)]
        lines = [metrics_line(step, seconds) for step, seconds in enumerate(times, 1)]
        content = b"".join(lines)
        metrics = tmp_path / f"metrics-{case}.jsonl"
        clock = StepClock(metrics, rule(configured=20, min_steps=3, width=0.03))
        written = 0
        while written < len(content) and clock.stop is None:
            written = min(len(content), written + rng.randint(1, 400))  # any cut: mid-line too
            metrics.write_bytes(content[:written])
            clock.poll()
        steps, _ = read_metrics_jsonl(metrics)
        expected = rule(configured=20, min_steps=3, width=0.03).first_stop(steps)
        if clock.stop is None:
            assert expected is None
            continue
        keep_steps_to_stop(metrics, clock.stop)
        kept, problems = read_metrics_jsonl(metrics)
        assert problems == [] and [s["step"] for s in kept] == list(range(1, clock.stop.step + 1))
        again = rule(configured=20, min_steps=3, width=0.03).first_stop(kept)
        assert again == (clock.stop.step, clock.stop.record["relative_halfwidth"])
        stops.add(clock.stop.step)
    assert len(stops) > 1, "the cases should stop at different steps"


def _verl_that_ends_at_once(metrics: Path, times: list[float], exit_code: int) -> str:
    """A stand-in for verl that logs all of `times` at once and exits: quicker than the clock's poll.
    One write and an immediate _exit (no interpreter shutdown), run by `exec` from command.sh (no bash
    left to reap it): a poll that fell between the log and the exit would judge a run still going."""
    return (
        "import json, os\n"
        f"lines = [json.dumps({{'step': s, 'data': {{'timing_s/step': t}}}}) for s, t in enumerate({times!r}, 1)]\n"
        "text = ('\\n'.join(lines) + '\\n').encode()\n"
        f"fd = os.open({str(metrics)!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
        "os.write(fd, text)\n"
        f"os._exit({exit_code})\n"
    )


def test_verl_ending_on_its_own_as_the_rule_holds_is_judged_as_it_ended(tmp_path: Path) -> None:
    # All 11 steps logged at once, and verl already gone, exit 0: no stop, every step read and stamped.
    metrics = tmp_path / "metrics.jsonl"
    clock = StepClock(metrics, rule())
    process = subprocess.Popen([sys.executable, "-c", _verl_that_ends_at_once(metrics, STEADY, 0)])
    process.wait()
    assert wait_watching(process, 30, clock) == 0
    assert clock.stop is None and clock.record()["last_step"] == 11
    # Through the launcher's execute: a run that succeeded with all its steps.
    metrics.unlink()
    command = tmp_path / "command.sh"
    command.write_text(f"exec {sys.executable} -c {shlex.quote(_verl_that_ends_at_once(metrics, STEADY, 0))}\n")
    token = new_token()
    clock = StepClock(metrics, rule())
    code, status = execute(command, tmp_path / "console.log", {**os.environ, TOKEN_VAR: token}, token, 60, clock=clock)
    assert (code, status) == (0, "succeeded") and clock.stop is None and clock.record()["last_step"] == 11


class _EndsUnseen:
    """A test double for verl's Popen: still running when the launcher's wait gives up, ended (exit 0)
    by the time the clock has read its steps; the real process cannot be made to hit that instant."""

    args = "verl"

    def wait(self, timeout: float | None = None) -> int:
        raise subprocess.TimeoutExpired(self.args, timeout or 0)

    def poll(self) -> int:
        return 0


def test_verl_ending_between_the_wait_and_the_look_is_judged_as_it_ended(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_bytes(b"".join(metrics_line(step, seconds) for step, seconds in enumerate(STEADY, 1)))
    clock = StepClock(metrics, rule())
    assert wait_watching(_EndsUnseen(), 30, clock) == 0  # type: ignore[arg-type]  # a Popen stand-in
    assert clock.stop is None and clock.record()["last_step"] == 11


def test_verl_failing_after_the_step_where_the_rule_held_stopped_there(tmp_path: Path) -> None:
    # Steps 1..6 logged, then a crash, all before the clock's first look: the rule held after step 4,
    # so the run stopped there (a look a second earlier would have ended it); steps 5 and 6 are not
    # its measurement, and the crash after them does not make it a failed run.
    metrics = tmp_path / "metrics.jsonl"
    command = tmp_path / "command.sh"
    command.write_text(f"exec {sys.executable} -c {shlex.quote(_verl_that_ends_at_once(metrics, STEADY[:6], 3))}\n")
    token = new_token()
    clock = StepClock(metrics, rule())
    code, status = execute(command, tmp_path / "console.log", {**os.environ, TOKEN_VAR: token}, token, 60, clock=clock)
    assert (code, status) == (3, "stopped early")
    assert clock.stop is not None and clock.stop.step == 4 and clock.record()["last_step"] == 4
    assert keep_steps_to_stop(metrics, clock.stop)["steps_logged_after"] == 2


def test_without_the_rule_the_clock_never_stops(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_bytes(b"".join(metrics_line(step, seconds) for step, seconds in enumerate(STEADY, 1)))
    clock = StepClock(metrics)
    clock.poll()
    assert clock.stop is None and clock.record()["last_step"] == 11


def test_a_stop_ends_every_process_of_the_run_and_says_so(tmp_path: Path) -> None:
    # A stand-in for verl (this is the launcher's part; the real trainer stopping early: the own study's
    # end-to-end test): it logs a steady step every 0.3 s for a minute, and leaves a child behind.
    metrics = tmp_path / "metrics.jsonl"
    writer = (
        "import json, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "for step in range(1, 200):\n"
        "    line = json.dumps({'step': step, 'data': {'timing_s/step': 5.0}})\n"
        f"    open({str(metrics)!r}, 'a').write(line + '\\n')\n"
        "    time.sleep(0.3)\n"
    )
    (tmp_path / "verl.py").write_text(writer)
    command = tmp_path / "command.sh"
    command.write_text(f"{sys.executable} {tmp_path / 'verl.py'}\n")
    token = new_token()
    began = time.monotonic()
    # What the launcher records of the stop (job.json) is written while the run's processes still run:
    # a launcher killed as it ends them leaves why they were ended.
    recorded: list[tuple[int, int]] = []
    clock = StepClock(
        metrics,
        rule(configured=200),
        on_stop=lambda stop: recorded.append((stop.step, len(processes_with_token(token)))),
    )
    code, status = execute(command, tmp_path / "console.log", {**os.environ, TOKEN_VAR: token}, token, 120, clock=clock)
    assert status == "stopped early" and code != 0
    assert time.monotonic() - began < 60, "the run was not stopped"
    assert clock.stop is not None and clock.stop.step == 4
    assert len(recorded) == 1 and recorded[0][0] == 4 and recorded[0][1] >= 2, recorded
    assert processes_with_token(token) == []


def write_run(root: Path, run: Run, study, times: list[float], stop: dict | None) -> Path:
    """A run directory as launch leaves it: spec, job (with its stop, if any) and the steps kept."""
    run_dir = paths.run_dir(root, run.run_id)
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps(spec_document(study, run), default=str))
    lines = []
    trajectories = run.trajectories
    for step, seconds in enumerate(times, 1):
        fields = step_fields(step, seconds, tokens=trajectories * 120)
        fields.update({"prompt_length/mean": 20.0, "response_length/mean": 100.0, "response_length/max": 16})
        fields["perf/throughput"] = fields["perf/total_num_tokens"] / seconds / run.nodes
        lines.append(json.dumps({"step": step, "data": fields}))
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    job = {
        "run_id": run.run_id,
        "start": "2026-12-01T10:00:00+00:00",
        "end": "2026-12-01T10:02:00+00:00",
        "status": "succeeded",
        "exit_status": 0,
        "step_clock": {
            "first_step": 1,
            "first_step_logged": "2026-12-01T10:00:40+00:00",
            "last_step": len(times),
            "last_step_logged": "2026-12-01T10:01:50+00:00",
        },
        **({"adaptive_stop": stop} if stop else {}),
    }
    (run_dir / "job.json").write_text(json.dumps(job))
    return run_dir


def local_run(sets: list[str]) -> tuple[object, Run]:
    study = load_study(site="local", sets=sets)
    run = next(r for r in known_runs(build_plan(study, root=Path("/study"))) if r.nodes == 1)
    return study, run


def test_a_run_stopped_where_its_rule_holds_is_a_measurement_and_proves_its_stop(tmp_path: Path) -> None:
    study, run = local_run(ON)
    assert run.adaptive_steps == {"min_measured_steps": 3, "relative_halfwidth": 0.05}
    stop = StopRule.of_run(run.to_dict())
    found = stop.first_stop(records(STEADY))
    record = {"step": 4, "configured_steps": run.steps, "measured_steps": 3, "mean_step_s": 5.0,
              "relative_halfwidth": found[1], "rule": run.adaptive_steps}  # fmt: skip
    summary = summarize_run(write_run(tmp_path, run, study, STEADY[:4], record))
    assert summary.valid, [c for c in summary.checks if not c.passed]
    check = next(c for c in summary.checks if c.name == "adaptive_steps")
    assert "stopped after step 4 of 11" in check.detail
    assert summary.adaptive_stop == record and summary.measured.steps_used == 3
    assert summary.to_json()["adaptive_stop"] == record

    # Stopped one step before its rule held: its interval is wider than the rule promised.
    early = summarize_run(write_run(tmp_path / "early", run, study, STEADY[:3], {**record, "step": 3}))
    failed = {c.name: c.detail for c in early.checks if not c.passed}
    assert not early.valid and "over the steps kept the rule never holds" in failed["adaptive_steps"]
    # Steps missing before the stop are missing, as for any run.
    gap = summarize_run(write_run(tmp_path / "gap", run, study, STEADY[:2], record))
    assert "missing 3, 4" in {c.name: c.detail for c in gap.checks}["measurement"]
    # A record whose figures are not the rule's, or that names no step: a failed check, never a traceback.
    wider = summarize_run(write_run(tmp_path / "wider", run, study, STEADY[:4], {**record, "relative_halfwidth": 0.01}))
    assert "differs from the rule's" in {c.name: c.detail for c in wider.checks}["adaptive_steps"]
    broken = summarize_run(write_run(tmp_path / "broken", run, study, STEADY, {"step": "four"}))
    assert not broken.valid and "names no step" in {c.name: c.detail for c in broken.checks}["adaptive_steps"]
    # Stopped later than the rule first held: steps the rule did not need (so not what it promised).
    late = stop.first_stop(records(STEADY[:6]))  # the rule first holds after step 4, whatever follows
    assert late[0] == 4
    later = summarize_run(write_run(tmp_path / "later", run, study, STEADY[:6], {**record, "step": 6}))
    assert (
        "stopped after step 6, but over the steps kept the rule holds first after step 4"
        in ({c.name: c.detail for c in later.checks}["adaptive_steps"])
    )
    # A record naming another rule than the run's spec, or another mean: not this run's stop.
    for changed in ({"rule": {"min_measured_steps": 3, "relative_halfwidth": 0.5}}, {"mean_step_s": 5.5}):
        other = summarize_run(write_run(tmp_path / f"other-{len(changed)}-{next(iter(changed))}", run, study,
                                        STEADY[:4], {**record, **changed}))  # fmt: skip
        assert (
            not other.valid and "differs from the rule's" in {c.name: c.detail for c in other.checks}["adaptive_steps"]
        )


def test_a_stop_recorded_for_a_run_without_the_rule_makes_it_invalid(tmp_path: Path) -> None:
    study, run = local_run([])
    summary = summarize_run(write_run(tmp_path, run, study, STEADY[:4], {"step": 4, "configured_steps": 11}))
    checks = {c.name: c for c in summary.checks}
    assert not summary.valid and "the run has no adaptive_steps rule" in checks["adaptive_steps"].detail


def test_with_the_count_on_the_warm_up_is_part_of_what_a_run_is() -> None:
    def ids(sets: list[str]) -> list[str]:
        return [r.run_id for r in known_runs(build_plan(load_study(site="local", sets=sets), root=Path("/s")))]

    # Off, the warm-up is the analysis's choice; on, the rule counts measured steps after it.
    assert ids(["algorithm.warmup_steps=2"]) == ids([])
    assert not set(ids([*ON, "algorithm.warmup_steps=2"])) & set(ids(ON))


def test_a_run_without_the_rule_is_checked_as_before(tmp_path: Path) -> None:
    study, run = local_run([])
    assert run.adaptive_steps is None
    summary = summarize_run(write_run(tmp_path, run, study, STEADY, None))
    assert summary.valid and "adaptive_steps" not in {c.name for c in summary.checks}
    assert "adaptive_stop" not in summary.to_json()  # a run's summary is as it was before the setting


def test_off_the_setting_changes_no_run_id_and_on_it_does() -> None:
    ids = [r.run_id for r in known_runs(build_plan(load_study(site="local"), root=Path("/s")))]
    off = ["adaptive_steps.enabled=false", "adaptive_steps.min_measured_steps=4"]
    assert [r.run_id for r in known_runs(build_plan(load_study(site="local", sets=off), root=Path("/s")))] == ids
    on = [r.run_id for r in known_runs(build_plan(load_study(site="local", sets=ON), root=Path("/s")))]
    assert not set(on) & set(ids)


@pytest.mark.parametrize(
    ("sets", "key", "expected"),
    [
        (["adaptive_steps.min_measured_steps=10"], "adaptive_steps.min_measured_steps", "could stop no earlier"),
        (["adaptive_steps.min_measured_steps=2"], "adaptive_steps.min_measured_steps", "less than the minimum of 3"),
        (["adaptive_steps.relative_halfwidth=0"], "adaptive_steps.relative_halfwidth", "less than or equal to"),
        (["adaptive_steps.enabled=maybe"], "adaptive_steps.enabled", "not of type 'boolean'"),
    ],
)
def test_a_bad_setting_is_named_before_anything_runs(sets: list[str], key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_study(site="local", sets=["adaptive_steps.enabled=true", *sets])
    assert key in str(error.value) and expected in str(error.value)


def test_the_report_prices_the_steps_not_run(tmp_path: Path) -> None:
    study, run = local_run(ON)
    width = rule().first_stop(records(STEADY))[1]
    record = stop_record(rule(), 4, STEADY[1:4], width)
    # One step was logged after the stop, before verl was ended: paid for, so not a saving.
    stopped = summarize_run(write_run(tmp_path, run, study, STEADY[:4], {**record, "steps_logged_after": 1}))
    assert stopped.valid
    full = summarize_run(write_run(tmp_path / "full", run, study, STEADY, None))
    full.run_id = "other"
    # A run made without the rule (brought in from elsewhere, say): paid for, but not one it could stop.
    off_study, off_run = local_run([])
    without = summarize_run(write_run(tmp_path / "without", off_run, off_study, STEADY, None))
    results = StudyResults([], {stopped.run_id: stopped, "other": full, without.run_id: without})
    # 11 - 4 - 1 = 6 steps not run x the mean measured step time (5.0 s over steps 2-4) x 1 node
    expected = 6 * (5.0 + 5.01 + 4.99) / 3 / 3600
    assert steps_not_run_node_hours(stopped) == pytest.approx(expected)
    lines = adaptive_findings(results, study.config.adaptive_steps.rule())
    # Each run's job record spans two minutes on one node; the run made without the rule is not counted.
    wall = 2 * 120 / 3600
    assert lines[0].startswith("The adaptive step count (stop once the 95% interval of the mean step time is within")
    assert "stopped 1 of 2 runs made with it early, after 4 of their 11 steps" in lines[0]
    assert f"about {expected:.3g} node-hours" in lines[0]
    assert f"{expected / (wall + expected):.0%} of the {wall + expected:.3g} node-hours" in lines[0]
    assert lines[1].startswith(f"gsm8k, 1 node, 2 prompts per node: stopped after step 4 of 11 (+-{width:.1%})")
    assert adaptive_findings(StudyResults([], {"other": full}), None) == []
    on_but_unused = adaptive_findings(
        StudyResults([], {"other": full}), {"min_measured_steps": 3, "relative_halfwidth": 0.05}
    )
    assert on_but_unused[0].endswith("no run stopped early: every run took all its steps.")


def test_the_plan_says_its_costs_are_upper_bounds_when_the_count_is_on(tmp_path: Path) -> None:
    sets = [word for setting in ON for word in ("--set", setting)]
    result = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling", "plan", *sets, "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=paths.REPO_ROOT,
    )
    assert "The adaptive step count is on (adaptive_steps): a run may stop before its 11 steps" in result.stdout


ADAPTIVE = (
    "  adaptive_steps.enabled: true\n  adaptive_steps.min_measured_steps: 3\n  adaptive_steps.relative_halfwidth: 0.9\n"
)


def check_stopped_runs(results: Path, run_dirs: list[Path], steps: int) -> None:
    for run_dir in run_dirs:
        job = json.loads((run_dir / "job.json").read_text())
        stop = job["adaptive_stop"]
        assert job["status"] == "succeeded" and 4 <= stop["step"] < steps, stop
        logged = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        assert logged == list(range(1, stop["step"] + 1))
        after = run_dir / AFTER_STOP
        if after.exists():  # verl logged a step between the stop and its end: kept, not measured
            assert json.loads(after.read_text().splitlines()[0])["step"] == stop["step"] + 1
        summary = json.loads((results / "summaries" / f"{run_dir.name}.json").read_text())
        checks = {c["name"]: c for c in summary["checks"]}
        assert summary["valid"] and checks["adaptive_steps"]["passed"], checks
        assert f"stopped after step {stop['step']} of {steps}" in checks["adaptive_steps"]["detail"]


def _verified(results: Path, runs: int) -> None:
    (bundle,) = (results / "bundle").glob("*/*.tar.gz")
    verified = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling", "verify", str(bundle)], capture_output=True, text=True
    )
    assert verified.returncode == 0 and f"{runs} summaries" in verified.stdout, verified.stdout + verified.stderr


@pytest.mark.verl  # the workflow's preflight composes verl's configuration
@pytest.mark.standin
def test_another_rule_is_another_study_and_its_sweep_starts_again(workdir: Path, tmp_path: Path) -> None:
    # Snakemake's and the selection's part, not verl's: the stand-in trainer (tests/standin_trainer.py;
    # its steady step times meet the loose rule after its minimum of steps), so a study of four runs
    # takes about a minute.
    study = tmp_path / "adaptive.yaml"
    study.write_text(
        "only_datasets: [gsm8k]\noverrides:\n  datasets.gsm8k.sweep: [2, 4]\n  algorithm.steps: 40\n"
        "  scaling.weak_nodes: [1]\n  scaling.strong_nodes: [1]\n  scaling.strong_reference_nodes: 1\n" + ADAPTIVE
    )
    snakemake(workdir, "--cores", "2", "--configfile", str(study), env=STANDIN)
    results = workdir / "results"
    run_dirs = sorted((results / "runs").iterdir())
    assert len(run_dirs) == 2
    check_stopped_runs(results, run_dirs, 40)
    report = (results / "report" / "study.md").read_text()
    assert "stopped 2 of 2 runs made with it early" in report
    _verified(results, 2)
    again = snakemake(workdir, "-n", "--cores", "2", "--configfile", str(study)).stdout
    assert "rule run:" not in again
    # Another rule is another study: every run id changes, the preflight's settings do not. The sweep
    # starts again at its first point though the old selection, index, report and bundle stand
    # (rules/common.smk: first_sweep_summaries), and the study made again holds only the new runs: the
    # selection and the index are the new sweep's, not the old ones on disk.
    study.write_text(study.read_text().replace("relative_halfwidth: 0.9", "relative_halfwidth: 0.8"))
    changed = snakemake(workdir, "-n", "--cores", "2", "--configfile", str(study)).stdout
    assert "checkpoint sweep_step:" in changed and "checkpoint selection:" in changed, changed
    planned = re.findall(r"output: results/runs/(\S+)", changed)
    assert len(planned) == 1 and planned[0].startswith("gsm8k-n1-p2-"), planned  # the new sweep's first point
    old_runs = {d.name for d in run_dirs}
    assert planned[0] not in old_runs
    snakemake(workdir, "--cores", "2", "--configfile", str(study), env=STANDIN)
    new_runs = {d.name for d in (results / "runs").iterdir()} - old_runs
    assert len(new_runs) == 2 and planned[0] in new_runs
    assert json.loads((results / "selection" / "gsm8k.json").read_text())["selected"]["run_id"] in new_runs
    index = json.loads((results / "index" / "gsm8k.json").read_text())
    assert {entry["run_id"] for entry in index["runs"]} == new_runs
    assert "Nothing to be done" in snakemake(workdir, "-n", "--cores", "2", "--configfile", str(study)).stdout
    assert_no_run_processes()
