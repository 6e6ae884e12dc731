"""The workflow as Snakemake sees it: dry runs of the local and LUMI studies, the profile, lint."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from rlvr_scaling.inputs.container import python_command
from rlvr_scaling.step_inputs import SETTINGS_STEPS, settings_steps
from rlvr_scaling.study.config import load_study

from .conftest import PYTHON, REPO
from .workflow_helpers import private_clone, snakemake

ACCOUNT = {"RLVR_SLURM_ACCOUNT": "project_465000000"}


@pytest.fixture
def lumi_workdir(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (workdir / "lumi").symlink_to(REPO / "lumi")
    # LUMI keeps results on /scratch/<account>/ (storage.results); here, beside the workdir.
    monkeypatch.setenv("RLVR_RESULTS_ROOT", str(workdir.parent / f"{workdir.name}-scratch"))
    return workdir


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_local_dry_run_lists_sweep_selection_and_analysis(workdir: Path) -> None:
    counts = job_counts(snakemake(workdir, "-n", "--cores", "2").stdout)
    # The sweep is sequential: each dataset's first point, then a step that says whether the next runs.
    assert counts["run"] == 2 and counts["sweep_step"] == 2 and counts["selection"] == 2
    grid = '{"selection_rule.sweep_order": "grid"}'
    counts_grid = job_counts(snakemake(workdir, "-n", "--cores", "2", "--config", f"overrides={grid}").stdout)
    assert counts_grid["run"] == 4 and "sweep_step" not in counts_grid
    assert {"dataset", "model", "summary", "index", "tables", "figures", "report", "bundle"} <= set(counts)
    # Nothing is written while Snakemake reads the rules, nor by a dry run.
    results = workdir / "results"
    assert not results.exists() or not any(results.iterdir()), sorted(results.rglob("*"))


def local_rules() -> set[str]:
    """The Snakefile's `localrules:` (a dry run prints local and Slurm jobs alike)."""
    text = (REPO / "Snakefile").read_text()
    block = re.search(r"^localrules:\n((?:[ \t]+\w+,?\n)+)", text, re.M).group(1)
    return set(re.findall(r"\w+", block))


def slurm_job_resources(output: str) -> dict[str, list[str]]:
    """Each job of a dry run that is not a local rule (a Slurm job): its resources."""
    local = local_rules()
    jobs: dict[str, list[str]] = {}
    for block in output.split("\n\n"):
        match = re.search(r"^(?:rule|checkpoint) (\w+):", block, re.M)
        if match and match.group(1) not in local:
            jobs.setdefault(match.group(1), []).append(re.search(r"resources: (.*)", block).group(1))
    return jobs


def test_every_slurm_job_carries_the_account_given_on_the_command_line(lumi_workdir: Path) -> None:
    # The hardest of the documented ways: a --config on the command line replaces the profile's whole,
    # so site=lumi is given again. The environment's way: the published study's dry run below; every
    # way meets in Study.slurm_account (tests/test_plan.py checks each reaches the build's resources).
    unset = {"RLVR_SLURM_ACCOUNT": "", "SLURM_ACCOUNT": "", "SBATCH_ACCOUNT": ""}
    args = ("--config", "site=lumi", "slurm_account=project_465000001")
    output = snakemake(lumi_workdir, "--profile", "lumi", "-n", *args, env=unset).stdout
    jobs = slurm_job_resources(output)
    # Before the sweep: the image build, the preflight and the sweep's first runs are Slurm jobs.
    assert set(jobs) == {"container_image", "preflight", "run"}, sorted(jobs)
    for rule, lines in jobs.items():
        for line in lines:
            assert "slurm_account=project_465000001" in line, (rule, line)
    # The build needs no GPU: LUMI's CPU partition, no GPUs asked for.
    (build,) = jobs["container_image"]
    assert "slurm_partition=small," in build + "," and "gpus" not in build, build


def test_lumi_profile_dry_run_before_the_sweep(lumi_workdir: Path) -> None:
    output = snakemake(lumi_workdir, "--profile", "lumi", "-n", env=ACCOUNT).stdout
    counts = job_counts(output)
    # The first point of each sequential sweep (25 and 5 prompts).
    assert counts["run"] == 2 and counts["sweep_step"] == 2 and counts["selection"] == 2
    assert counts["container_image"] == 1
    # One settings file per step that reads the study, and one per dataset (step_inputs.settings_steps).
    steps = settings_steps(load_study(site="lumi"))
    assert counts["container_recipe"] == 1 and counts["step_settings"] == len(steps) == len(SETTINGS_STEPS) + 2
    assert "checkpoint" in output
    # The data and the model run where Snakemake runs, and the dry run says so (no Slurm resources).
    for dataset in ("gsm8k", "dapo_math"):
        marked = re.search(
            rf"^Job \d+: rule dataset: {dataset} into results/data/lumi/{dataset}/manifest.json, (.*)$", output, re.M
        )
        assert marked and marked.group(1) == "run by Snakemake on this machine (the login node), not submitted to Slurm"
    assert re.search(
        r"^Job \d+: rule model: into results/models/lumi/Qwen-Qwen3-8B-[0-9a-f]{8}, run by Snakemake on this machine",
        output,
        re.M,
    )


