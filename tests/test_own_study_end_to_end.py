"""docs/own-study.md followed to its end with the real verl trainer on CPU (#43): a dataset of one's
own from a local JSONL file in a shape unlike the built-ins (the question in a nested field, the answer
after a marker), scored by one's own reward file, through the sweep, the selection, a scaling run,
the tables and a bundle that verifies. Two trainer starts: the sweep's one point (also the 1-node weak
run) and the 2-node run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import PYTHON, REPO
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
    max_prompt_length: 96
    max_response_length: 16
    memory: {{recompute: false, offload: false, token_budget: 2048}}
    sweep: [2]
    estimate: {{seconds_per_trajectory: 0.1}}
# The local site's study_overrides set the series and the step count: these win over them.
overrides:
  algorithm.steps: 5
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
    runs = sorted(p.name for p in (results / "runs").iterdir())
    assert len(runs) == 2 and {r.split("-")[1] for r in runs} == {"n1", "n2"}, runs
    for name in runs:
        steps = [json.loads(line)["data"] for line in (results / "runs" / name / "metrics.jsonl").open()]
        assert len(steps) == 5
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
