"""The local engine end to end: the real verl trainer on CPU, through Snakemake, with its faults."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
from matplotlib import image
from rlvr_scaling.measured.console_log import read_console
from rlvr_scaling.measured.metrics_file import REQUIRED_STEP_KEYS, read_metrics_jsonl
from rlvr_scaling.paths import WORKFLOW_PARTS
from rlvr_scaling.publish.archive import read_archive
from rlvr_scaling.study.config import load_study

from .conftest import PYTHON
from .workflow_helpers import assert_no_run_processes, snakemake

# The local study's model folder (one per model: results/models/<site>/<name>-<digest>).
MODEL = f"results/models/local/{load_study(site='local').model_folder}"

# One test worker runs these in order: the shared study comes first, the test that changes it last.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("local-engine")]
STEPS = 11  # algorithm.steps of the local site (config/sites/local.yaml)
WARMUP = 1
SWEEPS = {"gsm8k": (2, 4), "dapo_math": (1, 2)}  # the local site's sweeps
RUN_FILES = ("spec.json", "command.sh", "metrics.jsonl", "console.log", "job.json")


def check_run_directory(run_dir: Path, steps: int) -> None:
    for name in RUN_FILES:
        assert (run_dir / name).is_file(), f"{run_dir.name} lacks {name}"
    records, problems = read_metrics_jsonl(run_dir / "metrics.jsonl")
    assert not problems
    assert [r["step"] for r in records] == list(range(1, steps + 1))
    for record in records:
        for key in REQUIRED_STEP_KEYS:
            value = record[key]
            assert isinstance(value, int | float) and math.isfinite(value) and value > 0, (run_dir.name, key, value)
    job = json.loads((run_dir / "job.json").read_text())
    assert job["status"] == "succeeded" and job["exit_status"] == 0
    assert job["versions"]["verl"] == "0.9.1" and job["versions"]["torch"].startswith("2.13.0")
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["run"]["run_id"] == run_dir.name

    # The console reader (the fallback for runs without the file logger) reads the same numbers from
    # this run's real console output as the file logger wrote.
    console_steps, _ = read_console((run_dir / "console.log").read_text(errors="replace"))
    assert [s["step"] for s in console_steps] == [r["step"] for r in records]
    for from_console, from_file in zip(console_steps, records, strict=True):
        for key in REQUIRED_STEP_KEYS:
            assert math.isclose(from_console[key], from_file[key], rel_tol=1e-6), (run_dir.name, key)

    # verl's own throughput is the pipeline's: tokens / step time / GPUs of the run.
    gpus = spec["run"]["nodes"] * spec["run"]["gpus_per_node"]
    for record in records:
        ours = record["perf/total_num_tokens"] / record["timing_s/step"] / gpus
        assert math.isclose(record["perf/throughput"], ours, rel_tol=1e-3), (run_dir.name, record["step"])


def measured_throughput(run_dir: Path) -> list[float]:
    """Throughput per GPU of the measured steps, straight from the run's metrics (not the pipeline's code)."""
    spec = json.loads((run_dir / "spec.json").read_text())
    gpus = spec["run"]["nodes"] * spec["run"]["gpus_per_node"]
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [
        r["data"]["perf/total_num_tokens"] / r["data"]["timing_s/step"] / gpus for r in records if r["step"] > WARMUP
    ]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path) as handle:
        return list(csv.DictReader(handle))


def check_image(path: Path) -> None:
    pixels = image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 200, (path.name, pixels.shape)
    assert float(pixels.std()) > 0.01, f"{path.name} is blank"


def test_reduced_local_study_end_to_end(local_study: Path) -> None:
    """The study `make demo` runs (the default config on the local site, both datasets), run once for
    the session by the `local_study` fixture (tests/conftest.py)."""
    workdir = local_study
    results = workdir / "results"
    # Every output went to the results root outside the working directory: what is left here is the
    # workflow's own links, Snakemake's bookkeeping and the link to the results.
    scratch = workdir.parent / f"{workdir.name}-scratch" / "results"
    assert results.is_symlink() and results.resolve() == scratch.resolve()
    assert {p.name for p in workdir.iterdir()} == {*WORKFLOW_PARTS, ".snakemake", "results"}
    assert (scratch / "bundle").is_dir() and (scratch / "logs").is_dir() and (scratch / "models").is_dir()
    runs = {p.name: p for p in (results / "runs").iterdir()}
    chosen = {}
    expected = set()
    for dataset, sweep in SWEEPS.items():
        selection = json.loads((results / "selection" / f"{dataset}.json").read_text())
        chosen[dataset] = c = selection["selected"]["prompts"]
        assert c in sweep
        # the sweep's points at 1 node; weak n2 = strong reference n2; strong n1 at the reference's
        # prompts (the shape of a sweep point when the first is chosen)
        expected |= {*(f"{dataset}-n1-p{p}" for p in sweep), f"{dataset}-n2-p{2 * c}", f"{dataset}-n1-p{2 * c}"}
    assert {name.rsplit("-", 1)[0] for name in runs} == expected, sorted(runs)
    # 4 a dataset: the 1-node strong run is another run than the sweep point of its shape (it keeps
    # the reference's concurrency per engine: tests/test_plan.py), so the two names above can be one.
    assert len(runs) == 8, sorted(runs)
    for run_dir in runs.values():
        check_run_directory(run_dir, steps=STEPS)
        job = json.loads((run_dir / "job.json").read_text())
        assert job["trainer"] == "verl.trainer.main_ppo"
        # The shape of the tiny model the run loaded, recorded for MFU; the local site has no peak
        # (a CPU has no BF16 peak that fits), so MFU is not measured and the summary says why.
        tiny = json.loads((results.parent / MODEL / "config.json").read_text())
        assert job["model"]["shape"]["num_hidden_layers"] == tiny["num_hidden_layers"]
        mfu = json.loads((results / "summaries" / f"{run_dir.name}.json").read_text())["summary"]["mfu"]
        assert mfu["not_measured"] == "the site file gives no hardware.peak_tflops_bf16" and mfu["by_phase"] == {}
        # The engine hooks ran in verl's own processes: the rollout server's sleep and wake, each with
        # what the device API says (on CPU: that there is none); no GPU-to-CPU table, no binding.
        memory = job["engine"]["rollout_memory"]
        assert {e["event"] for e in memory} == {"sleep", "wake_up"}, memory
        assert all(e["server"] == "HFGenerationServer" and "no GPU" in e["before"] for e in memory)
        assert job["engine"]["cpu_affinity"] == []
    two_node = next(r for name, r in runs.items() if "-n2-" in name)
    assert json.loads((two_node / "job.json").read_text())["workers"] == 2
    assert_no_run_processes()

    # Tables against numbers computed here from the runs' own metrics.
    def run_of(dataset: str, series: str, nodes: int, prompts: int) -> Path:
        # By what the run is, from its own spec: a strong and a sweep run can share nodes and prompts.
        found = [
            r
            for r in runs.values()
            if (
                lambda run: (
                    run["dataset"] == dataset
                    and series in run["series"]
                    and (run["nodes"], run["prompts"]) == (nodes, prompts)
                )
            )(json.loads((r / "spec.json").read_text())["run"])
        ]
        assert len(found) == 1, (dataset, series, nodes, prompts, found)
        return found[0]

    weak = read_csv(results / "tables" / "weak_scaling.csv")
    # Datasets by name, nodes in increasing order (analysis/results_io.reading_order).
    assert [(r["dataset"], int(r["nodes"])) for r in weak] == [(d, n) for d in sorted(SWEEPS) for n in (1, 2)]
    for dataset, c in chosen.items():
        # the one-node weak run is the selected sweep point (its spec was written before the selection)
        thr = {n: measured_throughput(run_of(dataset, "sweep" if n == 1 else "weak", n, c * n)) for n in (1, 2)}
        for row in (r for r in weak if r["dataset"] == dataset):
            nodes = int(row["nodes"])
            assert len(thr[nodes]) == STEPS - WARMUP
            assert float(row["throughput_per_gpu"]) == pytest.approx(statistics.mean(thr[nodes]), rel=1e-9)
            assert float(row["throughput_per_gpu_std"]) == pytest.approx(statistics.stdev(thr[nodes]), rel=1e-9)
            efficiency = statistics.mean(thr[nodes]) / statistics.mean(thr[1])
            assert float(row["efficiency"]) == pytest.approx(efficiency, rel=1e-9)
            low, high = float(row["throughput_per_gpu_ci_low"]), float(row["throughput_per_gpu_ci_high"])
            assert low < float(row["throughput_per_gpu"]) < high
    strong = read_csv(results / "tables" / "strong_scaling.csv")
    assert [(r["dataset"], int(r["nodes"])) for r in strong] == [(d, n) for d in sorted(SWEEPS) for n in (1, 2)]
    for dataset, c in chosen.items():
        rows = [r for r in strong if r["dataset"] == dataset]
        times = {}
        for row in rows:  # the strong runs are named by the table; their series and sizes are checked here
            spec = json.loads((runs[row["run_id"]] / "spec.json").read_text())["run"]
            assert "strong" in spec["series"] and spec["prompts"] == 2 * c and spec["nodes"] == int(row["nodes"])
            records = [json.loads(x) for x in (runs[row["run_id"]] / "metrics.jsonl").read_text().splitlines()]
            times[spec["nodes"]] = [r["data"]["timing_s/step"] for r in records if r["step"] > WARMUP]
        for row in rows:
            nodes = int(row["nodes"])
            speedup = statistics.mean(times[2]) / statistics.mean(times[nodes])
            assert float(row["step_time_s"]) == pytest.approx(statistics.mean(times[nodes]), rel=1e-9)
            assert float(row["speedup"]) == pytest.approx(speedup, rel=1e-9)
            assert float(row["ideal_speedup"]) == nodes / 2
            assert float(row["efficiency"]) == pytest.approx(speedup / (nodes / 2), rel=1e-9)
            assert float(row["step_time_ci_low_s"]) < float(row["step_time_s"]) < float(row["step_time_ci_high_s"])
    # Start-up and tear-down, measured: the launcher saw every run's first and last step logged.
    overhead = read_csv(results / "tables" / "overhead.csv")
    assert {r["run_id"] for r in overhead} == set(runs)
    for row in overhead:
        clock = json.loads((runs[row["run_id"]] / "job.json").read_text())["step_clock"]
        assert (clock["first_step"], clock["last_step"]) == (1, STEPS)
        wall, startup, steps_s, teardown = (float(row[k]) for k in ("wall_s", "startup_s", "steps_s", "teardown_s"))
        # verl starting its processes takes longer than its steps here; the parts fit in the run's time
        # (to the clock's second and its one-second look).
        assert startup > 0 and teardown >= 0 and steps_s > 0 and startup + steps_s + teardown <= wall + 3
        assert float(row["outside_steps_share"]) == pytest.approx((wall - steps_s) / wall)
    sweep = read_csv(results / "tables" / "sweep.csv")
    assert {(r["dataset"], int(r["prompts"])): r["selected"] == "True" for r in sweep} == {
        (d, p): p == chosen[d] for d, points in SWEEPS.items() for p in points
    }
    for row in sweep:
        own = measured_throughput(run_of(row["dataset"], "sweep", 1, int(row["prompts"])))
        assert float(row["throughput_per_gpu"]) == pytest.approx(statistics.mean(own), rel=1e-9)

    # Every figure the captions name exists as a readable PNG and a PDF.
    captions = json.loads((results / "figures" / "captions.json").read_text())
    assert len(captions) == 7, sorted(captions)
    # Two node counts per series: too few for a scaling model, and the figure says so.
    assert (
        "Too few node counts for a model (three are needed): dapo_math weak, dapo_math strong, gsm8k weak, "
        "gsm8k strong" in captions["figure6_phase_models"]
    ), captions["figure6_phase_models"]
    for name in captions:
        check_image(results / "figures" / f"{name}.png")
        assert (results / "figures" / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"

    # The report holds every table and every figure with its caption, and the selection's reason.
    report = (results / "report" / "study.md").read_text()
    for table in (results / "tables").glob("*.md"):
        assert table.read_text() in report, table.name
    for name, caption in captions.items():
        assert f"{name}.png)" in report and caption in report, name
    for dataset in SWEEPS:
        assert json.loads((results / "selection" / f"{dataset}.json").read_text())["reason"] in report
    # Strong scaling halves the trajectories per engine from 1 to 2 nodes, down to the one-node
    # workload's: no run has fewer, so none is under-filled, and the report says so.
    assert "none is under-filled" in report.split("## Strong scaling: under-filled generation engines")[1]
    assert all(r["under_filled"] == "False" for r in strong)
    assert f"Outside their steps the {len(runs)} runs spent" in report
    # The toy study is not LUMI's: every published number is "not comparable", and the report says why.
    verdict = report.split("## Reproduction of the published study", 1)[1].split("\n## ", 1)[0]
    assert "not comparable of " in verdict and "site local, the reference's lumi" in verdict, verdict
    assert "model tiny-qwen3, the reference's Qwen/Qwen3-8B" in verdict, verdict
    assert {r["verdict"] for r in read_csv(results / "tables" / "reproduction.csv")} == {"not comparable"}
    # The study compared with itself (rlvr-scaling compare): the same at every point, nothing differs.
    compared = subprocess.run(
        [PYTHON, "-m", "rlvr_scaling", "compare", str(workdir), str(workdir), "--json"], capture_output=True, text=True
    )
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)["rows"]
    assert len(rows) == 8 and {r["verdict"] for r in rows} == {"same"}, rows  # 2 datasets x 2 series x 2 nodes
    energy_section = report.split("## Energy", 1)[1].split("\n## ", 1)[0]
    assert energy_section.strip() == "Not measured: the site names no energy counters (energy.source)."
    mfu_section = report.split("## Model FLOPs utilisation", 1)[1].split("\n## ", 1)[0]
    assert mfu_section.strip() == "Not measured: the site file gives no hardware.peak_tflops_bf16 (site local)."
    # Every run's cost, predicted (by the estimate, and by the other runs) against measured.
    cost = read_csv(results / "tables" / "cost.csv")
    assert {r["run_id"] for r in cost} == set(runs)
    for row in cost:
        assert float(row["measured_node_hours"]) > 0 and float(row["estimated_node_hours"]) > 0, row
        assert float(row["calibrated_node_hours"]) > 0, row
    assert f"Over the {len(runs)} runs that recorded their times, the site's estimate predicted" in report
    # The sweep was sequential: the second point ran once the first had been measured.
    for dataset in SWEEPS:
        assert f"The sequential sweep of {dataset} ran 2 of its 2 points" in report

    # The Snakemake HTML report carries every table and figure; once made, the bundle is packed again
    # with it (and nothing else is redone).
    snakemake(workdir, "--cores", "2", "--report", "results/report/workflow.html")
    html = (results / "report" / "workflow.html").read_text(errors="replace")
    for name in ("weak_scaling.md", "strong_scaling.md", "table1.md", "figure2_weak_efficiency.png", "study.md"):
        assert name in html, name
    assert _planned(workdir) == {"bundle": 1, "all": 1}
    snakemake(workdir, "--cores", "2")

    # The bundle, dated by its last run, holds every run's record and log, and verifies offline.
    [bundle] = (results / "bundle").rglob("*.tar.gz")
    ends = [json.loads((r / "job.json").read_text())["end"] for r in runs.values()]
    assert bundle.name == f"qwen3-8b-grpo-verl-local-{max(ends)[:10]}.tar.gz"
    _, members = read_archive(bundle)
    for run_id in runs:
        for name in RUN_FILES:
            assert f"results/runs/{run_id}/{name}" in members, (run_id, name)
        assert f"results/summaries/{run_id}.json" in members
    assert {f"results/tables/{t.name}" for t in (results / "tables").glob("[!.]*")} <= set(members)
    assert "results/report/workflow.html" in members
    assert {f"results/data/local/{d}/manifest.json" for d in SWEEPS} <= set(members)
    model = json.loads(members[f"{MODEL}/rlvr_manifest.json"])
    assert (
        model["files"]["model.safetensors"]["sha256"]
        == hashlib.sha256((results.parent / MODEL / "model.safetensors").read_bytes()).hexdigest()
    )
    # The demo's own check (`make demo` ends with it), on both datasets: it once failed on their order.
    verified = subprocess.run([PYTHON, "-m", "rlvr_scaling", "verify", str(bundle)], capture_output=True, text=True)
    assert verified.returncode == 0 and f"{len(runs)} summaries" in verified.stdout, verified.stdout + verified.stderr

    # Nothing is redone when nothing changed; a redone run brings only what depends on it.
    assert "Nothing to be done" in snakemake(workdir, "-n", "--cores", "2").stdout
    redo = f"results/runs/{run_of('gsm8k', 'weak', 2, 2 * chosen['gsm8k']).name}"
    plan = snakemake(workdir, "-n", "--cores", "2", "--forcerun", redo).stdout
    assert plan.count("rule run:") == 1 and redo in plan
    assert "rule selection" not in plan


def test_the_local_preflight_runs_no_engine_smoke_and_says_why(local_study: Path) -> None:
    """The local site runs no engine smoke (site engine_smoke: false): its first run costs what a smoke
    costs and proves more. The smoke with the real trainer: tests/test_apptainer.py (inside the image);
    its record and failure path with the stand-in: tests/test_preflight.py."""
    record = json.loads((local_study / "results" / "preflight" / "local.json").read_text())
    assert record["problems"] == []
    smoke = record["engine_smoke"]
    assert smoke["ran"] is False and "site 'local' runs no engine smoke" in smoke["reason"]
    assert "first run costs what a smoke costs" in smoke["reason"]
    assert not (local_study / "results" / "preflight" / "local-engine-smoke").exists()


def test_the_local_preflight_all_reduces_between_its_two_groups_and_every_run_records_its_transport(
    local_study: Path,
) -> None:
    """The demo's preflight runs the collective the LUMI preflight runs across two nodes, between the
    local runs' two groups of workers (Gloo over TCP, the site's fabric); and each real run's job.json
    names the transport its collectives used, read in verl's own workers (engines.hooks)."""
    collective = json.loads((local_study / "results" / "preflight" / "local.json").read_text())["collective"]
    assert collective["finished"] is True and collective["sums_right"] is True
    assert collective["ranks_per_node"] == {"group-0": 1, "group-1": 1}
    assert collective["bus_bandwidth_gb_per_s"] >= 0.01  # the local site's floor
    nodes = collective["transport"]["nodes"]
    assert {node: entry["transport"] for node, entry in nodes.items()} == {"group-0": "tcp", "group-1": "tcp"}
    assert all("TCP connections opened" in entry["evidence"] for entry in nodes.values())
    for job_file in (local_study / "results" / "runs").glob("*/job.json"):
        fabric = json.loads(job_file.read_text())["fabric"]
        assert fabric["backends"] and all("gloo" in backend for backend in fabric["backends"]), fabric
        assert {entry["transport"] for entry in fabric["nodes"].values()} == {"tcp"}, fabric
        assert fabric["valid_for_scaling"] is True, fabric


