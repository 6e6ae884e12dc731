"""The plan: every run of the study, its identity, its verl arguments and its sbatch resources."""

from __future__ import annotations

import contextlib
import io
import json
import math
import signal
import subprocess
from pathlib import Path

import pytest
from rlvr_scaling import cli, paths
from rlvr_scaling.errors import ConfigError
from rlvr_scaling.plan_view import memory_table, plan_records, preflight_line
from rlvr_scaling.study.config import load_study
from rlvr_scaling.study.plan import RESOURCE_NAMES, PendingRun, Run, build_plan, known_runs

from .conftest import PYTHON, REPO
from .study_edits import edited

PUBLISHED = ["selection.gsm8k=100", "selection.dapo_math=10"]


def lumi_plan(sets: list[str] = ()) -> list:
    return build_plan(load_study(site="lumi", sets=list(sets)), root=Path("/study"))


def test_before_the_sweep_scaling_runs_are_pending() -> None:
    plan = lumi_plan()
    sweep = [r for r in plan if r.series == ["sweep"]]
    pending = [r for r in plan if isinstance(r, PendingRun)]
    assert len(sweep) == 9 and all(isinstance(r, Run) for r in sweep)
    assert all(r.pending and r.to_dict()["prompts"] is None and r.to_dict()["run_id"] is None for r in pending)
    # weak 1,2,4,8,16 and strong 1,2,8,16 (the 4-node strong run is the 4-node weak run) per dataset
    assert len(pending) == 18
    four = [r for r in pending if r.nodes == 4 and r.dataset == "gsm8k"]
    assert len(four) == 1 and sorted(four[0].series) == ["strong", "weak"]


def test_pinned_selection_gives_the_published_workloads() -> None:
    plan = lumi_plan(PUBLISHED)
    assert all(isinstance(r, Run) for r in plan)
    weak = {(r.dataset, r.nodes): r for r in plan if "weak" in r.series}
    strong = {(r.dataset, r.nodes): r for r in plan if "strong" in r.series}
    assert [weak["gsm8k", n].trajectories for n in (1, 2, 4, 8, 16)] == [800, 1600, 3200, 6400, 12800]
    assert [weak["dapo_math", n].trajectories for n in (1, 2, 4, 8, 16)] == [80, 160, 320, 640, 1280]
    assert {strong["gsm8k", n].prompts for n in (1, 2, 4, 8, 16)} == {400}
    assert {strong["dapo_math", n].prompts for n in (1, 2, 4, 8, 16)} == {40}
    assert weak["gsm8k", 4] is strong["gsm8k", 4]
    # trajectories per engine at 16 nodes (strong): 100 and 10, as in the study
    assert strong["gsm8k", 16].trajectories_per_engine == 100
    assert strong["dapo_math", 16].trajectories_per_engine == 10
    # concurrency matched to the selected one-node workload: 800 / 2 engines
    assert {r.concurrency for r in plan if r.dataset == "gsm8k"} == {400}
    assert len(plan) == 18


def test_selected_sweep_point_is_the_one_node_weak_run() -> None:
    study = load_study(site="lumi")
    sweep = {r.prompts: r.run_id for r in known_runs(build_plan(study, root=Path("/s"))) if r.dataset == "gsm8k"}
    selected = build_plan(study, selection={"gsm8k": 100}, root=Path("/s"))
    one = next(r for r in selected if r.dataset == "gsm8k" and r.nodes == 1 and "weak" in r.series)
    assert one.run_id == sweep[100]
    assert sorted(one.series) == ["sweep", "weak"]


def test_run_ids_depend_on_what_defines_a_run_only() -> None:
    base = {r.run_id for r in lumi_plan(PUBLISHED)}
    assert base == {r.run_id for r in build_plan(load_study(site="lumi", sets=PUBLISHED), root=Path("/elsewhere"))}
    # estimates and time limits are not part of a run's identity
    assert base == {r.run_id for r in lumi_plan([*PUBLISHED, "estimate.time_limit_factor=3"])}
    changed = {r.run_id for r in lumi_plan([*PUBLISHED, "datasets.gsm8k.memory.token_budget=12000"])}
    assert {i for i in base if i.startswith("dapo")} == {i for i in changed if i.startswith("dapo")}
    assert {i for i in base if i.startswith("gsm8k")}.isdisjoint(changed)


