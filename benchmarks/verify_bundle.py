"""Prints how long `rlvr-scaling verify` takes on a bundle (target: under 30 s for the local study's),
and how long packing it takes.

    .venv/bin/python benchmarks/verify_bundle.py BUNDLE [--repeat 5]

BUNDLE: after `make demo`, results/bundle/*/*.tar.gz; after the tests, the one under pytest's kept
local-study folder (/tmp/pytest-of-$USER/pytest-N/local-study0/results/bundle/*/*.tar.gz). Each
verify is a fresh process, as a reader runs it: the figure includes Python's start and imports.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path


def verify_seconds(bundle: Path) -> float:
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling", "verify", str(bundle)], capture_output=True, text=True
    )
    seconds = time.monotonic() - start
    if result.returncode != 0:
        raise SystemExit(f"verify failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tarfile.open(args.bundle) as archive:
        members = [m for m in archive.getmembers() if m.isfile()]
    runs = {m.name.split("/")[3] for m in members if m.name.split("/")[1:3] == ["results", "runs"]}
    times = [verify_seconds(args.bundle) for _ in range(args.repeat)]
    print(
        f"bundle {args.bundle.name}: {args.bundle.stat().st_size / 1e6:.2f} MB, {len(members)} files, {len(runs)} runs"
    )
    print(
        f"verify: median {statistics.median(times):.2f} s over {len(times)} runs "
        f"(min {min(times):.2f}, max {max(times):.2f}); target under 30 s"
    )


if __name__ == "__main__":
    main()
