"""Prints the size and file count of the login-node workflow environment (`make workflow-env`) beside
the local demo's full one, as installed and after use (Python writes bytecode for what it imports).
LUMI's quotas: home 20 GB and 100k files, project space 50 GB and 100k files.

    .venv/bin/python benchmarks/workflow_env.py [--workflow-venv .venv-workflow] [--full-venv .venv]

"After use" runs `rlvr-scaling plan --site lumi` and the LUMI dry run with the workflow environment.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from rlvr_scaling.paths import REPO_ROOT, link_workflow


def size_and_files(root: Path) -> tuple[float, int]:
    total, count = 0, 0
    for directory, subdirs, files in os.walk(root):
        count += len(files) + len(subdirs)
        for name in files:
            path = Path(directory, name)
            if not path.is_symlink():
                total += path.stat().st_size
    return total / 2**20, count


def use(venv: Path) -> None:
    env = {**os.environ, "RLVR_SLURM_ACCOUNT": "project_465000000", "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    # As on a cluster: this machine sets PYTHONDONTWRITEBYTECODE, which hides the bytecode's files.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "rlvr_scaling", "plan", "--site", "lumi"], env=env, check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as work:
        workdir = link_workflow(Path(work))
        (workdir / "lumi").symlink_to(REPO_ROOT / "lumi")
        env["RLVR_RESULTS_ROOT"] = str(workdir / "scratch-results")  # LUMI: /scratch/<account>/...
        snakemake = [str(venv / "bin" / "snakemake"), "--profile", "lumi", "-n"]
        subprocess.run(snakemake, cwd=workdir, env=env, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workflow-venv", type=Path, default=REPO_ROOT / ".venv-workflow")
    parser.add_argument("--full-venv", type=Path, default=REPO_ROOT / ".venv")
    args = parser.parse_args()
    for name, venv in (("workflow (login node)", args.workflow_venv), ("full (local demo)", args.full_venv)):
        if not venv.exists():
            print(f"{name}: {venv} missing")
            continue
        mib, files = size_and_files(venv)
        print(f"{name:<22} {venv}: {mib:,.0f} MiB, {files:,} files and directories as it is")
    if args.workflow_venv.exists():
        use(args.workflow_venv)
        mib, files = size_and_files(args.workflow_venv)
        print(f"{'workflow, after use':<22} {args.workflow_venv}: {mib:,.0f} MiB, {files:,} files and directories")


if __name__ == "__main__":
    main()