def test_a_datasets_revision_and_the_engines_concurrency_each_make_another_run() -> None:
    # Two runs that share an id share one result: anything that changes what is measured must change it.
    base = {r.run_id for r in lumi_plan(PUBLISHED)}
    revised = {r.run_id for r in lumi_plan([*PUBLISHED, "datasets.gsm8k.revision=0123abc"])}
    assert {i for i in base if i.startswith("dapo")} == {i for i in revised if i.startswith("dapo")}
    assert {i for i in base if i.startswith("gsm8k")}.isdisjoint(revised)
    # The local study with 2 prompts chosen: its 1-node strong run has the sweep's 4-prompt point's
    # shape (1 node, 4 prompts) but generates at the chosen workload's concurrency.
    plan = known_runs(build_plan(load_study(site="local"), selection={"gsm8k": 2}, root=Path("/s")))
    four = [r for r in plan if r.dataset == "gsm8k" and (r.nodes, r.prompts) == (1, 4)]
    by_series = {tuple(sorted(r.series)): r for r in four}
    sweep, strong = by_series[("sweep",)], by_series[("strong",)]
    assert (sweep.concurrency, strong.concurrency) == (4 * 8, 2 * 8)  # prompts x 8 responses, one engine
    assert sweep.run_id != strong.run_id


def test_verl_arguments_and_slurm_resources() -> None:
    run = next(r for r in lumi_plan(PUBLISHED) if r.dataset == "dapo_math" and r.nodes == 16)
    args = dict(a.split("=", 1) for a in run.verl_args)
    assert args["actor_rollout_ref.rollout.n"] == "8"
    assert args["trainer.nnodes"] == "16" and args["trainer.n_gpus_per_node"] == "8"
    assert args["data.max_response_length"] == "8192"
    assert args["actor_rollout_ref.actor.megatron.param_offload"] == "True"
    assert args["actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity"] == "full"
    assert args["data.train_files"] == "/study/results/data/lumi/dapo_math/train.parquet"
    assert run.resources["nodes"] == 16 and run.resources["slurm_extra"] == "--gpus-per-node=8"
    assert run.resources["slurm_partition"] == "standard-g" and run.resources["tasks_per_node"] == 2
    assert run.resources["cpus_per_task"] == 28 and tuple(run.resources) == RESOURCE_NAMES  # the rules' names
    # The estimate by hand: 16 nodes start in 15 + 3 x log2(16) = 27 min (config.yaml). The step is the
    # published one (config/references/lumi-rlvr-blog.yaml): weak, 3.75 s x 160 prompts x 8 / 16 nodes
    # = 300 s ideal, plus the published growth of 12.3 s from 1 to 16 nodes: 312.3 s, 20 steps 104.1 min;
    # strong, "DAPO-Math-17K decreases from 309 to 165 seconds": 165 s, 20 steps 55 min. A time limit of
    # three times the whole (estimate.time_limit_factor), rounded up.
    weak = "weak" in run.series
    assert run.prompts == (160 if weak else 40)
    minutes = 27 + (20 * 312.3 / 60 if weak else 20 * 165 / 60)
    assert run.resources["runtime"] == (394 if weak else 246) == math.ceil(3 * minutes)
    assert run.node_hours == pytest.approx(16 * minutes / 60, abs=0.001)
    assert run.estimate["step_source"].startswith("lumi-rlvr-blog: ")


