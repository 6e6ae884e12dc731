"""Makes each named wrong change to the analysis core (analysis/, measured/, study/model_shape.py), one
at a time, runs the tests that pin it, and prints whether they caught it (KILLED) or not (SURVIVED);
the source is restored after each (#47).

    .venv/bin/python benchmarks/analysis_mutations.py [tests/test_analysis_checks.py]

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
        'spec["site"]["hardware"].get("peak_tflops_bf16") if peak_tflops_bf16 == PEAK_OF_SPEC else peak_tflops_bf16',
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
]


def main() -> None:
    target = sys.argv[1] if len(sys.argv) > 1 else "tests/test_analysis_checks.py"
    for f, old, new, name in MUTATIONS:
        p = R / f
        src = p.read_text()
        if src.count(old) != 1:
            print(f"?? {name}: pattern found {src.count(old)} times")
            continue
        p.write_text(src.replace(old, new))
        try:
            r = subprocess.run(
                [PYTEST, "-q", "-x", "-p", "no:xdist", "-p", "no:cacheprovider", target],
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
        finally:
            p.write_text(src)
        line = [text for text in r.stdout.splitlines() if "FAILED" in text or "ERROR" in text][:1]
        print(("KILLED " if r.returncode else "SURVIVED ") + name, line[0][:110] if line else "")


if __name__ == "__main__":
    main()
