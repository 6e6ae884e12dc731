"""How the launcher runs inside a site's container: the command, the binds, the module environment."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rlvr_scaling.analysis.per_run.results_io import write_index
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.inputs.container import (
    build_command,
    exec_prefix,
    module_environment,
    python_command,
    render_definition,
    require_runtime,
    runtime,
)
from rlvr_scaling.inputs.container_build import build_environment, build_image, check_base_pin
from rlvr_scaling.measured.models import RUN_FIELDS
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.validate import check_semantics

from .conftest import REPO
from .study_edits import edited

SHIM = 4  # bash -c SCRIPT NAME: the shell that passes the run's variables in (pass_environment_command)


def test_a_site_without_a_container_runs_this_python() -> None:
    study = load_study(site="local")
    assert exec_prefix(study, Path("/r")) == [] and python_command(study, Path("/r")) == [sys.executable]


def test_lumi_runs_the_images_python_with_its_binds_and_the_results_tree(tmp_path: Path) -> None:
    study = load_study(site="lumi")
    command = python_command(study, tmp_path)[SHIM:]
    assert command[:3] == ["singularity", "exec", "--cleanenv"] and command[-1] == "/opt/venv/bin/python3"
    # The engine hooks (rlvr_scaling.engines.hooks) from the clone, read-only, on the image's path.
    assert command[3:5] == ["--env", f"PYTHONPATH={REPO}/workflow"]
    binds = command[6].split(",")
    assert "/pfs" in binds and "/appl" in binds and str(tmp_path.resolve()) in binds
    assert f"{REPO}/workflow:{REPO}/workflow:ro" in binds
    assert command[7] == str(tmp_path.resolve() / "results" / "containers" / "lumi" / "verl.sif")
    definition = render_definition(study)
    # A pinned release, never a floating `latest` link; the Megatron bridge verl 0.9.1 imports.
    assert "From: /appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260807_115122/" in definition
    assert "latest" not in definition
    # Not verl's megatron extra (it pins torch 2.11 and CUDA builds): mbridge on the base's stack.
    # The install step both ways share, with no lock ("-") on LUMI: the base's stack is the constraint.
    post = '/opt/venv/bin/python3 /opt "verl[verl-core]==0.9.1" - mbridge==0.15.1'
    assert f"sh /opt/rlvr-scaling-add-verl.sh {post}" in definition
    assert f"{REPO}/containers/add-verl.sh /opt/rlvr-scaling-add-verl.sh" in definition


def test_the_squashfs_way_binds_the_packed_venv_into_the_base_and_runs_its_python(tmp_path: Path) -> None:
    study = load_study(site="ci-apptainer-squashfs")
    command = python_command(study, tmp_path)[SHIM:]
    packed = tmp_path.resolve() / "results" / "containers" / "ci-apptainer-squashfs" / "verl.sqsh"
    assert command[-1] == "/user-software/venv/bin/python3"
    assert command[-2] == "/var/lib/rlvr-apptainer/bookworm-venv-torch.sif"  # the base, not a built image
    assert ["--bind", f"{packed}:/user-software:ro,image-src=/"] == command[5:7]
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
    command = python_command(study, tmp_path)[SHIM:]
    assert command[:3] == ["apptainer", "exec", "--cleanenv"] and command[-1] == "/opt/venv/bin/python3"
    assert command[3:5] == ["--env", f"PYTHONPATH={REPO}/workflow"]
    binds = command[6].split(",")
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
    # LUMI's runtime, without its build modules (they need a login shell, which this PATH lacks).
    study = edited(load_study(site="lumi"), site={"container": {"build_modules": [], "build_privileges": "fakeroot"}})
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


def test_lumi_builds_through_proot_where_the_test_site_uses_fakeroot() -> None:
    lumi = build_command(load_study(site="lumi"), "verl.def", "verl.sif")
    assert lumi == ["singularity", "build", "--force", "verl.sif", "verl.def"]
    test_site = build_command(load_study(site="ci-apptainer"), "verl.def", "verl.sif")
    assert test_site[:4] == ["apptainer", "build", "--fakeroot", "--force"] and test_site[-2:] == [
        "verl.sif",
        "verl.def",
    ]


def test_a_build_drops_the_run_time_bindings_loads_proot_and_keeps_its_temporary_files_node_local(
    tmp_path: Path,
) -> None:
    """The site's build modules are shell commands; here one puts a proot on PATH the way LUMI's
    `module load LUMI PRoot` does (a stand-in executable: this machine has no proot)."""
    tools = tmp_path / "proot-module"
    tools.mkdir()
    (tools / "proot").write_text("#!/bin/sh\n")
    (tools / "proot").chmod(0o755)
    study = edited(load_study(site="lumi"), site={"container": {"build_modules": [f"export PATH={tools}:$PATH"]}})
    job = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/root",
        "SINGULARITY_BIND": "/var/spool/slurmd,/opt/cray",
        "SINGULARITY_BINDPATH": "/pfs",
        "SINGULARITYENV_LD_LIBRARY_PATH": "/opt/cray/libfabric/lib64",
        "APPTAINER_BIND": "/scratch",
        "SLURM_JOB_ID": "4242",
    }
    env = build_environment(study, job, tmp_path / "node-local")
    assert not {"SINGULARITY_BIND", "SINGULARITY_BINDPATH", "SINGULARITYENV_LD_LIBRARY_PATH", "APPTAINER_BIND"} & set(
        env
    )
    assert env["SLURM_JOB_ID"] == "4242" and env["PATH"].split(":")[0] == str(tools)
    assert env["SINGULARITY_TMPDIR"] == str(tmp_path / "node-local" / "tmp")
    assert env["SINGULARITY_CACHEDIR"] == str(tmp_path / "node-local" / "cache")
    # Without proot on PATH the build stops before it starts, naming the setting and the module.
    without = edited(load_study(site="lumi"), site={"container": {"build_modules": []}})
    with pytest.raises(ConfigError) as refused:
        build_environment(without, {"PATH": "/usr/bin:/bin"})
    assert "container.build_privileges" in str(refused.value) and "module load LUMI PRoot" in str(refused.value)


def test_only_the_runs_variables_enter_the_image_and_host_variables_stay_outside(tmp_path: Path) -> None:
    """The real pass-through shell, with a stand-in for the runtime that prints what it was given
    (the runtime's own --cleanenv, which keeps only <RUNTIME>ENV_* inside, is proven with Apptainer
    in tests/test_apptainer.py)."""
    runtime_dir = tmp_path / "bin"
    runtime_dir.mkdir()
    (runtime_dir / "singularity").write_text('#!/bin/sh\nenv -0 > "$OUT"\n')
    (runtime_dir / "singularity").chmod(0o755)
    study = edited(load_study(site="lumi"), site={"container": {"pass_environment": ["TMPDIR"]}})
    command = python_command(study, tmp_path)
    host = {
        "PATH": f"{runtime_dir}:/usr/bin:/bin",
        "OUT": str(tmp_path / "env"),
        "LD_LIBRARY_PATH": "/opt/cray/libfabric/lib64",  # the host's, after module load
        "PYTHONPATH": "/host/site-packages",
        "RLVR_RUN_TOKEN": "tag-123",
        "RAY_ADDRESS": "10.0.0.1:6379",
        "SLURM_JOB_ID": "77",
        "HIP_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        "NCCL_SOCKET_IFNAME": "hsn0,hsn1,hsn2,hsn3",  # the site's environment
        "TMPDIR": "/tmp/job77",  # container.pass_environment
        "SINGULARITYENV_LD_LIBRARY_PATH": "/opt/cray/libs",  # what the site's bindings module sets
    }
    subprocess.run(command, env=host, check=True)
    given = dict(item.split("=", 1) for item in (tmp_path / "env").read_text().split("\0") if "=" in item)
    inside = {
        key.removeprefix("SINGULARITYENV_"): value for key, value in given.items() if key.startswith("SINGULARITYENV_")
    }
    passed = ("RLVR_RUN_TOKEN", "RAY_ADDRESS", "SLURM_JOB_ID", "HIP_VISIBLE_DEVICES", "NCCL_SOCKET_IFNAME", "TMPDIR")
    assert inside == {**{name: host[name] for name in passed}, "LD_LIBRARY_PATH": "/opt/cray/libs"}
    assert "--cleanenv" in command
