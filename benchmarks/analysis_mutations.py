"""Makes each named wrong change to the analysis core (analysis/, measured/, study/model_shape.py), one
at a time, runs the tests that pin it, and prints whether they caught it (KILLED) or not (SURVIVED);
the source is restored after each (#47).

    .venv/bin/python benchmarks/analysis_mutations.py [TEST_FILE ...]   (default: tests/test_analysis_checks.py)

A mutation whose text is no longer in its file is reported with "??": the code moved, update the list.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
R = ROOT / "workflow" / "rlvr_scaling"
PYTEST = str(pathlib.Path(sys.executable).with_name("pytest"))
MUTATIONS = [
    (
        "analysis/per_run/summary.py",
        'longest <= run["max_response_length"]',
        'longest < run["max_response_length"]',
        "cap boundary",
    ),
    (
        "analysis/per_run/summary.py",
        'finite_values(steps, "response_length/max")',
        'finite_values(steps, "response_length/mean")',
        "cap wrong key",
    ),
    (
        "measured/metrics.py",
        'if path.suffix == ".jsonl" or head == b"{":',
        'if path.suffix == ".jsonl":',
        "sniff jsonl",
    ),
    (
        "measured/metrics.py",
        'read_console(path.read_text(errors="replace"))',
        "read_console(path.read_text())",
        "console utf8",
    ),
    ("analysis/per_run/summary.py", '        source = run_dir / "console.log"\n', "        pass\n", "console fallback"),
    (
        "measured/metrics.py",
        'sum(float(s.get(f"timing_s/{p}", 0.0)) for p in PHASES)',
        'sum(float(s.get(f"timing_s/{p}", 1.0)) for p in PHASES)',
        "missing phase in other",
    ),
    (
        "measured/metrics.py",
        'is_positive_finite(s.get(f"timing_s/{p}", 1.0)) for p in PHASES',
        'is_positive_finite(s.get(f"timing_s/{p}")) for p in PHASES',
        "missing phase step dropped",
    ),
    (
        "analysis/across_runs/scaling.py",
        'e / total if total else float("nan")',
        "e / total if total else 0.0",
        "zero extra share",
    ),
    (
        "analysis/across_runs/engine_fill.py",
        "if extra > 0 else None",
        "if extra >= 0 else None",
        "engine fill zero extra",
    ),
    ("analysis/across_runs/selection.py", "if stop is None or not skipped:", "if stop is None:", "stop without skip"),
    (
        "analysis/across_runs/selection.py",
        'if high["prompts"] > low["prompts"]',
        'if high["prompts"] < low["prompts"]',
        "contradiction direction",
    ),
    (
        "analysis/across_runs/selection.py",
        "elif peak is not None and peak > cap_gb:",
        "elif peak is not None and peak >= cap_gb:",
        "cap boundary selection",
    ),
    (
        "analysis/across_runs/selection.py",
        'fits = [p for p in points if not p["over_cap"] and p["peak_memory_gb"] is not None]',
        'fits = [p for p in points if p["peak_memory_gb"] is not None]',
        "over cap reported fitting",
    ),
    (
        "analysis/per_run/summary.py",
        "parts[0][0] + parts[1][0] > 0",
        "parts[0][0] + parts[1][0] >= 0",
        "zero trajectory guard",
    ),
    (
        "analysis/per_run/summary.py",
        'measured_steps = [s for s in steps if s["step"] > warmup]',
        'measured_steps = [s for s in steps if s["step"] >= warmup]',
        "mfu warmup boundary",
    ),
    (
        "analysis/per_run/summary.py",
        'spec["site"]["hardware"].get("peak_tflops_bf16") if isinstance(peak_tflops_bf16, str) else peak_tflops_bf16',
        'spec["site"]["hardware"].get("peak_tflops_bf16")',
        "mfu peak chosen",
    ),
    (
        "study/model_shape.py",
        "return 2 * self.matmul_params() * tokens + attention",
        "return 2 * self.layer_matmul_params() * tokens + attention",
        "mfu shape output layer",
    ),
    ("analysis/per_run/summary.py", 'model.get("shape"),', "None,", "mfu shape from job"),
    ("analysis/per_run/energy_use.py", "    steps = last - first\n", "    steps = last - first + 1\n", "energy steps"),
    (
        "analysis/per_run/energy_use.py",
        '"joules_per_trajectory": per_node * nodes / trajectories',
        '"joules_per_trajectory": per_node / trajectories',
        "energy per trajectory",
    ),
    (
        "analysis/per_run/energy_use.py",
        'or last <= first or spent["node"] <= 0',
        'or last < first or spent["node"] < 0',
        "energy guards",
    ),
    (
        "measured/metrics.py",
        "abs(reported - ours) / ours > CROSS_CHECK_TOLERANCE",
        "abs(reported - ours) / ours >= CROSS_CHECK_TOLERANCE",
        "cross-check boundary",
    ),
    (
        "measured/metrics.py",
        "abs(reported - ours) / ours > CROSS_CHECK_TOLERANCE",
        "abs(reported - ours) / reported > CROSS_CHECK_TOLERANCE",
        "cross-check direction",
    ),
    (
        "analysis/per_run/summary.py",
        '"metrics_file": source.name',
        '"metrics_file": "metrics.jsonl"',
        "provenance file",
    ),
    (
        "analysis/per_run/summary.py",
        '        "slurm_job_id": job.get("slurm_job_id"),\n        "container"',
        '        "slurm_job_id": None,\n        "container"',
        "provenance job id",
    ),
    (
        "analysis/per_run/summary.py",
        'failure = "; ".join(job.get("problems") or [])',
        'failure = ", ".join(job.get("problems") or [])',
        "failure text",
    ),
    ("analysis/per_run/summary.py", "valid=all(c.passed for c in checks),", "valid=True,", "valid field"),
    # #55: the behaviours a mutation tool found no test for, one wrong change each (tests/test_core_pins.py).
    (
        "measured/metrics_file.py",
        "                if not is_positive_finite(value):",
        "                if not (is_finite(value) and value >= 0):",
        "required figure of 0 accepted",
    ),
    (
        "measured/metrics_file.py",
        "elif key.startswith(TIMING_PREFIXES) and not (is_finite(value) and value >= 0):",
        "elif key.startswith(TIMING_PREFIXES) and not is_finite(value):",
        "negative optional duration accepted",
    ),
    (
        "analysis/per_run/summary.py",
        'summarize_energy(job, run["nodes"], run["trajectories"])',
        'summarize_energy(job, 1, run["trajectories"])',
        "energy per node count",
    ),
    (
        "measured/console_log.py",
        "            if parsed is None:\n                continue",
        "            if parsed is None:\n                break",
        "console stops at an unparsed line",
    ),
    (
        "measured/metrics_file.py",
        "        if not raw.strip():\n            continue",
        "        if not raw.strip():\n            break",
        "blank line ends the file",
    ),
    (
        "measured/metrics_file.py",
        "abs(value) <= MAX_MAGNITUDE",
        "abs(value) < MAX_MAGNITUDE",
        "1e15 refused",
    ),
    (
        "measured/metrics_file.py",
        """                problems.append(f"step {record['step']}: {key} missing")""",
        "                pass",
        "missing required key unnamed",
    ),
    (
        "analysis/across_runs/selection.py",
        "'the best' if chosen['throughput_per_gpu'] == best else",
        "'the best' if chosen['throughput_per_gpu'] != best else",
        "selection reason swapped",
    ),
    (
        "study/plan.py",
        '("name", "source", "revision", "max_context")',
        '("name", "source", "max_context")',
        "model revision not in run ids",
    ),
]


def main() -> None:
    targets = sys.argv[1:] or ["tests/test_analysis_checks.py"]
    killed = 0
    for f, old, new, name in MUTATIONS:
        p = R / f
        src = p.read_text()
        if src.count(old) != 1:
            print(f"?? {name}: pattern found {src.count(old)} times")
            continue
        p.write_text(src.replace(old, new))
        try:
            r = subprocess.run(
                [PYTEST, "-q", "-x", "-p", "no:xdist", "-p", "no:cacheprovider", *targets],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
        finally:
            p.write_text(src)
        line = [text for text in r.stdout.splitlines() if "FAILED" in text or "ERROR" in text][:1]
        print(("KILLED " if r.returncode else "SURVIVED ") + name, line[0][:110] if line else "")
        killed += bool(r.returncode)
    print(f"{killed} of {len(MUTATIONS)} wrong changes killed by {' '.join(targets)}")


if __name__ == "__main__":
    main()
