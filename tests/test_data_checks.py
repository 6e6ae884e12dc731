"""What a researcher learns about their data before spending (#54): the number answer rule, the reward's
self-check over every prepared row (and what the data stage does below its threshold), the data
preview's prompt as the model receives it, and a step never larger than the data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rlvr_scaling.errors import StudyError
from rlvr_scaling.inputs import input_lock
from rlvr_scaling.inputs.data import prepare_dataset
from rlvr_scaling.inputs.model import CHAT_TEMPLATE
from rlvr_scaling.inputs.preview import render_prompt
from rlvr_scaling.inputs.rows import number_in
from rlvr_scaling.inputs.step_size import check_step_sizes
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan

from .conftest import PYTHON, REPO

EXAMPLE = REPO / "config" / "examples" / "own-study.yaml"
EXAMPLE_REWARD = REPO / "config" / "examples" / "rewards" / "number_match.py"


@pytest.fixture(autouse=True)
def lock_file(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "lock" / "inputs.lock.json"
    monkeypatch.setenv(input_lock.LOCK_FILE_VAR, str(path))
    return path


@pytest.mark.parametrize(
    ("answer", "marker", "expected"),
    [
        ("The answer is 1,250.", None, "1250"),  # separators and the sentence's period go
        ("1250", None, "1250"),
        ("so it is -7.", None, "-7"),
        ("3.50", None, "3.5"),  # one written form: 3.50 and 3.5 are one number
        ("+0.0", None, "0"),  # no sign on zero, no trailing zeros
        ("-.5 of it", None, "-0.5"),
        ("12 apples and 30 pears", None, "30"),  # without a marker: the last number
        ("The answer is: 12 apples, not 30", "The answer is:", "12"),  # after the marker: the first
        ("2 + 2 = 4. The answer is: 4. The answer is: 1,000,000.", "The answer is:", "1000000"),  # the last marker
        ("12,34", None, "34"),  # a comma before other than three digits separates two numbers
        # A fraction is one number, as written (not reduced), the sign in front; before #61 "5/3" was "3".
        ("so x = 5/3.", None, "5/3"),
        ("Final answer: -1 / 12", "Final answer:", "-1/12"),
        ("it is 10/-16", None, "-10/16"),
        ("so \\boxed{\\frac{5}{8}}", None, "5/8"),
        ("-\\dfrac{1}{3}", None, "-1/3"),
        ("3/4.5", None, "4.5"),  # a decimal after the slash: two numbers, not a fraction
    ],
)
def test_the_number_rule_writes_one_form_of_the_number(answer: str, marker: str | None, expected: str) -> None:
    assert number_in(answer, marker) == expected


@pytest.mark.parametrize(
    ("answer", "marker", "why"),
    [
        ("no digits here", None, "has no number"),
        ("42 The end", "The answer is:", "has no 'The answer is:'"),
        ("so it is 3/0", None, "'3/0' divides by zero"),
    ],
)
def test_the_number_rule_says_why_it_finds_none(answer: str, marker: str | None, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        number_in(answer, marker)


def _study(tmp_path: Path, reward: str, dataset: dict | None = None, rows: list[dict] | None = None):
    """The shipped example's own dataset from a file of `rows`, scored by the function in `reward`."""
    data = tmp_path / "problems.jsonl"
    rows = rows or [
        {"item": {"text": f"What is {n} times 125?"}, "target": f"{n} x 125 = {n * 125:,}. The answer is: {n * 125:,}."}
        for n in range(1, 21)
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "reward.py").write_text(reward)
    study = yaml.safe_load(EXAMPLE.read_text())
    entry = study["datasets"]["my_problems"]
    entry.update(source=str(data), reward={"file": str(tmp_path / "reward.py"), "function": "compute_score"})
    entry.update(dataset or {})
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return load_study(path, site="lumi", sets=["slurm_account=p"])


# The reward: the first number after the marker against the ground truth as written.
STRICT = """
import re
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    tail = solution_str.rsplit("The answer is:", 1)[-1]
    numbers = re.findall(r"-?[0-9][0-9,]*", tail)
    return 1.0 if numbers and numbers[0].replace(",", "") == ground_truth else 0.0
"""


