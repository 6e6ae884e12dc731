"""The allocation a run executes in, read from Slurm itself.

Snakemake's job step strips SLURM_* variables except the job id, so the node list comes from
`scontrol`, not from the environment.
"""

from __future__ import annotations

import re
import subprocess

from rlvr_scaling.errors import StudyError


def _scontrol(*args: str) -> str:
    try:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise StudyError(f"scontrol {' '.join(args)} failed: {exc}") from None


def job_nodes(job_id: str) -> list[str]:
    match = re.search(r"\bNodeList=(\S+)", _scontrol("show", "job", job_id))
    if not match or match.group(1) in ("(null)", ""):
        raise StudyError(f"Slurm job {job_id} has no node list yet")
    return _scontrol("show", "hostnames", match.group(1)).split()
