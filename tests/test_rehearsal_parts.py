"""The rehearsal's parts that need no cluster (tests/rehearsal): LUMI's site compressed and fitted to
the test cluster and nothing else changed, the reference's durations divided and its ratios kept,
the stand-in's published timings shaped so that the sweep selects the published workloads."""

from __future__ import annotations

import copy

import pytest
import yaml
from rlvr_scaling import paths

from tests.published_timings import MEMORY_GB, PROFILES, compressed, profile_of, step_records
from tests.rehearsal import compress

FACTOR = 200.0


def _lumi() -> dict:
    return yaml.safe_load((paths.CONFIG_DIR / "sites" / "lumi.yaml").read_text())


def test_the_site_is_lumis_with_every_duration_divided_and_only_the_stated_changes() -> None:
    lumi = _lumi()
    site = compress.site(lumi, FACTOR)
    assert site["slurm"]["max_walltime_minutes"] == 15  # 2880 / 200 = 14.4, whole minutes up
    assert site["slurm"]["preflight_minutes"] == compress.PREFLIGHT_MINUTES_AT_LEAST
    assert site["launch"]["stall_floor_minutes"] == pytest.approx(10 / FACTOR)
    assert site["launch"]["kind"] == "local" and site["container"] is None and "storage" not in site
    assert site["environment"]["GLOO_SOCKET_IFNAME"] == "lo"
    # Everything else is LUMI's, as written: hardware, partitions, accounts, billing, memory shares.
    untouched = copy.deepcopy(lumi)
    for key in ("container", "storage", "fabric"):
        untouched.pop(key, None)
    site_copy = copy.deepcopy(site)
    for key in ("container", "fabric"):
        site_copy.pop(key, None)
    for key in ("max_walltime_minutes", "preflight_minutes"):
        untouched["slurm"].pop(key), site_copy["slurm"].pop(key)
    for key in ("kind", "node_interface", "stall_floor_minutes", "poll_seconds", "join_timeout_seconds"):
        untouched["launch"].pop(key, None), site_copy["launch"].pop(key, None)
    for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        untouched["environment"].pop(key), site_copy["environment"].pop(key)
    assert site_copy == untouched
    assert set(compress.SITE_CHANGES) >= {"container", "storage", "launch.kind", "fabric", "environment"}


def test_the_reference_keeps_its_ratios_and_divides_its_seconds() -> None:
    published = yaml.safe_load((paths.CONFIG_DIR / "references" / "lumi-rlvr-blog.yaml").read_text())
    changed = compress.reference(published, FACTOR)
    by_id = {n["id"]: n for n in changed["numbers"]}
    assert by_id["gsm8k-strong-time-16"]["value"] == pytest.approx(72 / FACTOR)
    assert by_id["dapo-weak-growth-16"]["tolerance"]["absolute"] == pytest.approx(5.0 / FACTOR)
    assert by_id["gsm8k-weak-efficiency-16"]["value"] == 0.779  # a ratio: as published
    assert changed["relations"] == published["relations"]
    # Still a reference (the schema's), and it says it is the rehearsal's.
    from rlvr_scaling.study.reference import check_reference

    assert check_reference(changed, "the rehearsal") is changed
    assert changed["title"].endswith(f"(the rehearsal: its durations divided by {FACTOR:g})")


def test_the_study_overrides_divide_every_duration_it_estimates() -> None:
    config = yaml.safe_load(paths.DEFAULT_CONFIG.read_text())
    found = compress.study_overrides(config, FACTOR)
    assert found["estimate.startup_minutes"] == pytest.approx(15 / FACTOR)
    assert found["estimate.startup_minutes_per_doubling"] == pytest.approx(3 / FACTOR)
    assert found["estimate.min_time_limit_minutes"] == pytest.approx(10 / FACTOR)
    assert found["datasets.dapo_math.estimate.seconds_per_trajectory"] == pytest.approx(3.75 / FACTOR)


def _throughput(key: tuple[str, int, int]) -> float:
    return key[2] / sum(profile_of(key))  # tokens per trajectory are the dataset's: prompts / step


@pytest.mark.parametrize(
    ("dataset", "points", "chosen"), [("gsm8k", [25, 50, 100, 150], 100), ("dapo_math", [5, 10, 15], 10)]
)
def test_the_sweeps_timings_select_the_published_workload(dataset: str, points: list[int], chosen: int) -> None:
    """In increasing prompts, throughput per GPU grows up to the published point (by more than the 2%
    tolerance), and the next point is over the 0.98 x 64 GB memory cap: the sequential sweep stops there."""
    keys = [(dataset, 1, p) for p in points]
    rates = [_throughput(k) for k in keys]
    upto = points.index(chosen)
    assert all(rates[i + 1] > rates[i] * 1.02 for i in range(upto))
    assert MEMORY_GB.get(keys[upto + 1], 0) > 0.98 * 64 > max(MEMORY_GB.get(k, 59.0) for k in keys[: upto + 1])


def test_a_compressed_step_divides_its_times_and_keeps_its_tokens() -> None:
    [record] = step_records(("gsm8k", 16, 400), 1, 0, 3200, 128, 1024, 0.0, 0.0)
    shown = compressed(record, FACTOR, 128)
    assert shown["data"]["timing_s/step"] == pytest.approx(sum(PROFILES[("gsm8k", 16, 400)]) / FACTOR)
    assert shown["data"]["perf/total_num_tokens"] == record["data"]["perf/total_num_tokens"]
    assert shown["data"]["perf/throughput"] == pytest.approx(record["data"]["perf/throughput"] * FACTOR)