def test_ground_truths_that_kept_a_period_fail_the_data_stage_in_one_line_and_write_nothing(tmp_path: Path) -> None:
    after_marker = {"ground_truth": {"rule": "after_marker", "marker": "The answer is:", "remove": [","]}}
    study = _study(tmp_path, STRICT, after_marker)
    output = tmp_path / "out"
    with pytest.raises(StudyError) as refused:
        prepare_dataset(study, "my_problems", output)
    message = str(refused.value)
    assert "\n" not in message and not output.exists()
    # 20 rows, 2 of them held out: none passes, and the first failing row is named with its ground truth.
    assert "the reward gives 0 of 20 rows' own reference solutions the full score 1 (0.0%" in message
    assert "below datasets.my_problems.self_check.min_share = 0.9" in message
    # Row n's answer is n x 125; the rule kept the sentence's period: '125.' for n = 1, '250.' for n = 2.
    row = int(message.split("e.g. train row ")[1].split(":")[0])
    named = json.loads((tmp_path / "problems.jsonl").read_text().splitlines()[row])["item"]["text"]
    n = int(named.split()[2])
    assert f"train row {row}: ground truth '{n * 125:,}.'".replace(",", "") in message
    assert "rlvr-scaling data-preview --dataset my_problems" in message


def test_the_number_rule_makes_the_same_rows_pass_and_the_record_says_so(tmp_path: Path, capsys) -> None:
    study = _study(tmp_path, STRICT)  # the example's rule: {rule: number, marker: "The answer is:"}
    manifest = prepare_dataset(study, "my_problems", tmp_path / "out")
    check = manifest["self_check"]
    assert (check["ran"], check["rows"], check["passing"], check["share"]) == (True, 20, 20, 1.0)
    assert check["scorer"].endswith("reward.py:compute_score") and check["warnings"] == []


def test_a_share_exactly_at_the_threshold_passes_and_one_row_less_fails(tmp_path: Path) -> None:
    # Rows 1..10: the reward rejects the ground truths divisible by 5 (2 of 10 rows: 80%).
    reward = STRICT.replace("return 1.0 if", "return 0.0 if int(ground_truth) % 625 == 0 else 1.0 if")
    at = _study(tmp_path, reward, {"self_check": {"min_share": 0.8}}, _rows(10))
    assert prepare_dataset(at, "my_problems", tmp_path / "at")["self_check"]["passing"] == 8
    above = _study(tmp_path, reward, {"self_check": {"min_share": 0.81}}, _rows(10))
    with pytest.raises(StudyError, match=r"gives 8 of 10 rows.*\(80\.0%.*min_share = 0\.81; e\.g\. train row \d+"):
        prepare_dataset(above, "my_problems", tmp_path / "above")


def _rows(count: int) -> list[dict]:
    return [
        {"item": {"text": f"What is {n} times 125?"}, "target": f"The answer is: {n * 125}"}
        for n in range(1, count + 1)
    ]


def test_ground_truths_with_punctuation_or_spaces_are_warned_about_by_name(tmp_path: Path) -> None:
    rows = [{"item": {"text": f"q{n}"}, "target": f"The answer is: {n} apples."} for n in range(1, 11)]
    whole = {"ground_truth": {"rule": "after_marker", "marker": "The answer is:"}, "self_check": {"min_share": 0}}
    manifest = prepare_dataset(_study(tmp_path, STRICT, whole, rows), "my_problems", tmp_path / "out")
    warnings = manifest["self_check"]["warnings"]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("datasets.my_problems: 10 of 10 ground truths end in punctuation (.,;:!?)")
    assert warnings[1].startswith("datasets.my_problems: 10 of 10 ground truths hold spaces")
    assert "apples." in warnings[0]


def test_a_reward_that_raises_on_its_own_reference_is_named(tmp_path: Path) -> None:
    raising = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    raise KeyError('x')\n"
    with pytest.raises(StudyError, match=r"gives 0 of 20 .*KeyError: 'x'"):
        prepare_dataset(_study(tmp_path, raising), "my_problems", tmp_path / "out")


def test_a_reward_scaled_otherwise_sets_its_full_score(tmp_path: Path) -> None:
    quarter = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.25\n"
    study = _study(tmp_path, quarter, {"self_check": {"full_score": 0.25}})
    assert prepare_dataset(study, "my_problems", tmp_path / "out")["self_check"]["share"] == 1.0


@pytest.mark.verl
def test_verls_built_in_scorers_pass_the_default_studys_rows_and_dapo_needs_its_answer_shape(tmp_path: Path) -> None:
    """The local site's GSM8K and DAPO rows, through verl's own default_compute_score (production's
    scorer): 100%. DAPO's answer field is the bare answer, which math_dapo scores -1 without the
    'Answer:' line its prompt asks for: config/config.yaml's self_check.solution gives that shape."""
    study = load_study(site="local")
    for name in ("gsm8k", "dapo_math"):
        check = prepare_dataset(study, name, tmp_path / name)["self_check"]
        assert (check["passing"], check["rows"]) == (544, 544), check
    bare = load_study(site="local", sets=['datasets.dapo_math.self_check.solution="{answer}"'])
    with pytest.raises(StudyError, match=r"gives 0 of 544 .*scored -1\.0"):
        prepare_dataset(bare, "dapo_math", tmp_path / "bare")


