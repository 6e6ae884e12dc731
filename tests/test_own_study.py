"""A study of one's own (#43): datasets described in the config (a MATH-style hub dataset, a local
file), an own reward file, a local model folder; what plan refuses before the data stage; one meaning
for a study file in plan and Snakemake; the repository taken from the working directory."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from rlvr_scaling.errors import StudyError
from rlvr_scaling.inputs import input_lock
from rlvr_scaling.inputs import model as model_stage
from rlvr_scaling.inputs.chat_template import CHATML
from rlvr_scaling.inputs.data import prepare_dataset
from rlvr_scaling.inputs.data_check import check_inputs
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan, known_runs

from .conftest import PYTHON, REPO
from .workflow_helpers import snakemake

EXAMPLE = REPO / "config" / "examples" / "own-study.yaml"
ACCOUNT = {"RLVR_SLURM_ACCOUNT": "proj_1"}


@pytest.fixture
def lock_file(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "lock" / "inputs.lock.json"
    monkeypatch.setenv(input_lock.LOCK_FILE_VAR, str(path))
    return path


def example(tmp_path: Path, **datasets_changes: dict) -> Path:
    """The shipped example study, its datasets changed as given (a key set to None is removed)."""
    study = yaml.safe_load(EXAMPLE.read_text())
    for name, changes in datasets_changes.items():
        for key, value in changes.items():
            if value is None:
                study["datasets"][name].pop(key, None)
            else:
                study["datasets"][name][key] = value
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_a_local_jsonl_dataset_is_built_with_its_reward_file_locked_and_a_changed_file_refused(
    tmp_path: Path, lock_file: Path, monkeypatch
) -> None:
    data = tmp_path / "problems.jsonl"
    data.write_text((REPO / "config/examples/data/problems.jsonl").read_text())
    study = load_study(example(tmp_path, my_problems={"source": str(data)}), site="lumi")
    manifest = prepare_dataset(study, "my_problems", tmp_path / "out")
    train = pd.read_parquet(tmp_path / "out" / "train.parquet")
    assert (manifest["files"]["train"]["rows"], manifest["files"]["val"]["rows"]) == (398, 2)
    first = json.loads(data.read_text().splitlines()[0])
    row = train.iloc[0] if train.iloc[0]["extra_info"]["index"] == 0 else None
    # "19 x 460 = 8,740. The answer is: 8,740." by the number rule: separators and the period gone.
    assert first["target"].endswith("The answer is: 8,740.") and row is not None
    assert row["reward_model"]["ground_truth"] == str(19 * 460)
    # Every row's own worked answer earns the example reward's full score.
    check = manifest["self_check"]
    assert (check["ran"], check["rows"], check["passing"], check["failing"]) == (True, 400, 400, [])
    assert row["prompt"][0]["content"].startswith(f"Solve: {first['item']['text']}")
    reward = REPO / "config/examples/rewards/number_match.py"
    copied = tmp_path / "out" / "reward.py"
    assert copied.read_bytes() == reward.read_bytes() and manifest["reward"]["function"] == "compute_score"
    assert manifest["reward"]["sha256"] == study.dataset("my_problems").reward.sha256
    locked = json.loads(lock_file.read_text())["inputs"][f"dataset:{data}"]
    assert locked["revision"] == "local" and list(locked["files"]) == ["problems.jsonl"]
    # The runs load the copy, by verl's custom_reward_function keys.
    run = next(r for r in known_runs(build_plan(study, root=tmp_path)) if r.dataset == "my_problems")
    assert f"reward.custom_reward_function.path={tmp_path}/results/data/lumi/my_problems/reward.py" in run.verl_args
    assert "reward.custom_reward_function.name=compute_score" in run.verl_args

    data.write_text(data.read_text().replace("times", "x"))
    with pytest.raises(StudyError, match="problems.jsonl does not match .*dataset:.*at commit local"):
        prepare_dataset(study, "my_problems", tmp_path / "again")


def test_an_own_reward_file_names_its_runs_by_its_content(tmp_path: Path) -> None:
    reward = tmp_path / "reward.py"
    reward.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n")
    path = example(tmp_path, my_problems={"reward": {"file": str(reward), "function": "compute_score"}})
    before = {r.run_id for r in known_runs(build_plan(load_study(path, sets=["slurm_account=p"]), root=tmp_path))}
    reward.write_text(reward.read_text().replace("0.0", "1.0"))
    after = {r.run_id for r in known_runs(build_plan(load_study(path, sets=["slurm_account=p"]), root=tmp_path))}
    assert {i for i in before if i.startswith("math")} == {i for i in after if i.startswith("math")}
    assert {i for i in before if i.startswith("my_problems")}.isdisjoint(after)


def _plan(path: Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """`rlvr-scaling plan --config path` from `cwd`, with an account."""
    return subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--config", str(path)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **ACCOUNT},
    )


def _plan_error(path: Path, cwd: Path = REPO) -> str:
    done = _plan(path, cwd)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"ground_truth": {"rule": "first_number"}},
            "key 'datasets.my_problems.ground_truth.rule' has value 'first_number'",
        ),
        ({"answer": "solution"}, "datasets.my_problems.answer: the field 'solution' is not in the train rows of"),
        ({"source": "./no/such/file.jsonl"}, "datasets.my_problems.source: './no/such/file.jsonl' does not exist"),
        ({"source": "BROKEN"}, "datasets.my_problems.source: "),
        (
            {"reward": {"file": "config/examples/rewards/number_match.py", "function": "score"}},
            "datasets.my_problems.reward.function: ",
        ),
    ],
    ids=["unknown-answer-rule", "missing-field", "no-such-file", "unparsable-file", "no-such-function"],
)
def test_plan_refuses_in_one_line_what_the_data_stage_could_not_build(
    tmp_path: Path, change: dict, expected: str
) -> None:
    if change.get("source") == "BROKEN":
        broken = tmp_path / "broken.jsonl"
        broken.write_text("not json\n")
        change = {"source": str(broken)}
    line = _plan_error(example(tmp_path, my_problems=change))
    assert line.startswith("rlvr-scaling: error: ") and expected in line, line
    if change.get("source", "").endswith("broken.jsonl"):
        assert line.endswith("broken.jsonl line 1 is not valid JSON: Expecting value: line 1 column 1 (char 0)")


def test_snakemake_refuses_at_start_up_as_plan_does(workdir: Path, tmp_path: Path) -> None:
    study = example(tmp_path, my_problems={"answer": "solution"})
    dry = snakemake(workdir, "-n", "--configfile", str(study), env=ACCOUNT, check=False)
    assert dry.returncode != 0 and "Traceback" not in dry.stderr
    assert _plan_error(study, cwd=workdir) in dry.stderr.splitlines(), dry.stderr


def test_a_study_file_gives_the_same_study_to_plan_and_snakemake(workdir: Path) -> None:
    """Its datasets replace the default ones (Snakemake's own merge added gsm8k and dapo_math to them);
    both say so, with the run count, when they start."""
    study = REPO / "config" / "examples" / "own-study.yaml"
    done = _plan(study, workdir)
    assert done.returncode == 0, done.stderr
    planned = done.stdout
    dry = snakemake(workdir, "-n", "--configfile", str(study), env=ACCOUNT)
    datasets = next(line for line in planned.splitlines() if line.startswith("Datasets: "))
    header = planned.splitlines()[0]
    assert datasets.startswith("Datasets: math (") and "gsm8k" not in datasets
    assert f"rlvr-scaling: {header}. {datasets}" in dry.stderr.splitlines(), dry.stderr


def test_a_local_model_folder_is_copied_locked_and_its_context_checked(
    tmp_path: Path, lock_file: Path, monkeypatch
) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 40960, "hidden_size": 8}))
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE}))
    local = ["model.source=local", f"model.path={folder}", "model.max_context=40960"]
    study = load_study(site="lumi", sets=local)
    manifest = model_stage.prepare_model(study, tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == b"weights"
    assert manifest["source"] == "local" and manifest["locked"] is False
    assert f"model {folder}@local" not in input_lock.unlocked_inputs(study)
    (folder / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(StudyError, match=r"model\.safetensors does not match"):
        model_stage.prepare_model(study, tmp_path / "again")
    with pytest.raises(StudyError, match="model.max_context' has value 50000, but the model's config.json"):
        check_inputs(load_study(site="lumi", sets=[*local[:2], "model.max_context=50000"]))
    with pytest.raises(StudyError, match="model.path: .* has no config.json"):
        check_inputs(load_study(site="lumi", sets=["model.source=local", f"model.path={tmp_path}"]))


TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}"


def test_a_model_without_a_chat_template_is_refused_before_anything_and_one_can_be_supplied(
    tmp_path: Path, lock_file: Path, monkeypatch
) -> None:
    """verl renders every prompt with the tokenizer's chat template: a folder without one failed only in
    verl's start-up, a minute into the first run (#61)."""
    folder = tmp_path / "base-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 40960}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    local = ["model.source=local", f"model.path={folder}", "model.max_context=40960"]
    with pytest.raises(StudyError) as refused:
        check_inputs(load_study(site="lumi", sets=local))
    assert str(refused.value).startswith(f"model: {folder} has no chat template") and "model.chat_template" in str(
        refused.value
    )
    # A named template: written into the prepared folder, which transformers reads over the tokenizer's.
    study = load_study(site="lumi", sets=[*local, "model.chat_template=chatml"])
    check_inputs(study)
    manifest = model_stage.prepare_model(study, tmp_path / "model")
    assert (tmp_path / "model" / "chat_template.jinja").read_text() == CHATML
    assert manifest["chat_template"]["from"] == "the named template 'chatml'"
    # The folder's own files are the lock's, unchanged by the template.
    assert json.loads((tmp_path / "model" / "tokenizer_config.json").read_text()) == {"eos_token": "<|im_end|>"}
    # A file of one's own; a name or a file that is neither is refused naming the key.
    own = tmp_path / "mine.jinja"
    own.write_text(TEMPLATE)
    check_inputs(load_study(site="lumi", sets=[*local, f"model.chat_template={own}"]))
    for wrong in ("chatm", str(tmp_path / "missing.jinja")):
        with pytest.raises(StudyError, match=f"'model.chat_template' has value '{wrong}'"):
            check_inputs(load_study(site="lumi", sets=[*local, f"model.chat_template={wrong}"]))


def test_a_clone_without_its_config_is_one_line(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    (clone / "rules").mkdir(parents=True)
    (clone / "Snakefile").write_text("# a clone whose config/ was removed\n")
    line = _plan_error(Path("config/config.yaml"), cwd=clone)
    assert line == (
        f"rlvr-scaling: error: {clone}/config/config.yaml is missing: run from a clone of the rlvr-scaling "
        "repository (its config/ with the study, config/sites/ and config/schema/), or restore it from git"
    )


def test_a_site_naming_its_own_base_image_is_judged_as_itself(tmp_path: Path, monkeypatch) -> None:
    """A lab's site inheriting nvidia-example with an NGC image took over nvidia-example's package list,
    and the resolve check judged verl's image, not theirs (#61)."""
    from rlvr_scaling.plan_view import release_line
    from rlvr_scaling.study import config as config_module
    from rlvr_scaling.study.config import load_site

    sites = tmp_path / "sites"
    sites.mkdir()
    parent = REPO / "config" / "sites" / "nvidia-example.yaml"
    (sites / "nvidia-example.yaml").write_text(parent.read_text())
    lab = "name: lab\ninherits: nvidia-example\ncontainer:\n  base_image: /shared/ngc-pytorch-25.04.sif\n"
    (sites / "lab.yaml").write_text(lab)
    inherited = yaml.safe_load(parent.read_text())["container"]
    with pytest.raises(StudyError) as refused:
        load_site("lab", sites)
    line = str(refused.value)
    assert "'container.base_packages'" in line and inherited["base_packages"] in line, line
    assert inherited["base_image"] in line and "/shared/ngc-pytorch-25.04.sif" in line, line
    # Unknown, said so: plan's line says the resolve check cannot judge it and what the image must bring.
    (sites / "lab.yaml").write_text(lab + "  base_packages: null\n")
    assert load_site("lab", sites)["container"]["base_packages"] is None
    original = config_module.load_site
    monkeypatch.setattr(config_module, "load_site", lambda name: original(name, sites))
    shown = release_line(load_study(site="lab", sets=["slurm_account=p"]))
    assert shown is not None and shown.startswith("Image base: ngc-pytorch-25.04. Its package list is unknown")
    for engine in ("vLLM 0.24.0", "Megatron-Core", "TransformerEngine", "cannot judge it"):
        assert engine in shown, shown
    # The same image as the parent's keeps the parent's list: nothing to judge differently.
    (sites / "lab.yaml").write_text(lab.replace("/shared/ngc-pytorch-25.04.sif", inherited["base_image"]))
    assert load_site("lab", sites)["container"]["base_packages"] == inherited["base_packages"]