def test_lumi_profile_dry_run_of_the_published_study(lumi_workdir: Path) -> None:
    output = snakemake(
        lumi_workdir, "--profile", "lumi", "-n", "--configfile", "config/published-selection.yaml", env=ACCOUNT
    ).stdout
    counts = job_counts(output)
    assert counts["run"] == 18 and counts["preflight"] == 1
    # The preflight comes first: every run waits for it; two nodes of small-g, 70 minutes (its
    # engine smoke takes two steps of a two-node DAPO run: config/sites/lumi.yaml has the arithmetic).
    preflight = next(b for b in output.split("\n\n") if "checkpoint preflight:" in b)
    assert "nodes=2" in preflight and "slurm_partition=small-g" in preflight and "runtime=70" in preflight
    # ...after the image's build, a job of its own.
    assert output.index("rule container_image:") < output.index("checkpoint preflight:")
    assert output.index("checkpoint preflight:") < output.index("rule run:")
    jobs = slurm_job_resources(output)
    assert set(jobs) == {"container_image", "preflight", "run"}, sorted(jobs)
    assert all("slurm_account=project_465000000" in line for lines in jobs.values() for line in lines)
    resources = jobs["run"]
    assert len(resources) == 18
    for line in resources:
        assert "slurm_partition=standard-g" in line and "slurm_extra=--gpus-per-node=8" in line
        assert "tasks_per_node=2" in line and "cpus_per_task=28" in line and "mpi=srun" in line
        assert "slurm_account=project_465000000" in line
    assert any("nodes=16" in line for line in resources)


def test_lumi_without_an_account_stops_before_anything_is_submitted(lumi_workdir: Path) -> None:
    env = {"RLVR_SLURM_ACCOUNT": "", "SLURM_ACCOUNT": "", "SBATCH_ACCOUNT": ""}
    result = snakemake(lumi_workdir, "--profile", "lumi", "-n", env=env, check=False)
    assert result.returncode != 0
    assert "slurm_account" in result.stderr and "project account" in result.stderr
    assert not (lumi_workdir / ".snakemake" / "slurm_logs").exists()
    assert not (lumi_workdir / "results" / "logs" / "slurm").exists()  # the LUMI profile's rlvr-slurm-logdir
    # A call that submits nothing needs no account (#62): the lock a killed controller left goes.
    (lumi_workdir / ".snakemake" / "locks").mkdir(parents=True, exist_ok=True)
    (lumi_workdir / ".snakemake" / "locks" / "0.input.lock").write_text("")
    for quiet in (["--unlock"], ["--list-rules"]):
        done = snakemake(lumi_workdir, "--profile", "lumi", *quiet, env={**env, "RLVR_RESULTS_ROOT": ""}, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    assert not (lumi_workdir / ".snakemake" / "locks").exists()


def test_bad_config_stops_with_key_and_value(workdir: Path) -> None:
    result = snakemake(workdir, "-n", "--config", "site=atlantis", check=False)
    assert result.returncode != 0
    assert "'site'" in result.stderr and "atlantis" in result.stderr and "known sites" in result.stderr


# The one lint the rules keep: no rule names a conda environment or container. Each runs `rlvr-scaling`
# with Snakemake's own interpreter (the workflow environment, envs/workflow.txt), and a run enters the
# site's image through its launcher (site `container`), which Snakemake's software deployment cannot
# express; a `conda:` directive would only pretend (`--sdm conda` would make an environment the rules
# do not use).
SOFTWARE_LINT = "Specify a conda environment or container for each rule."


def test_workflow_is_lint_clean_but_for_the_software_directives(workdir: Path) -> None:
    result = snakemake(workdir, "--lint", check=False)
    linted_rules = re.findall(r"^Lints for rule (\w+)", result.stderr, re.M)
    lints = re.findall(r"^    \* (.+?):?$", result.stderr, re.M)
    assert "Lints for snakefile" not in result.stderr, result.stderr
    assert linted_rules and "run" in linted_rules, result.stderr  # the lint ran and read the rules
    assert set(lints) == {SOFTWARE_LINT} and len(lints) == len(linted_rules), result.stderr


def test_snakemake_and_plan_reject_a_bad_config_in_the_same_one_line(workdir: Path, tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["algorithm"]["steps"] = "twenty"  # a value the local site would replace
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config))
    plan = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--config", str(bad)], capture_output=True, text=True, cwd=workdir
    )
    dry = snakemake(workdir, "-n", "--configfile", str(bad), check=False)
    assert plan.returncode == 2 and dry.returncode != 0
    line = plan.stderr.strip()
    assert line.startswith("rlvr-scaling: error: Invalid config: key 'algorithm.steps' has value 'twenty'")
    assert line in dry.stderr.splitlines()
    assert "Failed validating" not in dry.stderr and len(dry.stderr.splitlines()) < 10, dry.stderr


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("overrides: {}\nnotes: &x [1, *x]\n", "an alias (*name) that refers to the value it is in"),
        ("overrides: " + "[" * 60 + "]" * 60 + "\n", "nested deeper than 50 levels"),
    ],
    ids=["self-alias", "60-deep"],
)
def test_snakemake_names_a_configfile_that_cannot_be_a_config_as_plan_does(
    workdir: Path, tmp_path: Path, content: str, problem: str
) -> None:
    """#31: Snakemake reads --configfile with its own YAML reader, so these reached the study's checks
    as a recursive or deep document and gave a RecursionError traceback. (Not covered: a file that is
    not UTF-8, or a mapping that contains itself, fails inside Snakemake's own reading and merging of
    --configfile, before the workflow runs; `plan --config` names both.)"""
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    plan = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--config", str(bad)], capture_output=True, text=True, cwd=workdir
    )
    dry = snakemake(workdir, "-n", "--configfile", str(bad), check=False)
    assert plan.returncode == 2 and problem in plan.stderr, plan.stderr
    assert dry.returncode != 0 and "Traceback" not in dry.stderr and "RecursionError" not in dry.stderr
    # The workflow reads a study file as plan does (#43): the same line, naming the file.
    same = f"rlvr-scaling: error: {bad} is not a usable YAML file: {problem}"
    assert same in plan.stderr.splitlines() and same in dry.stderr.splitlines(), dry.stderr


