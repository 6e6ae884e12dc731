"""A site's environment reaches the run expanded: ${NAME} from the job's environment, nothing else."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.execution.run_environment import expanded_environment, shell_export
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.validate import check_schema

from .conftest import REPO

SITE_SCHEMA = REPO / "config" / "schema" / "site.schema.yaml"


def test_lumi_per_job_paths_are_expanded_for_ray_and_in_command_sh() -> None:
    study = load_study(site="lumi")
    env = expanded_environment(study, {"SLURM_JOB_ID": "4242"})
    assert env["MIOPEN_USER_DB_PATH"] == "/tmp/miopen-4242" and env["VLLM_CACHE_ROOT"] == "/tmp/vllm-4242"
    assert not any("$" in value for value in env.values())
    line = shell_export("MIOPEN_USER_DB_PATH", study.site.environment["MIOPEN_USER_DB_PATH"])
    shown = subprocess.run(
        ["bash", "-c", f"set -u; {line}; echo $MIOPEN_USER_DB_PATH"],
        capture_output=True,
        text=True,
        env={"SLURM_JOB_ID": "4242", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert shown.stdout.strip() == "/tmp/miopen-4242"


def test_quotes_and_spaces_around_a_reference_stay_literal() -> None:
    line = shell_export("X", "a 'b' \"c\" `d` ${JOB}-e")
    shown = subprocess.run(["bash", "-c", f'{line}; printf %s "$X"'], capture_output=True, text=True, env={"JOB": "7"})
    assert shown.stdout == "a 'b' \"c\" `d` 7-e"


def test_a_reference_the_job_lacks_is_named_before_the_run_starts() -> None:
    study = load_study(site="lumi")
    with pytest.raises(StudyError, match=r"environment [A-Z_]+=.*\$\{SLURM_JOB_ID\}.*does not have"):
        expanded_environment(study, {})


@pytest.mark.parametrize("value", ["$HOME/x", "$(hostname)", "${JOB", "`id`$"])
def test_any_other_dollar_is_rejected_by_the_site_schema(value: str) -> None:
    site = load_study(site="lumi").site.to_dict()
    site["environment"]["BAD"] = value
    with pytest.raises(ConfigError) as caught:
        check_schema(site, SITE_SCHEMA, source="site file lumi.yaml")
    assert caught.value.key == "environment.BAD"


def test_a_run_records_only_harmless_values_of_the_jobs_environment() -> None:
    import dataclasses

    from rlvr_scaling.execution.run_environment import recorded_environment

    study = load_study(site="lumi")
    site_env = {
        "HF_HOME": "/tmp/hf-${SLURM_JOB_ID}",
        "WANDB_API_KEY": "${WANDB_API_KEY}",
        "PIP_INDEX_URL": "https://${PIP_USER}:${PIP_SECRET}@pypi.example/simple",
        "NCCL_SOCKET_IFNAME": "${RLVR_IFNAME}",
        "SHARED_CACHE": "${SHARED_DIR}/cache",
    }
    study = dataclasses.replace(study, site=dataclasses.replace(study.site, environment=site_env))
    job = {
        "SLURM_JOB_ID": "4242",
        "WANDB_API_KEY": "wandb-0123456789",
        "PIP_USER": "me",
        "PIP_SECRET": "pw-0123456789",
        "RLVR_IFNAME": "hsn0",
        "SHARED_DIR": "/scratch/p/shared",
    }
    recorded = recorded_environment(study, job)
    # Slurm's job id, an interface name and a folder are filled in; a key, a user and a password are
    # not: only their names are recorded. The run itself gets every value (expanded_environment).
    assert recorded["HF_HOME"] == "/tmp/hf-4242" and recorded["NCCL_SOCKET_IFNAME"] == "hsn0"
    assert recorded["SHARED_CACHE"] == "/scratch/p/shared/cache"
    assert recorded["WANDB_API_KEY"] == "${WANDB_API_KEY}"
    assert recorded["PIP_INDEX_URL"] == "https://${PIP_USER}:${PIP_SECRET}@pypi.example/simple"
    assert expanded_environment(study, job)["WANDB_API_KEY"] == "wandb-0123456789"


def test_the_per_job_folders_are_the_sites_paths_named_by_the_job_id_and_nothing_above_them() -> None:
    from rlvr_scaling.execution.run_environment import job_folders

    lumi = load_study(sets=["slurm_account=p"], site="lumi")
    job = {"SLURM_JOB_ID": "4242", "HOME": "/users/me"}
    assert job_folders(lumi, job) == [
        "/tmp/cache-4242",
        "/tmp/hf-4242",
        "/tmp/inductor-4242",
        "/tmp/miopen-4242",  # MIOpen's two variables name one folder
        "/tmp/torch-4242",
        "/tmp/triton-4242",
        "/tmp/vllm-4242",
    ]
    # A folder whose job-named part is not its own name (a parent shared by jobs below it) is never named,
    # and outside a Slurm job there is none.
    shared = dataclasses.replace(
        lumi.site, environment={"A_DIR": "/scratch/${SLURM_JOB_ID}/cache", "B_DIR": "/tmp/b-${SLURM_JOB_ID}"}
    )
    assert job_folders(dataclasses.replace(lumi, site=shared), job) == ["/tmp/b-4242"]
    assert job_folders(lumi, {"HOME": "/users/me"}) == []
