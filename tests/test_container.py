"""How the launcher runs inside a site's container: the command, the binds, the module environment."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from rlvr_scaling.analysis.models import RUN_FIELDS
from rlvr_scaling.analysis.results_io import write_index
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.inputs.container import (
    exec_prefix,
    module_environment,
    python_command,
    render_definition,
    require_runtime,
    runtime,
)
from rlvr_scaling.inputs.container_build import build_image, check_base_pin
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.validate import check_semantics

from .conftest import REPO
from .study_edits import edited


def test_a_site_without_a_container_runs_this_python() -> None:
    study = load_study(site="local")
    assert exec_prefix(study, Path("/r")) == [] and python_command(study, Path("/r")) == [sys.executable]


def test_lumi_runs_the_images_python_with_its_binds_and_the_results_tree(tmp_path: Path) -> None:
    study = load_study(site="lumi")
    command = python_command(study, tmp_path)
    assert command[:2] == ["singularity", "exec"] and command[-1] == "/opt/venv/bin/python3"
    binds = command[3].split(",")
    assert "/pfs" in binds and "/appl" in binds and str(tmp_path.resolve()) in binds
    assert command[4] == str(tmp_path.resolve() / "results" / "containers" / "lumi" / "verl.sif")
    definition = render_definition(study)
    # A pinned release, never a floating `latest` link; the Megatron bridge verl 0.9.1 imports.
    assert "From: /appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260807_115122/" in definition
    assert "latest" not in definition
    # Not verl's megatron extra (it pins torch 2.11 and CUDA builds): the bridge on the base's stack.
    # The install step both ways share, with no lock ("-") on LUMI: the base's stack is the constraint.
    post = '/opt/venv/bin/python3 /opt "verl[verl-core]==0.9.1" - megatron-bridge==0.5.2 mbridge'
    assert f"sh /opt/rlvr-scaling-add-verl.sh {post}" in definition
    assert f"{REPO}/containers/add-verl.sh /opt/rlvr-scaling-add-verl.sh" in definition


def test_the_squashfs_way_binds_the_packed_venv_into_the_base_and_runs_its_python(tmp_path: Path) -> None:
    study = load_study(site="ci-apptainer-squashfs")
    command = python_command(study, tmp_path)
    packed = tmp_path.resolve() / "results" / "containers" / "ci-apptainer-squashfs" / "verl.sqsh"
    assert command[-1] == "/user-software/venv/bin/python3"
    assert command[-2] == "/var/lib/rlvr-apptainer/bookworm-venv-torch.sif"  # the base, not a built image
    assert ["--bind", f"{packed}:/user-software:ro,image-src=/"] == command[4:6]
    script = render_definition(study)
    assert script.startswith("#!/bin/bash") and "-m venv --system-site-packages /user-software/venv" in script
    assert "rlvr-scaling-base.pth" in script  # the base venv's packages (the AIF's /opt/venv) stay visible
    assert "sh /user-software/add-verl.sh /user-software/venv/bin/python /user-software" in script
    assert '"verl[verl-core]==0.9.1" /user-software/rlvr-scaling-lock.txt' in script
    # A definition template for a SquashFS build (or the reverse) is refused before anything runs.
    wrong = edited(study, site={"container": {"definition": "containers/verl-venv.def.in"}})
    with pytest.raises(ConfigError, match=r"container\.definition.*\.sh\.in"):
        check_semantics(wrong.config, wrong.site)


def test_the_test_site_runs_its_images_own_python_and_binds_no_python_environment(tmp_path: Path) -> None:
    study = load_study(site="ci-apptainer")
    command = python_command(study, tmp_path)
    assert command[:2] == ["apptainer", "exec"] and command[-1] == "/opt/venv/bin/python3"
    assert command[2:4] == ["--env", f"PYTHONPATH={REPO}/workflow"]
    binds = command[5].split(",")
    assert binds == [
        f"{REPO}/workflow:{REPO}/workflow:ro",
        str(tmp_path.resolve()),
        str(tmp_path.resolve() / "results"),
    ]
    assert not any(sys.prefix in b or sys.base_prefix in b for b in binds)
    definition = render_definition(study)
    assert f"{REPO}/containers/cpu-engine-lock.txt /opt/rlvr-scaling-lock.txt" in definition
    assert '"verl[verl-core]==0.9.1" /opt/rlvr-scaling-lock.txt' in definition
    assert "From: /var/lib/rlvr-apptainer/bookworm-venv-torch.sif" in definition


def test_the_engine_lock_pins_what_the_local_engine_is_tested_with() -> None:
    lock = (REPO / "containers" / "cpu-engine-lock.txt").read_text().splitlines()
    pins = dict(line.split("==", 1) for line in lock if "==" in line)
    assert pins["verl"] == "0.9.1" and pins["torch"] == "2.13.0+cpu"
    assert not any(line.startswith("-e") for line in lock)


def test_unknown_placeholders_in_binds_are_rejected_before_anything_runs() -> None:
    study = load_study(site="ci-apptainer")
    unknown = edited(study, site={"container": {"binds": ["{scratch}/data"]}})
    with pytest.raises(ConfigError) as error:
        check_semantics(unknown.config, unknown.site)
    assert "container.binds" in str(error.value) and "{scratch}/data" in str(error.value)
    assert "{python_prefix}" in str(error.value)


def test_module_commands_set_the_launchers_environment() -> None:
    modules = ["export SINGULARITY_BIND=/opt/cray", "export RLVR_MODULE_TEST=loaded"]
    study = edited(load_study(site="ci-apptainer"), site={"container": {"modules": modules}})
    added = module_environment(study, {"PATH": "/usr/bin:/bin", "HOME": "/root"})
    assert added["SINGULARITY_BIND"] == "/opt/cray" and added["RLVR_MODULE_TEST"] == "loaded"
    assert "PATH" not in added


def test_a_failing_module_command_stops_the_launch_with_its_output() -> None:
    modules = ["module load no-such-module-anywhere"]
    study = edited(load_study(site="ci-apptainer"), site={"container": {"modules": modules}})
    with pytest.raises(StudyError, match="container.modules failed"):
        module_environment(study, {"PATH": "/usr/bin:/bin"})


def test_a_pinned_base_image_that_changed_stops_the_build(tmp_path: Path) -> None:
    base = tmp_path / "base.sif"
    base.write_bytes(b"the base image")
    pin = {"base_image": str(base), "base_sha256": hashlib.sha256(b"the base image").hexdigest()}
    study = edited(load_study(site="ci-apptainer"), site={"container": pin})
    check_base_pin(study)
    base.write_bytes(b"another image at the same path")
    with pytest.raises(ConfigError) as caught:
        build_image(study, tmp_path / "verl.def", tmp_path / "verl.sif", tmp_path / "verl.json")
    message = str(caught.value)
    assert "container.base_sha256" in message and hashlib.sha256(base.read_bytes()).hexdigest() in message
    assert not (tmp_path / "verl.sif").exists() and not (tmp_path / "verl.json").exists()
    with pytest.raises(ConfigError, match="local image file"):
        check_base_pin(edited(study, site={"container": {"base_image": "docker://example/image:tag"}}))


def test_an_index_refuses_runs_measured_on_two_images(tmp_path: Path) -> None:
    summaries = []
    for run_id, image in [("gsm8k-n1-p2-a", "a" * 64), ("gsm8k-n2-p2-b", "b" * 64), ("gsm8k-n4-p2-c", None)]:
        path = tmp_path / f"{run_id}.json"
        container = {"sha256": image} if image else None
        summary = {**dict.fromkeys(RUN_FIELDS), "run_id": run_id, "series": ["weak"], "nodes": 1, "prompts": 2}
        record = {"summary": None, "checks": [], "valid": True, "status": "succeeded", "steps": []}
        path.write_text(json.dumps({**summary, **record, "provenance": {"container": container}}))
        summaries.append(path)
    with pytest.raises(StudyError) as caught:
        write_index("gsm8k", summaries, {}, None, tmp_path / "index.json", tmp_path)
    assert "2 different engine images" in str(caught.value) and "gsm8k-n2-p2-b" in str(caught.value)
    assert not (tmp_path / "index.json").exists()
    write_index("gsm8k", [summaries[0], summaries[2]], {}, None, tmp_path / "index.json", tmp_path)
    assert json.loads((tmp_path / "index.json").read_text())["image_sha256"] == "a" * 64


def test_a_runtime_the_host_lacks_stops_the_build_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    study = load_study(site="lumi")
    assert runtime(study) == "singularity"
    with pytest.raises(ConfigError) as caught:
        build_image(study, tmp_path / "verl.def", tmp_path / "verl.sif", tmp_path / "verl.json")
    message = str(caught.value)
    assert "container.runtime" in message and "'singularity'" in message
    assert "neither apptainer nor singularity" in message
    (tmp_path / "apptainer").write_text("#!/bin/sh\n")
    (tmp_path / "apptainer").chmod(0o755)
    with pytest.raises(ConfigError, match=r"found: apptainer"):
        require_runtime(study)
