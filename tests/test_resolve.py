"""The image install resolves on the site's base before anything is built (inputs/resolve_check): the
exact install of containers/add-verl.sh, resolved by pip for the base's Python against the base's
package set seen as installed. Marker `resolve` (Python 3.12 and the package index); the unit checks
of the verdict need neither."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.inputs.base_packages import BasePackages, Verdict, kept_pattern, read_base_packages
from rlvr_scaling.inputs.kept_requirements import kept_requirements, requires_snapshot, write_requires
from rlvr_scaling.inputs.resolve_check import (
    judge,
    name_conflicts,
    pip_check_after,
    requirements_on,
    resolve_check,
    verdict_text,
)
from rlvr_scaling.study.config import load_study

from .conftest import REPO
from .study_edits import edited

LUMI_BASE = REPO / "containers" / "bases" / "lumi-multitorch-plus-u24r70f21m50t210-20260807_115122.txt"


def lumi_with(requirements: list[str] | None = None, extras: list[str] | None = None):
    container = {"requirements": requirements} if requirements is not None else {}
    if extras is not None:
        container["verl_extras"] = extras
    return edited(load_study(site="lumi"), site={"container": container})


def _numpy_1_base(folder: Path) -> Path:
    base = folder / "numpy-1" / LUMI_BASE.name
    base.parent.mkdir(parents=True)
    base.write_text(LUMI_BASE.read_text().replace("numpy==2.2.6", "numpy==1.26.4"))
    return base


def _snapshot_again(folder: Path) -> dict:
    base = folder / "snapshot" / LUMI_BASE.name
    base.parent.mkdir(parents=True)
    base.write_text(LUMI_BASE.read_text())
    return json.loads(write_requires(load_study(site="lumi"), base).read_text())["packages"]


# What each check asks of the package index (pip's dry runs, the snapshot made again), by the name a
# test's `resolve` marker gives it.
INDEX_CHECKS: dict[str, Callable[[Path], Any]] = {
    "lumi": lambda _: resolve_check(load_study(site="lumi")),
    "nvidia": lambda _: resolve_check(load_study(site="nvidia-example")),
    "bridge-pin": lambda _: resolve_check(lumi_with(["megatron-bridge==0.5.2", "mbridge"])),
    "megatron-extra": lambda _: resolve_check(lumi_with(extras=["megatron"])),
    "numpy-1": lambda folder: resolve_check(load_study(site="lumi"), _numpy_1_base(folder)),
    "bridge-cuda": lambda _: resolve_check(lumi_with(["megatron-bridge==0.6.2"])),
    "snapshot": _snapshot_again,
}


# Each check waits on the index for 20 s to 2 min and spends little CPU; one after another, and two
# workers' at once, they left both cores idle for minutes of `make test`. So the checks the session's
# tests need start together, once, on the one xdist worker (group package-index) that runs those tests.
@pytest.fixture(scope="module")
def index_checks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Future]:
    needed = {
        marker.args[0]
        for item in request.session.items
        if (marker := item.get_closest_marker("resolve")) is not None and marker.args
    }
    folder = tmp_path_factory.mktemp("index-checks")
    pool = ThreadPoolExecutor(max_workers=len(INDEX_CHECKS))
    checks = {name: pool.submit(INDEX_CHECKS[name], folder) for name in sorted(needed)}
    pool.shutdown(wait=False)
    return checks


@pytest.mark.resolve("lumi")
@pytest.mark.xdist_group("package-index")
def test_lumis_install_resolves_on_the_ai_factory_base_keeping_its_rocm_stack(index_checks: dict[str, Future]) -> None:
    verdict = index_checks["lumi"].result()
    assert verdict.ok, verdict.problems
    added = {a["name"]: a["version"] for a in verdict.adds}
    assert added["verl"] == "0.9.1" and added["mbridge"] == "0.15.1"
    assert verdict.kept["torch"] == "2.10.0+rocm7.0" and verdict.kept["numpy"] == "2.2.6"
    # Nothing the base keeps is replaced; nothing CUDA-side is added.
    assert not {u["name"] for u in verdict.upgrades} & set(verdict.kept)
    assert not any(name.startswith(("nvidia-", "cupy", "flashinfer")) for name in added)
    assert verdict.python == "3.12"


@pytest.mark.resolve("nvidia")
@pytest.mark.xdist_group("package-index")
def test_the_nvidia_example_install_resolves_on_verls_own_image(index_checks: dict[str, Future]) -> None:
    verdict = index_checks["nvidia"].result()
    assert verdict.ok, verdict.problems
    assert {a["name"]: a["version"] for a in verdict.adds}["verl"] == "0.9.1"
    assert verdict.kept["torch"] == "2.11.0" and verdict.kept["megatron-core"] == "0.18.0"


@pytest.mark.resolve("bridge-pin")
@pytest.mark.xdist_group("package-index")
def test_the_bridge_pin_verl_names_does_not_exist_on_the_index(index_checks: dict[str, Future]) -> None:
    verdict = index_checks["bridge-pin"].result()
    assert not verdict.ok
    assert any("No matching distribution found for megatron-bridge==0.5.2" in p for p in verdict.problems)


@pytest.mark.resolve("megatron-extra")
@pytest.mark.xdist_group("package-index")
def test_verls_megatron_extra_is_refused_for_wanting_another_torch(index_checks: dict[str, Future]) -> None:
    """verl[megatron] pins torch 2.11 (a CUDA build): the base's ROCm torch 2.10 is kept, so pip
    cannot resolve, and the conflict names torch."""
    verdict = index_checks["megatron-extra"].result()
    assert not verdict.ok
    assert any("torch" in p and "2.10.0+rocm7.0" in p for p in verdict.problems), verdict.problems


@pytest.mark.resolve("numpy-1")
@pytest.mark.xdist_group("package-index")
def test_a_base_with_numpy_1_is_refused_naming_numpy(index_checks: dict[str, Future]) -> None:
    """The ROCm Megatron-LM declares numpy<2; verl 0.9.1 needs numpy>=2. A base that kept numpy 1 fails."""
    verdict = index_checks["numpy-1"].result()
    assert not verdict.ok
    assert any("numpy" in p and "1.26.4" in p for p in verdict.problems), verdict.problems


@pytest.mark.resolve("bridge-cuda")
@pytest.mark.xdist_group("package-index")
def test_a_bridge_that_needs_a_cuda_build_is_named_with_who_asked_for_it(index_checks: dict[str, Future]) -> None:
    verdict = index_checks["bridge-cuda"].result()
    assert not verdict.ok
    [problem] = [p for p in verdict.problems if "fast-hadamard-transform" in p]
    assert "a build from source" in problem and "megatron-bridge==0.6.2" in problem


def _item(name: str, version: str, url: str) -> dict:
    return {"metadata": {"name": name, "version": version}, "download_info": {"url": url}}


def test_the_verdict_names_a_replaced_rocm_build_a_cuda_package_and_a_source_build() -> None:
    """The judgement of pip's report, on a report written here (no index needed)."""
    base = BasePackages(LUMI_BASE, (3, 12), {"torch": "2.10.0+rocm7.0", "transformers": "4.57.6", "numpy": "2.2.6"})
    kept = {"torch": "2.10.0+rocm7.0", "numpy": "2.2.6"}
    report = {
        "install": [
            _item("torch", "2.11.0", "https://files/torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
            _item("transformers", "5.10.4", "https://files/transformers-5.10.4-py3-none-any.whl"),
            _item("nvidia_nccl_cu13", "2.29.7", "https://files/nvidia_nccl_cu13-2.29.7-py3-none-manylinux.whl"),
            _item("fast-hadamard-transform", "1.1.0", "https://files/fast_hadamard_transform-1.1.0.tar.gz"),
            _item("some-extension", "0.1", "https://files/some_extension-0.1.tar.gz"),
            _item("antlr4-python3-runtime", "4.9.3", "https://files/antlr4-python3-runtime-4.9.3.tar.gz"),
            _item("mbridge", "0.15.1", "https://files/mbridge-0.15.1-py3-none-any.whl"),
        ]
    }
    verdict = Verdict(site="lumi", base=str(LUMI_BASE), python="3.12", requested=[], kept=kept)
    judge(report, base, kept, verdict)
    assert verdict.problems == [
        "fast-hadamard-transform 1.1.0: a CUDA-side package, which cannot sit on this ROCm base",
        "nvidia-nccl-cu13 2.29.7: a CUDA-side package, which cannot sit on this ROCm base",
        "some-extension 0.1: no wheel for Python 3.12, only a source archive to build "
        "(https://files/some_extension-0.1.tar.gz)",
        "torch: would replace the base's 2.10.0+rocm7.0 with 2.11.0 from the index",
    ]
    assert [u["name"] for u in verdict.upgrades] == ["torch", "transformers"]  # transformers: not kept, allowed
    assert {a["name"] for a in verdict.adds} == {
        "nvidia-nccl-cu13",
        "fast-hadamard-transform",
        "some-extension",
        "antlr4-python3-runtime",
        "mbridge",
    }
    # On a CUDA base the same NVIDIA package is no problem.
    cuda = BasePackages(LUMI_BASE, (3, 12), {"torch": "2.11.0"})
    cuda_verdict = Verdict(site="nvidia", base="", python="3.12", requested=[], kept={})
    judge({"install": [report["install"][2]]}, cuda, {}, cuda_verdict)
    assert cuda_verdict.ok


def test_what_the_base_keeps_is_add_verls_own_pattern() -> None:
    pattern = kept_pattern()
    assert all(
        pattern.match(f"{n}==")
        for n in ("torch", "vllm", "megatron-core", "transformer-engine", "numpy", "triton-rocm")
    )
    assert not any(pattern.match(f"{n}==") for n in ("transformers", "ray", "torchdata", "vllm-omni"))


def test_a_base_package_list_without_its_python_or_with_a_bad_line_is_refused(tmp_path: Path) -> None:
    listed = tmp_path / "base.txt"
    listed.write_text("torch==2.10.0\n")
    with pytest.raises(ConfigError, match=r"container.base_packages.*'# python X.Y'"):
        read_base_packages(listed)
    listed.write_text("# python 3.12.3\ntorch==2.10.0\nvllm>=0.22\n")
    with pytest.raises(ConfigError) as refused:
        read_base_packages(listed)
    assert "base.txt:3: vllm>=0.22" in str(refused.value) and "NAME==VERSION" in str(refused.value)
    listed.write_text("# python 3.12.3\nTorch==2.10.0  # a comment\nTransformer_Engine==2.8.0\nnumpy==2.2.6\n")
    base = read_base_packages(listed)
    assert base.python == (3, 12)
    assert base.versions == {"torch": "2.10.0", "transformer-engine": "2.8.0", "numpy": "2.2.6"}


def test_a_base_package_list_without_numpy_is_refused_before_any_resolve(tmp_path: Path) -> None:
    # pip would otherwise choose numpy for the base, and a base of numpy 1.x fails inside the build job.
    listed = tmp_path / "base.txt"
    listed.write_text("# python 3.12.3\ntorch==2.10.0+rocm7.0\nvllm==0.22.1\n")
    with pytest.raises(ConfigError) as refused:
        read_base_packages(listed)
    assert "container.base_packages" in str(refused.value) and "missing: numpy" in str(refused.value)
    # The shipped bases name both.
    for shipped in (REPO / "containers" / "bases").glob("*.txt"):
        assert {"torch", "numpy"} <= set(read_base_packages(shipped).versions)


@pytest.mark.resolve("lumi")
@pytest.mark.xdist_group("package-index")
def test_lumis_verdict_says_whether_vllm_accepts_the_transformers_verl_brings(index_checks: dict[str, Future]) -> None:
    """verl 0.9.1 needs transformers>=5.5.3,<5.11,!=5.6.0, so the base's 4.57.6 goes; the base's vLLM
    0.22.1 (its published requirements, the CUDA build's pieces dropped) accepts 5.10.4: it excludes
    only 5.0-5.5.0. Nothing else of what the base keeps is broken."""
    verdict = index_checks["lumi"].result()
    assert verdict.ok, verdict.problems
    [transformers] = [u for u in verdict.upgrades if u["name"] == "transformers"]
    assert (transformers["base"], transformers["new"]) == ("4.57.6", "5.10.4")
    assert "vllm transformers!=5.0.*" in transformers["kept_require"] and "(met)" in transformers["kept_require"]
    vllm = verdict.requirements["vllm"]
    assert vllm["published"] == "0.22.1" and vllm["url"].endswith("vllm-0.22.1-cp38-abi3-manylinux_2_28_x86_64.whl")
    assert len(vllm["sha256"]) == 64 and "torch==2.11.0" in vllm["dropped"]
    assert "no wheel on the index" in verdict.requirements["megatron-core"]["missing"]
    text = verdict_text(verdict)
    assert "transformers 4.57.6 -> 5.10.4 (kept packages require: vllm transformers!=" in text


@pytest.mark.resolve("snapshot")
@pytest.mark.xdist_group("package-index")
def test_the_requires_snapshot_is_what_the_index_publishes(index_checks: dict[str, Future]) -> None:
    """The checked-in snapshot, made again from the index: the same files and requirements."""
    made = index_checks["snapshot"].result()
    shipped = json.loads(requires_snapshot(LUMI_BASE).read_text())["packages"]
    assert made == shipped


def test_the_lumi_snapshot_records_where_each_kept_packages_requirements_came_from() -> None:
    snapshot = json.loads(requires_snapshot(LUMI_BASE).read_text())
    assert snapshot["command"] == "rlvr-scaling resolve-check --site lumi --write-requires"
    kept = {n: v for n, v in read_base_packages(LUMI_BASE).versions.items() if kept_pattern().match(f"{n}==")}
    assert {n: e["base_version"] for n, e in snapshot["packages"].items()} == kept
    vllm = snapshot["packages"]["vllm"]
    assert vllm["url"].startswith("https://files.pythonhosted.org/") and len(vllm["sha256"]) == 64
    assert any(line.startswith("transformers!=5.0.*") and ">=4.56.0" in line for line in vllm["requires_dist"])


FAKE_BASE = "# python 3.12.3\ntorch==2.10.0+rocm7.0\nvllm==0.22.1+site.gfx90a\ntransformers==4.57.6\nnumpy==2.2.6\n"


def _fake_snapshot(base: Path, vllm_lines: list[str]) -> None:
    packages = {
        "torch": {"base_version": "2.10.0+rocm7.0", "published": "2.10.0", "url": "https://files/torch.whl",
                  "sha256": "0" * 64, "requires_dist": ["filelock", "nvidia-nccl-cu12==2.27.5"]},
        "vllm": {"base_version": "0.22.1+site.gfx90a", "published": "0.22.1", "url": "https://files/vllm.whl",
                 "sha256": "1" * 64, "requires_dist": vllm_lines},
        "numpy": {"base_version": "2.2.6", "published": "2.2.6", "missing": "no wheel on the index (test)"},
    }  # fmt: skip
    requires_snapshot(base).write_text(json.dumps({"command": "make it", "packages": packages}))


def test_a_kept_packages_requirement_the_install_breaks_is_named_in_one_line(tmp_path: Path) -> None:
    """A fake base and fake metadata (no index): vLLM requires transformers<5, the install brings 5.10.4;
    the stubs carry vLLM's requirement without the CUDA build's pieces; pip check on what the install
    leaves finds the conflict, and the line names the kept package, its requirement, the version the
    install wants and what to do."""
    base_file = tmp_path / "base.txt"
    base_file.write_text(FAKE_BASE)
    _fake_snapshot(base_file, ["transformers<5,>=4.56.0", "torch==2.11.0", "flashinfer-python==0.6.11", "regex"])
    base = read_base_packages(base_file)
    kept = {"torch": "2.10.0+rocm7.0", "vllm": "0.22.1+site.gfx90a", "numpy": "2.2.6"}
    verdict = Verdict(site="fake", base=str(base_file), python="3.12", requested=[], kept=kept)
    requires = kept_requirements(requires_snapshot(base_file), base, kept, verdict)
    # On a ROCm base the CUDA wheel's torch pin, FlashInfer and NVIDIA libraries are dropped.
    assert requires == {"torch": ["filelock"], "vllm": ["transformers<5,>=4.56.0", "regex"], "numpy": []}
    assert verdict.requirements["vllm"]["dropped"] == ["torch==2.11.0", "flashinfer-python==0.6.11"]
    assert verdict.requirements["numpy"]["missing"] == "no wheel on the index (test)"
    report = {"install": [_item("transformers", "5.10.4", "https://files/transformers-5.10.4-py3-none-any.whl")]}
    report["install"][0]["metadata"]["requires_dist"] = ["regex"]
    judge(report, base, kept, verdict)
    conflicts = pip_check_after(sys.executable, tmp_path / "after", base, requires, report)
    assert conflicts == [("vllm", "0.22.1+site.gfx90a", "transformers<5,>=4.56.0", "transformers", "5.10.4")]
    tried = []

    def refuses(pin: str) -> tuple[bool, str]:
        tried.append(pin)
        return False, "verl 0.9.1 depends on transformers>=5.5.3"

    name_conflicts(conflicts, base, refuses, verdict)
    assert tried == ["transformers==4.57.6"]
    assert verdict.problems == [
        "vllm 0.22.1+site.gfx90a requires transformers<5,>=4.56.0, but the install brings transformers 5.10.4 "
        "and does not resolve with the base's 4.57.6 (verl 0.9.1 depends on transformers>=5.5.3): change the "
        "base or the install so that one transformers satisfies both"
    ]
    # Where the install accepts the base's version, the line says to keep it, and how.
    accepted = Verdict(site="fake", base=str(base_file), python="3.12", requested=[], kept=kept)
    name_conflicts(conflicts, base, lambda pin: (True, ""), accepted)
    assert accepted.problems[0].endswith(
        "(the base has 4.57.6): keep 4.57.6, add 'transformers==4.57.6' to container.requirements "
        "(the install resolves with it)"
    )
    requirements_on(verdict, requires, conflicts)
    assert verdict.upgrades[0]["kept_require"] == "vllm transformers<5,>=4.56.0 (broken)"


def test_a_snapshot_of_another_base_version_is_a_problem_not_silently_used(tmp_path: Path) -> None:
    base_file = tmp_path / "base.txt"
    base_file.write_text(FAKE_BASE.replace("vllm==0.22.1+site.gfx90a", "vllm==0.24.0"))
    _fake_snapshot(base_file, ["transformers<5"])
    base = read_base_packages(base_file)
    kept = {"vllm": "0.24.0"}
    verdict = Verdict(site="fake", base=str(base_file), python="3.12", requested=[], kept=kept)
    assert kept_requirements(requires_snapshot(base_file), base, kept, verdict) == {}
    assert verdict.problems == [
        "vllm: the snapshot base.requires.json records 0.22.1+site.gfx90a, the base list 0.24.0: remake it (make it)"
    ]


def _run_add_verl(tmp_path: Path, after_install: str) -> subprocess.CompletedProcess[str]:
    """containers/add-verl.sh with a fake python: `pip check` answers clean before the install and
    `after_install` after it."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        f'state="{tmp_path}"\n'
        'case "$*" in\n'
        '  *"pip list"*) printf "torch==2.10.0+rocm7.0\\nvllm==0.22.1\\ntransformers==4.57.6\\n" ;;\n'
        '  *"pip install"*) touch "$state/installed" ;;\n'
        '  *"pip check"*) if [ -e "$state/installed" ]; then printf "%s" "$AFTER"; [ -z "$AFTER" ] && '
        'echo "No broken requirements found." && exit 0; exit 1; fi; echo "No broken requirements found." ;;\n'
        "esac\n"
    )
    fake.chmod(0o755)
    return subprocess.run(
        ["sh", str(REPO / "containers" / "add-verl.sh"), str(fake), str(tmp_path), "verl==0.9.1", "-"],
        capture_output=True,
        text=True,
        env={**os.environ, "AFTER": after_install},
        timeout=60,
    )


def test_add_verl_stops_on_a_pip_check_conflict_and_names_it(tmp_path: Path) -> None:
    conflict = "vllm 0.22.1 has requirement transformers<5, but you have transformers 5.10.4.\n"
    stopped = _run_add_verl(tmp_path, conflict)
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "the install left 1 conflicts" in stopped.stdout
    assert f"  conflict: {conflict}" in stopped.stdout
    assert not (tmp_path / "rlvr-scaling-pip-freeze.txt").exists()


def test_add_verl_goes_on_when_pip_check_is_clean(tmp_path: Path) -> None:
    clean = _run_add_verl(tmp_path, "")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "conflict" not in clean.stdout and (tmp_path / "rlvr-scaling-pip-freeze.txt").exists()