def test_cli_plan_json(tmp_path: Path) -> None:
    result = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "plan", "--site", "lumi", "--json", *[f"--set={s}" for s in PUBLISHED]],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    plan = json.loads(result.stdout)
    required = {
        "run_id",
        "series",
        "dataset",
        "nodes",
        "gpus_per_node",
        "prompts",
        "responses_per_prompt",
        "trajectories",
        "max_response_length",
        "steps",
        "verl_args",
        "resources",
        "node_hours",
    }
    assert all(required <= set(entry) for entry in plan)
    assert len({e["run_id"] for e in plan}) == len(plan) == 18
    # Each run's memory budget, with the figures of the text table (plan_view.memory_table).
    assert all(entry["memory_budget"]["computed"] and entry["memory_budget"]["fits"] for entry in plan)
    budget = next(e for e in plan if e["dataset"] == "gsm8k" and e["nodes"] == 1)["memory_budget"]
    # A GCD of 64 GiB: 64 x 2**30 bytes; vLLM's 0.4 of it 27.49 GB; the cap 0.98 x 68.72 = 67.35 GB.
    assert (budget["gpu_memory"], budget["gpu_memory_unit"], budget["gpu_bytes"]) == (64, "GiB", 68_719_476_736)
    assert budget["rollout_share_gb"] == 27.49 and budget["cap_gb"] == 67.35 and budget["cap_fraction"] == 0.98
    study = load_study(site="lumi", sets=PUBLISHED)
    table = memory_table(study, build_plan(study, root=REPO), REPO)
    assert "a GPU of 64 GiB = 68.72 GB; cap 0.98 x 68.72 = 67.35 GB" in table[0]
    header = table[1].split()
    for entry in plan:
        row = dict(zip(header, next(line for line in table if line.startswith(entry["run_id"])).split(), strict=True))
        budget = entry["memory_budget"]
        shown = {
            "vllm": budget["rollout_share_gb"],
            "held": budget["rollout_in_training_gb"],
            "megatron": budget["megatron_state_gb"],
            "activ": budget["activations_gb"],
            "logits": budget["logits_gb"],
            "gen_peak": budget["generation_peak_gb"],
            "train_peak": budget["training_peak_gb"],
        }
        assert {column: float(row[column]) for column in shown} == shown, entry["run_id"]
        kv = f"{budget['kv_cache_tokens'] // 1000}k/{budget['kv_tokens_needed'] // 1000}k"
        assert row["kv/need"] == kv and row["fits"] == "yes"
    # The figures the table and the JSON share are the weights, gradients and optimizer state summed.
    assert budget["megatron_state_gb"] == round(
        budget["weights_gb"] + budget["gradients_gb"] + budget["optimizer_gb"], 2
    )


def test_plan_json_says_why_a_run_has_no_memory_budget(tmp_path: Path) -> None:
    lumi = load_study(site="lumi")  # no selection: the scaling runs wait for the sweep
    records = plan_records(lumi, build_plan(lumi, root=tmp_path), tmp_path)
    pending = [r["memory_budget"] for r in records if r["pending"]]
    assert pending and all(not b["computed"] and "sweep's selection" in b["reason"] for b in pending)
    assert all(r["memory_budget"]["computed"] for r in records if not r["pending"])
    local = load_study(site="local")
    records = plan_records(local, build_plan(local, root=tmp_path), tmp_path)
    budgets = [r["memory_budget"] for r in records if not r["pending"]]
    assert budgets and all(b == {"computed": False, "reason": budgets[0]["reason"]} for b in budgets)
    assert "CPU engine" in budgets[0]["reason"]
    # A GPU site without the model's shape: the reason names the missing config.json.
    unknown = edited(lumi, config={"model": {"name": "Org/Unshipped-1B"}})
    records = plan_records(
        unknown, build_plan(unknown, selection={"gsm8k": 100, "dapo_math": 10}, root=tmp_path), tmp_path
    )
    assert all(not r["memory_budget"]["computed"] for r in records)
    assert "no config.json for Org/Unshipped-1B" in records[0]["memory_budget"]["reason"]


