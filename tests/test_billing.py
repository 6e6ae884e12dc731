"""What `plan` says the study costs in the site's own billing unit (site key `billing`, study/billing.py):
LUMI's GPU-hours per node-hour and its CPU build job's core-hours, as LUMI's billing page prices them."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from rlvr_scaling import cli
from rlvr_scaling.study.billing import Billing, build_charge
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import build_plan, known_runs

SMALL = Billing(unit="GPU-hours", per_node_hour=4, build_unit="CPU-core-hours", build_memory_slice_gb=2)


@pytest.mark.parametrize(
    ("cpus", "mem_mb", "minutes", "expected"),
    [
        (16, 200_000, 120, 98 * 2),  # 195.3 GiB / 2 GiB = 97.7 -> 98 slices beat 16 cores
        (16, 32 * 1024, 120, 16 * 2),  # exactly 16 slices of 2 GiB: a tie, 16 either way
        (16, 32 * 1024 + 1, 60, 17),  # one MiB more: a 17th slice
        (64, 2048, 90, 96),  # cores beat memory
    ],
)
def test_the_build_is_charged_by_cores_or_memory_slices_whichever_is_more(
    cpus: int, mem_mb: int, minutes: float, expected: float
) -> None:
    assert build_charge(SMALL, cpus, mem_mb, minutes) == pytest.approx(expected)


def test_without_a_build_unit_there_is_no_build_charge_and_cores_only_without_a_slice() -> None:
    assert build_charge(Billing(unit="GPU-hours", per_node_hour=4), 16, 200_000, 120) is None
    assert build_charge(Billing(build_unit="core-hours"), 16, 200_000, 120) == 32


def _plan_text(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", *args]) == 0
    return out.getvalue()


def test_lumi_plan_prices_its_totals_in_gpu_hours_and_its_build_in_core_hours() -> None:
    study = load_study(sets=["slurm_account=project_1"], site="lumi")
    node_hours = sum(run.node_hours for run in known_runs(build_plan(study)))
    text = _plan_text("--site", "lumi", "--set", "slurm_account=project_1")
    total = re.search(
        r"^Total: ([\d.]+) node-hours \((\d+) GPU-hours as the site bills them, 4 per node-hour", text, re.M
    )
    assert total, text
    assert float(total[1]) == pytest.approx(node_hours, abs=0.05)
    assert int(total[2]) == round(4 * node_hours)  # a module per GPU-hour: 4 per node, not 8 GCDs
    assert "billed at most 196 CPU-core-hours at its time limit" in text
    assert "Billing policy (docs/runjobs/lumi_env/billing.md)" in text


def test_a_site_without_billing_keeps_gpu_hours_as_gpus_times_node_hours() -> None:
    study = load_study(sets=["slurm_account=p"], site="nvidia-example")
    runs = known_runs(build_plan(study))
    gpu_hours = sum(run.node_hours * run.gpus_per_node for run in runs)
    text = _plan_text("--site", "nvidia-example", "--set", "slurm_account=p")
    assert f"({gpu_hours:.0f} GPU-hours) over the runs" in text
    assert "as the site bills them" not in text and "billed at most" not in text
