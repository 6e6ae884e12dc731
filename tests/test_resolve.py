"""The image install resolves on the site's base before anything is built (inputs/resolve_check): the
exact install of containers/add-verl.sh, resolved by pip for the base's Python against the base's
package set seen as installed. Marker `resolve` (Python 3.12 and the package index); the unit checks
of the verdict need neither."""

from __future__ import annotations

from pathlib import Path

import pytest
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.inputs.resolve_check import (
    BasePackages,
    Verdict,
    judge,
    kept_pattern,
    read_base_packages,
    resolve_check,
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


@pytest.mark.resolve
def test_lumis_install_resolves_on_the_ai_factory_base_keeping_its_rocm_stack() -> None:
    verdict = resolve_check(load_study(site="lumi"))
    assert verdict.ok, verdict.problems
    added = {a["name"]: a["version"] for a in verdict.adds}
    assert added["verl"] == "0.9.1" and added["mbridge"] == "0.15.1"
    assert verdict.kept["torch"] == "2.10.0+rocm7.0" and verdict.kept["numpy"] == "2.2.6"
    # Nothing the base keeps is replaced; nothing CUDA-side is added.
    assert not {u["name"] for u in verdict.upgrades} & set(verdict.kept)
    assert not any(name.startswith(("nvidia-", "cupy", "flashinfer")) for name in added)
    assert verdict.python == "3.12"


@pytest.mark.resolve
def test_the_nvidia_example_install_resolves_on_verls_own_image() -> None:
    verdict = resolve_check(load_study(site="nvidia-example"))
    assert verdict.ok, verdict.problems
    assert {a["name"]: a["version"] for a in verdict.adds}["verl"] == "0.9.1"
    assert verdict.kept["torch"] == "2.11.0" and verdict.kept["megatron-core"] == "0.18.0"


@pytest.mark.resolve
def test_the_bridge_pin_verl_names_does_not_exist_on_the_index() -> None:
    verdict = resolve_check(lumi_with(["megatron-bridge==0.5.2", "mbridge"]))
    assert not verdict.ok
    assert any("No matching distribution found for megatron-bridge==0.5.2" in p for p in verdict.problems)


@pytest.mark.resolve
def test_verls_megatron_extra_is_refused_for_wanting_another_torch() -> None:
    """verl[megatron] pins torch 2.11 (a CUDA build): the base's ROCm torch 2.10 is kept, so pip
    cannot resolve, and the conflict names torch."""
    verdict = resolve_check(lumi_with(extras=["megatron"]))
    assert not verdict.ok
    assert any("torch" in p and "2.10.0+rocm7.0" in p for p in verdict.problems), verdict.problems


@pytest.mark.resolve
def test_a_base_with_numpy_1_is_refused_naming_numpy(tmp_path: Path) -> None:
    """The ROCm Megatron-LM declares numpy<2; verl 0.9.1 needs numpy>=2. A base that kept numpy 1 fails."""
    base = tmp_path / "base.txt"
    base.write_text(LUMI_BASE.read_text().replace("numpy==2.2.6", "numpy==1.26.4"))
    verdict = resolve_check(load_study(site="lumi"), base)
    assert not verdict.ok
    assert any("numpy" in p and "1.26.4" in p for p in verdict.problems), verdict.problems


@pytest.mark.resolve
def test_a_bridge_that_needs_a_cuda_build_is_named_with_who_asked_for_it() -> None:
    verdict = resolve_check(lumi_with(["megatron-bridge==0.6.2"]))
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