def test_output_into_a_closed_pipe_ends_quietly() -> None:
    """`rlvr-scaling plan --json | head` used to end in a BrokenPipeError traceback."""
    command = [PYTHON, "-m", "rlvr_scaling", "plan", "--site", "lumi", "--json"]
    command += [a for s in PUBLISHED for a in ("--set", s)]  # ~70 kB of JSON: more than a pipe holds
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.read(100)
    process.stdout.close()
    errors = process.stderr.read().decode()
    assert process.wait(timeout=60) == 128 + signal.SIGPIPE, errors
    assert errors == ""


def test_each_dataset_has_its_own_generation_memory_share_and_lumi_runs_eager() -> None:
    study = load_study(site="lumi", sets=["selection.gsm8k=100", "selection.dapo_math=10"])
    plan = build_plan(study, {}, Path("."))
    shares = {run.dataset: next(a for a in run.verl_args if "rollout.gpu_memory_utilization=" in a) for run in plan}
    # LUMI's own shares (its vLLM keeps its memory while Megatron trains: config/sites/lumi.yaml)
    assert shares["gsm8k"].endswith("=0.4") and shares["dapo_math"].endswith("=0.6")
    assert all("actor_rollout_ref.rollout.enforce_eager=True" in run.verl_args for run in plan)


def test_a_run_over_the_partitions_walltime_is_an_error_not_a_silent_cap() -> None:
    study = load_study(site="lumi", sets=["algorithm.steps=400", "selection.dapo_math=10", "only_datasets=[dapo_math]"])
    with pytest.raises(ConfigError) as caught:
        build_plan(study, {}, Path("."))
    assert caught.value.key == "datasets.dapo_math.estimate.seconds_per_trajectory"
    assert "over site 'lumi''s longest job of 2880 min" in str(caught.value)


def test_start_up_grows_with_the_node_count_in_the_time_limit() -> None:
    study = load_study(site="lumi", sets=["selection.gsm8k=100", "selection.dapo_math=10"])
    runs = {(r.dataset, r.nodes, tuple(r.series)): r for r in build_plan(study, {}, Path("."))}
    one, sixteen = runs[("dapo_math", 1, ("weak",))], runs[("dapo_math", 16, ("weak",))]
    # Weak scaling: the same work per node. The start-up grows by 3 min per doubling x 4, and the 20
    # steps by the published 12.3 s each (lumi-rlvr-blog: "grows by only 12.3 seconds").
    assert sixteen.estimate["runtime_minutes"] - one.estimate["runtime_minutes"] == pytest.approx(12 + 20 * 12.3 / 60)
    assert sixteen.estimate["startup_minutes"] - one.estimate["startup_minutes"] == 12


def _run_ids(study) -> set[str]:
    plan = build_plan(study, selection={"gsm8k": 100, "dapo_math": 10}, root=Path("/s"))
    return {r.run_id for r in known_runs(plan)}