def test_without_verl_the_built_in_scorer_is_said_not_to_run_here(tmp_path: Path, monkeypatch) -> None:
    # A cluster's workflow environment has no verl (envs/workflow.txt): the check says so and passes.
    monkeypatch.setitem(sys.modules, "verl.utils.reward_score", None)
    manifest = prepare_dataset(load_study(site="local"), "gsm8k", tmp_path / "out")
    assert manifest["self_check"]["ran"] is False
    assert "verl's scorer for data_source 'openai/gsm8k' is not importable here" in manifest["self_check"]["why"]


@pytest.mark.verl
def test_the_preview_renders_the_prompt_as_the_tokenizer_does() -> None:
    """verl renders a row's chat with the tokenizer's apply_chat_template: the preview's sandboxed
    Jinja (the workflow environment has no transformers) must give the same text."""
    from rlvr_scaling.inputs.model import build_tokenizer

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + {2}?\nSay it."}]
    expected = build_tokenizer(0).apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert render_prompt(messages, CHAT_TEMPLATE, {}) == expected
    assert expected.endswith("<|im_start|>assistant\n")


def test_data_preview_shows_the_examples_rows_as_the_model_receives_them() -> None:
    done = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "data-preview", "--config", str(EXAMPLE), "--site", "local"]
        + ["--dataset", "my_problems", "--rows", "1"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Chat template: the tiny model's (inputs/model.py)"
    first = json.loads((REPO / "config/examples/data/problems.jsonl").read_text().splitlines()[0])
    question = first["item"]["text"]
    assert f"    Solve: {question}" in lines and "    <|im_start|>assistant" in lines
    a, b = (int(word.rstrip("?")) for word in question.split() if word.rstrip("?").isdigit())
    assert f"   ground truth: '{a * b}'" in lines
    assert any(line.endswith("-> reward 1 (full: 1)") for line in lines)
    assert "self-check: datasets.my_problems: the reward gives 400 of 400 rows' own reference solutions" in done.stdout


def _plan_of(tmp_path: Path, sets: list[str]):
    study = load_study(EXAMPLE, sets=["slurm_account=p", *sets])
    return study, build_plan(study, root=tmp_path)


def test_a_step_exactly_as_large_as_the_training_rows_is_planned_and_one_more_is_refused(tmp_path: Path) -> None:
    # The example's file: 400 rows, 2 held out: 398 training rows.
    one_node = ["scaling.weak_nodes=[1]", "scaling.strong_nodes=[1]", "scaling.strong_reference_nodes=1"]
    study, plan = _plan_of(tmp_path, ["datasets.my_problems.sweep=[398]", *one_node])
    check_step_sizes(study, plan, tmp_path)
    study, plan = _plan_of(tmp_path, ["datasets.my_problems.sweep=[399]", *one_node])
    with pytest.raises(StudyError) as refused:
        check_step_sizes(study, plan, tmp_path)
    assert str(refused.value).startswith("run my_problems-n1-p399-")
    assert "takes 399 prompts per step but datasets.my_problems has 398 training rows" in str(refused.value)
    assert str(refused.value).endswith("What fits: datasets.my_problems.sweep values of at most 398")


def test_a_pinned_workload_over_the_data_names_what_would_fit(tmp_path: Path) -> None:
    # 32 prompts per node: 4 nodes take 128 of 398; 16 nodes would take 512.
    pinned = ['selection={"my_problems": 32, "math": 32}', "scaling.weak_nodes=[1,4,16]", "scaling.strong_nodes=[1]"]
    study, plan = _plan_of(tmp_path, [*pinned, "scaling.strong_reference_nodes=1"])
    with pytest.raises(StudyError) as refused:
        check_step_sizes(study, plan, tmp_path)
    message = str(refused.value)
    assert "(weak, 16 node(s)) takes 512 prompts per step but datasets.my_problems has 398 training rows" in message
    assert message.endswith(
        "What fits: selection.my_problems of at most 24 prompts per node at 16 nodes, or scaling.weak_nodes of "
        "at most 12 nodes at 32 per node"
    )


def test_a_series_no_sweep_point_can_fit_is_refused_before_the_sweep(tmp_path: Path) -> None:
    study, plan = _plan_of(tmp_path, ["datasets.my_problems.sweep=[100, 200]", "scaling.weak_nodes=[1,4]"])
    with pytest.raises(StudyError, match=r"the weak run of my_problems on 4 node\(s\) .* at least 400 .* 398 training"):
        check_step_sizes(study, plan, tmp_path)


@pytest.mark.verl
@pytest.mark.heavy
def test_the_preflight_scores_in_the_engines_python_what_the_data_stage_could_not(tmp_path: Path, monkeypatch) -> None:
    """A cluster's data stage has no verl: it leaves the reference solutions beside the rows, and the
    preflight's probe (the engine's own Python: here the local environment, on LUMI the image) scores
    them with verl's scorer; a share below the threshold is a preflight problem, in the same line."""
    from rlvr_scaling.execution.preflight import checks as preflight
    from rlvr_scaling.execution.preflight.rewards import reward_problems

    sets = ['datasets.dapo_math.self_check.solution="{answer}"']  # bare answers: math_dapo scores -1
    study = load_study(site="local", sets=sets)
    monkeypatch.setitem(sys.modules, "verl.utils.reward_score", None)
    for name in ("gsm8k", "dapo_math"):
        manifest = prepare_dataset(study, name, tmp_path / "results" / "data" / "local" / name)
        assert manifest["self_check"]["ran"] is False and manifest["self_check"]["references"] == "references.jsonl"
    monkeypatch.delitem(sys.modules, "verl.utils.reward_score")
    engine, problems = preflight._probe(study, tmp_path, [], dict(__import__("os").environ), timeout_s=600)
    assert problems == [], problems
    record, problems = reward_problems(study, engine["rewards"])
    assert (record["gsm8k"]["passing"], record["gsm8k"]["rows"]) == (544, 544)
    assert record["gsm8k"]["scorer"] == "verl.utils.reward_score.default_compute_score('openai/gsm8k')"
    assert (record["dapo_math"]["passing"], record["dapo_math"]["rows"]) == (0, 544)
    assert len(problems) == 1 and problems[0].startswith("datasets.dapo_math: the reward gives 0 of 544 rows")
    assert "scored -1.0" in problems[0]


@pytest.mark.parametrize(
    ("response", "truth", "score"),
    [
        ("The answer is: 42", "42", 1.0),
        ("The answer is 42.", "42", 1.0),  # no colon, a trailing period
        ("so the answer is 1,250.", "1250", 1.0),  # separators
        ("We get \\boxed{-7} in the end, not 3", "-7", 1.0),  # the last box wins over the text
        ("first 3.50 then", "3.5", 1.0),  # free text: the last number, in one written form
        ("The answer is: 41. The answer is: 42", "42", 1.0),  # the last marker
        ("The answer is: 12 apples, not 42", "42", 0.0),  # after the marker, the first number
        ("The answer is 41.", "42", 0.0),
        ("no number at all", "42", 0.0),
        # Fractions by value, as the number rule writes the ground truth: every form of 5/8 scores.
        ("The answer is 10/16.", "5/8", 1.0),
        ("so \\boxed{\\frac{5}{8}}", "5/8", 1.0),
        ("0.625", "5/8", 1.0),
        ("The answer is 8", "5/8", 0.0),  # the denominator alone is wrong (it scored 1 before #61)
        ("The answer is 1/3", "-1/3", 0.0),
        ("The answer is 3/0", "3/0", 0.0),
    ],
)
def test_the_example_reward_accepts_the_common_final_answer_shapes(response: str, truth: str, score: float) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("number_match", EXAMPLE_REWARD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compute_score("my_problems", response, truth) == score


@pytest.mark.heavy
def test_an_own_reward_the_data_stage_could_not_import_is_scored_by_the_preflight_from_its_copy(
    tmp_path: Path, monkeypatch
) -> None:
    """A reward file importing what only the image has: the data stage records that it could not load
    it, and the preflight's probe imports the dataset's copy (reward.py) in the engine's Python."""
    from rlvr_scaling.execution.preflight import checks as preflight
    from rlvr_scaling.execution.preflight.rewards import reward_problems
    from rlvr_scaling.inputs import self_check

    study = load_study(EXAMPLE, site="local", sets=["only_datasets=[my_problems]"])
    monkeypatch.chdir(REPO)  # the example's file and reward are relative to the repository
    monkeypatch.setattr(self_check, "load_scorer", lambda *args: (None, "ModuleNotFoundError: only in the image"))
    manifest = prepare_dataset(study, "my_problems", tmp_path / "results" / "data" / "local" / "my_problems")
    assert manifest["self_check"] == {
        "ran": False,
        "why": "ModuleNotFoundError: only in the image",
        "warnings": [],
        "references": "references.jsonl",
    }
    engine, problems = preflight._probe(study, tmp_path, [], dict(__import__("os").environ), timeout_s=600)
    assert problems == [], problems
    record, problems = reward_problems(study, engine["rewards"])
    assert problems == [] and (record["my_problems"]["passing"], record["my_problems"]["rows"]) == (400, 400)
    copy = tmp_path / "results" / "data" / "local" / "my_problems" / "reward.py"
    assert record["my_problems"]["scorer"] == f"{copy.resolve()}:compute_score"