def test_an_imported_log_of_a_real_run_gives_the_runs_own_summary(local_study: Path, tmp_path: Path) -> None:
    results = local_study / "results"
    run_dir = next(p for p in (results / "runs").iterdir() if p.name.startswith("gsm8k-n2-"))
    run = json.loads((run_dir / "spec.json").read_text())["run"]
    own = json.loads((results / "summaries" / f"{run_dir.name}.json").read_text())
    [config] = (results / ".study").glob("config-*.json")
    shape = [f"--{key}={run[key.replace('-', '_')]}" for key in ("dataset", "nodes", "gpus-per-node", "prompts")]
    shape += [f"--max-response-length={run['max_response_length']}", "--series=weak", "--series=strong"]
    imported = {}
    for log in ("console.log", "metrics.jsonl"):
        root = tmp_path / log
        command = [PYTHON, "-m", "rlvr_scaling", "import", str(run_dir / log), "--config", str(config), *shape]
        done = subprocess.run([*command, "--root", str(root)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        [summary] = (root / "results" / "summaries").glob("*.json")
        imported[log] = json.loads(summary.read_text())
    # verl's file logger: the same numbers, so the same summary.
    # (but for the energy: an imported log brings no counters, the run here read none)
    figures = {k: v for k, v in imported["metrics.jsonl"]["summary"].items() if k != "energy"}
    assert figures == {k: v for k, v in own["summary"].items() if k != "energy"} and imported["metrics.jsonl"]["valid"]
    assert imported["metrics.jsonl"]["summary"]["energy"]["not_measured"].startswith("the run's job.json has no energy")
    # Its console: the numbers as printed, to their printed precision.
    console = imported["console.log"]
    # Every check the run's own summary made, but the fabric's: an imported log brings no record of
    # its collectives' transport, so it is not judged on one (summary.transport_check).
    judged = [(c["name"], c["passed"]) for c in own["checks"] if c["name"] != "fabric"]
    assert [c["name"] for c in own["checks"]][-1] == "fabric" and own["checks"][-1]["passed"]
    assert console["valid"] and [(c["name"], c["passed"]) for c in console["checks"]] == judged
    assert console["provenance"]["reader"] == "console" and console["provenance"]["imported"]["source"] == "console.log"
    for key in ("step_time_s", "throughput_per_gpu"):
        assert math.isclose(console["summary"][key]["mean"], own["summary"][key]["mean"], rel_tol=1e-6), key
    assert console["trajectories_per_engine"] == own["trajectories_per_engine"]
    assert sorted(console["series"]) == sorted(own["series"])


def _planned(workdir: Path, *overrides: str) -> dict[str, int]:
    """The jobs a run of the finished study would do, per rule, with these `overrides:` lines."""
    configfiles = []
    if overrides:
        extra = workdir.parent / f"{workdir.name}-overrides.yaml"
        extra.write_text("overrides:\n" + "".join(f"  {line}\n" for line in overrides))
        configfiles = ["--configfile", str(extra)]
    output = snakemake(workdir, "-n", "--cores", "2", *configfiles).stdout
    if "Job stats:" not in output:
        assert "Nothing to be done" in output, output[-2000:]
        return {}
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def test_a_changed_setting_reruns_exactly_the_steps_that_read_it(local_study: Path) -> None:
    workdir = local_study
    results = workdir / "results"
    # Both datasets: an index, a sweep step and a selection each; one set of tables, figures, report, bundle.
    downstream = {"index": 2, "tables": 1, "figures": 1, "report": 1, "bundle": 1, "all": 1}
    assert _planned(workdir) == {}
    # The time-limit margin: the bundle holds it; nothing else reads it, no run is redone.
    margin = _planned(workdir, "estimate.time_limit_factor: 4.0")
    assert margin == {"step_settings": 1, "bundle": 1, "all": 1}, margin
    # The selection rule: the selection and what is made from it (the scaling runs change only if the
    # selected workload does, which the checkpoint decides when it has run); not the preflight.
    # The sequential sweep's step after its first point reads the rule too.
    rule = _planned(workdir, "selection_rule.tolerance: 0.5")
    assert rule == {"step_settings": 2, "sweep_step": 2, "selection": 2, **downstream}, rule
    # The warm-up is the analysis's: every summary again, and no run. Before the selection (a
    # checkpoint) has run again, Snakemake can name only the sweep's summaries.
    sweep = len(json.loads((results / "selection" / "gsm8k.json").read_text())["points"])
    warmup = _planned(workdir, "algorithm.warmup_steps: 2")
    # Of a sequential sweep, only the first point's summary: the step after it is made again before
    # the sweep goes on to the next.
    steps = {"sweep_step": 2, "selection": 2}
    assert sweep == 2 and warmup == {"step_settings": 3, "summary": 2, **steps, **downstream}, warmup
    # An edited module: tests/test_workflow_reruns.py, on a study of its own with its own copy of the
    # package (this study's code is the repository's, which other tests' studies run at the same time).


def _status(workdir: Path, *configfiles: str) -> dict:
    command = [
        PYTHON,
        "-m",
        "rlvr_scaling",
        "status",
        "--json",
        *(["--configfile", *configfiles] if configfiles else []),
    ]
    return json.loads(subprocess.run(command, cwd=workdir, check=True, capture_output=True, text=True).stdout)


def test_status_says_which_runs_are_complete_stale_failed_missing_or_pending(local_study: Path) -> None:
    workdir = local_study
    results = workdir / "results"
    finished = _status(workdir)
    assert {o["state"] for o in finished["outputs"]} == {"complete"}
    # The study's runs: those of the current plan (results/runs may hold runs an earlier plan made).
    run_ids = sorted(o["name"] for o in finished["outputs"] if o["stage"] == "runs")
    assert set(run_ids) <= {p.name for p in (results / "runs").iterdir()} and len(run_ids) >= 4
    assert finished["stages"]["runs"]["complete"] == len(run_ids) and finished["stages"]["bundle"]["complete"] == 1

    sweep = {point["run_id"] for point in json.loads((results / "selection" / "gsm8k.json").read_text())["points"]}
    other_sweep = {p["run_id"] for p in json.loads((results / "selection" / "dapo_math.json").read_text())["points"]}
    failed = sorted(sweep)[0]
    aside = workdir.parent / f"{workdir.name}-aside"
    (results / "runs" / failed).rename(aside)
    note = results / "failed" / failed / "20260101T000000Z" / "FAILED.txt"
    note.parent.mkdir(parents=True)
    note.write_text("verl exited with status 1\n")
    # The dataset changed: every run made from it is stale. (A newer time stamp alone is not enough:
    # Snakemake compares the input's checksum with the one it recorded.)
    manifest = results / "data" / "local" / "gsm8k" / "manifest.json"
    original = manifest.read_bytes()
    manifest.write_bytes(original + b"\n")
    extra = workdir.parent / f"{workdir.name}-third-point.yaml"
    # Tolerance 1: the sweep goes on after 4 prompts whatever the CPU measured (a loaded CI machine
    # measured 4 prompts at half the throughput of 2, which stops a sweep there and skips 6).
    extra.write_text("overrides:\n  datasets.gsm8k.sweep: [2, 4, 6]\n  selection_rule.tolerance: 1.0\n")
    # As a grid sweep, Snakemake names every point; the study's own sequential sweep is below.
    grid = workdir.parent / f"{workdir.name}-grid.yaml"
    grid.write_text("overrides:\n  selection_rule.sweep_order: grid\n")
    try:
        found = _status(workdir, str(grid))
        states = {o["name"]: o for o in found["outputs"] if o["stage"] == "runs"}
        assert states[failed]["state"] == "failed" and "verl exited with status 1" in states[failed]["why"]
        # The sweep's runs are stale; the scaling runs wait for the selection, which is made again
        # from them first and may choose another workload.
        for name in set(run_ids) - {failed}:
            if not name.startswith("gsm8k-"):
                # The other dataset's data did not change: its sweep stands; its selection is made
                # again by the grid's rule, which its scaling runs wait for.
                if name in other_sweep:
                    assert states[name]["state"] == "complete", (name, states[name])
                else:
                    assert states[name]["state"] == "pending" and "selection of dapo_math" in states[name]["why"]
            elif name in sweep:
                assert states[name]["state"] == "stale" and states[name]["why"] == "updated input files", name
            else:
                assert states[name]["state"] == "pending" and "selection of gsm8k" in states[name]["why"], name
        assert found["stages"]["selection"]["stale"] == 2  # gsm8k's from its data, both by the grid's rule
        # Sequential, the failed run is the sweep's first point: the next waits for the step after it.
        assert failed == min(sweep, key=lambda name: int(name.split("-p")[1].split("-")[0]))
        sequential = {o["name"]: o for o in _status(workdir)["outputs"] if o["stage"] == "runs"}
        second = next(name for name in sweep if name != failed)
        assert sequential[second]["state"] == "pending" and "sequential sweep" in sequential[second]["why"]
        text = subprocess.run(
            [PYTHON, "-m", "rlvr_scaling", "status", "--configfile", str(grid)],
            cwd=workdir,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert failed in text and "verl exited with status 1" in text and "updated input files" in text
        # A new sweep point is a run the sequential sweep has not reached yet.
        states = {o["name"]: o for o in _status(workdir, str(extra))["outputs"] if o["stage"] == "runs"}
        third = next(name for name in states if name.startswith("gsm8k-n1-p6-"))
        assert states[third]["state"] == "pending" and "sequential sweep of gsm8k" in states[third]["why"]
        assert states[failed]["state"] == "failed"
    finally:
        manifest.write_bytes(original)
        shutil.rmtree(results / "failed" / failed)
        aside.rename(results / "runs" / failed)
    assert {o["state"] for o in _status(workdir)["outputs"]} == {"complete"}
