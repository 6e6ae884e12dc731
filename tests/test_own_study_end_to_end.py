"""docs/own-study.md followed to its end with the real verl trainer on CPU (#43): a dataset of one's
own from a local JSONL file in a shape unlike the built-ins (the question in a nested field, the answer
after a marker), scored by one's own reward file, through the sweep, the selection, a scaling run,
the tables and a bundle that verifies. Two trainer starts: the sweep's one point (also the 1-node weak
run) and the 2-node run. The adaptive step count is on, so the same two runs prove it on the real
trainer's step times (a stop the launcher makes, the steps kept up to it, the report's saving and the
bundle's verification of the stop): with its stand-in, tests/test_adaptive_steps.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import PYTHON, REPO
from .test_adaptive_steps import check_stopped_runs
from .workflow_helpers import assert_no_run_processes, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("local-engine")]

# A reward no scorer of verl's gives: every response scores 0.25, so the runs' mean score shows that
# verl called this function, not a built-in one.
REWARD = """
def constant_quarter(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return 0.25
"""

STUDY = """
site: local
study:
  name: own-local
  reference: null
datasets:
  my_problems:
    source: {data}
    held_out: 2
    question: item.text
    answer: target
    ground_truth: {{rule: after_marker, marker: "The answer is:"}}
    prompt: "Solve: {{question}}\\nEnd with 'The answer is: <number>'."
    ability: arithmetic
    reward: {{file: {reward}, function: constant_quarter}}
    self_check: {{full_score: 0.25}}   # the data stage's self-check: this reward's full score
    max_prompt_length: 96
    max_response_length: 16
    memory: {{recompute: false, offload: false, token_budget: 2048}}
    sweep: [2]
    estimate: {{seconds_per_trajectory: 0.1}}
# The local site's study_overrides set the series and the step count: these win over them. Up to 40
# steps, with a rule loose enough for CPU step times to meet it early.
overrides:
  algorithm.steps: 40
  adaptive_steps.enabled: true
  adaptive_steps.min_measured_steps: 3
  adaptive_steps.relative_halfwidth: 0.9
  scaling.weak_nodes: [1, 2]
  scaling.strong_nodes: [2]
  scaling.strong_reference_nodes: 2
  selection_rule.sweep_order: grid
"""


def test_a_local_file_dataset_with_its_own_reward_through_to_a_verified_bundle(workdir: Path, tmp_path: Path) -> None:
    reward = tmp_path / "my_reward.py"
    reward.write_text(REWARD)
    study = tmp_path / "study.yaml"
    data = REPO / "config" / "examples" / "data" / "problems.jsonl"
    study.write_text(STUDY.format(data=data, reward=reward))
    snakemake(workdir, "--cores", "2", "--configfile", str(study))
    results = workdir / "results"
    run_dirs = sorted((results / "runs").iterdir())
    assert len(run_dirs) == 2 and {r.name.split("-")[1] for r in run_dirs} == {"n1", "n2"}, run_dirs
    # Each stopped where its rule held, after at least its minimum of measured steps, before 40.
    check_stopped_runs(results, run_dirs, 40)
    report = (results / "report" / "study.md").read_text()
    assert "## Adaptive step count" in report and "stopped 2 of 2 runs made with it early" in report
    for run_dir in run_dirs:
        assert json.loads((run_dir / "job.json").read_text())["trainer"] == "verl.trainer.main_ppo"
        steps = [json.loads(line)["data"] for line in (run_dir / "metrics.jsonl").open()]
        # verl scored every response with this study's own function.
        assert all(step["critic/score/mean"] == pytest.approx(0.25) for step in steps), [
            s.get("critic/score/mean") for s in steps
        ]
    selection = json.loads((results / "selection" / "my_problems.json").read_text())
    assert selection["selected"]["prompts"] == 2
    weak = (results / "tables" / "weak_scaling.csv").read_text()
    assert all(f"my_problems,{nodes}," in weak for nodes in (1, 2)), weak
    [bundle] = (results / "bundle").glob("*/*.tar.gz")
    verified = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "verify", str(bundle)], capture_output=True, text=True, cwd=workdir
    )
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    # The reward file the runs used travels with the bundle, byte for byte.
    listing = subprocess.run(["tar", "tzf", str(bundle)], capture_output=True, text=True, check=True).stdout
    copies = [name for name in listing.splitlines() if name.endswith("reward.py")]
    assert copies, listing
    top = bundle.name.removesuffix(".tar.gz")
    inside = subprocess.run(["tar", "xzOf", str(bundle), copies[0]], capture_output=True, check=True).stdout
    assert inside == reward.read_bytes() and copies[0].startswith(top)
    assert_no_run_processes()


def test_the_shipped_example_tried_here_first_runs_to_a_run_summary(workdir: Path) -> None:
    """docs/own-study.md, "Try it here first": the example study on the local site, its own dataset
    (a local file, the number rule, its own reward) kept, shrunk by the site's toy_scale, to one run's
    summary through the real verl trainer. Its hub dataset is left out (only_datasets): nothing is
    downloaded at test time."""
    example = REPO / "config" / "examples" / "own-study.yaml"
    config = ["site=local", "only_datasets=[my_problems]"]
    planned = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--json", "--config", str(example)]
        + [arg for c in config for arg in ("--set", c)],
        capture_output=True,
        text=True,
        cwd=workdir,
        check=True,
    )
    first = json.loads(planned.stdout)[0]
    # The site's rule: a one-node sweep of 1 and 2 prompts, responses of at most 32 tokens.
    assert (first["dataset"], first["nodes"], first["prompts"], first["max_response_length"]) == (
        "my_problems",
        1,
        1,
        32,
    )
    target = f"results/summaries/{first['run_id']}.json"
    snakemake(workdir, "--cores", "2", "--configfile", str(example), "--config", *config, "--", target)
    summary = json.loads((workdir / target).read_text())
    assert (summary["run_id"], summary["status"], len(summary["steps"])) == (first["run_id"], "succeeded", 11)
    manifest = json.loads((workdir / "results/data/local/my_problems/manifest.json").read_text())
    check = manifest["self_check"]
    assert (check["passing"], check["rows"]) == (400, 400) and check["scorer"].endswith("number_match.py:compute_score")
    assert_no_run_processes()