def test_config_overrides_on_the_command_line_are_typed(workdir: Path) -> None:
    # A grid sweep, so that the dry run lists every point the plan does.
    overrides = 'overrides={"algorithm.steps": 5, "selection_rule.sweep_order": "grid"}'
    dry = snakemake(workdir, "-n", "--cores", "2", "--config", overrides).stdout
    plan = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--json", "--set", "algorithm.steps=5"],
        capture_output=True,
        text=True,
        cwd=workdir,
        check=True,
    )
    run_ids = {run["run_id"] for run in json.loads(plan.stdout) if run["run_id"]}
    assert run_ids and all(f"results/runs/{run_id}" in dry for run_id in run_ids)
    assert all(run["steps"] == 5 for run in json.loads(plan.stdout))


def test_the_nvidia_example_site_plans_and_dry_runs_with_its_gpus_in_the_image(workdir: Path) -> None:
    config = ("--config", "site=nvidia-example", "slurm_account=proj_1", "selection={gsm8k: 100, dapo_math: 10}")
    counts = job_counts(snakemake(workdir, "-n", *config).stdout)
    assert counts["run"] == 18 and counts["container_image"] == 1
    plan = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--json", "--site", "nvidia-example", "--set", "slurm_account=proj_1"],
        capture_output=True,
        text=True,
        cwd=workdir,
        check=True,
    )
    runs = [run for run in json.loads(plan.stdout) if run["run_id"]]
    assert runs and all(
        run["resources"]["slurm_extra"] == "--gpus-per-node=8" and run["resources"]["slurm_partition"] == "gpu"
        for run in runs
    )
    command = python_command(load_study(site="nvidia-example"), workdir)
    # Behind the shell that passes the run's variables into the clean environment (4 words).
    assert command[4:8] == ["apptainer", "exec", "--cleanenv", "--nv"] and command[-1] == "python3"


def test_another_clone_runs_its_own_code_with_the_same_environment(tmp_path: Path) -> None:
    """One workflow environment (installed from this repository) serves a lab's every clone: Snakemake
    in another clone reads that clone's package, and its jobs run it (#43)."""
    clone = private_clone(tmp_path / "other-clone")
    init = clone / "workflow" / "rlvr_scaling" / "__init__.py"
    init.write_text(init.read_text() + "\nimport sys\nprint('the other clone s package', file=sys.stderr)\n")
    result = snakemake(clone, "-n", "--cores", "2", "-p")
    assert "the other clone s package" in result.stderr
    assert f"PYTHONPATH={clone}/workflow" in result.stdout and f"PYTHONPATH={REPO}/workflow" not in result.stdout