def test_run_ids_name_what_the_engine_image_is_made_of(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    study = load_study(site="lumi")
    base = _run_ids(study)
    container = study.require_container()
    for key, value in [
        ("requirements", [*container.requirements, "extra-package==1.0"]),
        ("base_image", container.base_image.replace("20260807", "20260901")),
        ("base_sha256", "0" * 64),
        ("verl_extras", ["verl-core", "vllm"]),
    ]:
        assert _run_ids(edited(study, site={"container": {key: value}})).isdisjoint(base), key
    # The definition and a lock file enter by their contents, not their paths: another clone of the
    # repository (another REPO_ROOT) names the same runs; an edited definition names new ones.
    clone = tmp_path / "clone"
    (clone / "containers").mkdir(parents=True)
    for part in (container.definition, "containers/add-verl.sh"):
        (clone / part).write_text((paths.REPO_ROOT / part).read_text())
    monkeypatch.setattr(paths, "REPO_ROOT", clone)
    assert _run_ids(load_study(site="lumi")) == base
    (clone / container.definition).write_text("# edited\n" + (clone / container.definition).read_text())
    assert _run_ids(load_study(site="lumi")).isdisjoint(base)


def test_a_site_without_an_image_has_no_image_in_its_run_identity() -> None:
    run = known_runs(build_plan(load_study(site="local"), root=Path("/s")))[0]
    assert run.identity["container_base"] is None and "container_image" not in run.identity


@pytest.mark.parametrize("variable", ["RLVR_SLURM_ACCOUNT", "SLURM_ACCOUNT", "SBATCH_ACCOUNT"])
def test_each_documented_account_variable_reaches_the_image_builds_job(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RLVR_SLURM_ACCOUNT", "SLURM_ACCOUNT", "SBATCH_ACCOUNT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "project_465000002")
    from rlvr_scaling.study.plan import build_resources

    job = build_resources(load_study(site="lumi"))
    assert job["slurm_account"] == "project_465000002"
    # No GPU, on LUMI-C's small: the build only unpacks, installs and packs.
    assert job["slurm_partition"] == "small" and job["slurm_extra"] == "" and job["nodes"] == 1


def test_plan_says_whether_the_base_image_is_on_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlvr_scaling.plan_view import build_line

    monkeypatch.setenv("RLVR_SLURM_ACCOUNT", "project_465000002")
    study = load_study(site="lumi")  # LUMI's AI Factory base is not on a test machine
    assert "is NOT on this machine: pull or copy it there" in build_line(study)
    here = tmp_path / "base.sif"
    here.write_bytes(b"sif")
    present = edited(study, site={"container": {"base_image": str(here)}})
    assert f"its base {here} is here" in build_line(present)


def test_plan_prints_the_smokes_run_and_node_hours_beside_the_studys(tmp_path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", "--site", "lumi", "--root", str(tmp_path), *[f"--set={s}" for s in PUBLISHED]]) == 0
    [line] = [text for text in out.getvalue().splitlines() if text.startswith("Preflight")]
    study = load_study(site="lumi", sets=PUBLISHED)
    plan = build_plan(study, root=tmp_path)
    # The smoke's run: the two-node DAPO run of the fewest prompts (tests/test_preflight.py: why that one).
    run = min((r for r in known_runs(plan) if r.dataset == "dapo_math" and r.nodes == 2), key=lambda r: r.prompts)
    # Its start-up on two nodes (one doubling) and two steps at its step estimate, on the preflight's two nodes.
    estimate = study.config.estimate
    minutes = estimate.startup_minutes + estimate.startup_minutes_per_doubling + 2 * run.estimate["step_seconds"] / 60
    study_hours = sum(r.node_hours for r in known_runs(plan))
    assert f"2 node(s), up to 70 min on small-g (at most {2 * 70 / 60:.2f} node-hours)" in line
    assert f"2 steps of {run.run_id} on 2 node(s)" in line and "Megatron DP 2" in line
    assert f"about {minutes:.0f} min, {2 * minutes / 60:.2f} node-hours of its 2 node(s)" in line
    assert f"beside the study's {study_hours:.1f}." in line
    # 70 minutes hold it even when the checks before it take their longest (half the limit); 40 do not.
    assert "raise slurm.preflight_minutes" not in line
    shorter = edited(study, site={"slurm": {"preflight_minutes": 40}})
    assert "raise slurm.preflight_minutes" in preflight_line(shorter, plan, tmp_path)
    # The collective on four nodes, as the hang's reproducer ran: the job asks for four, and its cost
    # in the line is four nodes' at the same time limit.
    four = edited(study, site={"fabric": {"collective_nodes": 4}})
    line = preflight_line(four, build_plan(four, root=tmp_path), tmp_path)
    assert (
        f"Preflight, before any run: 4 node(s), up to 70 min on small-g (at most {4 * 70 / 60:.2f} node-hours)" in line
    )
    from rlvr_scaling.plan_view import fabric_line

    across = fabric_line(four, build_plan(four, root=tmp_path)) or ""
    assert "collective across 4 nodes (8 new process groups in a row" in across
    assert "20 timed all-reduces of 1000 MB" in across and "at least 50 GB/s (0.5 x the 100 GB/s" in across
