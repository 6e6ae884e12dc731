"""Prints how long `rlvr-scaling verify` takes to refuse bundles built to exhaust it, and its peak
memory (the child's maximum resident set size):

    .venv/bin/python benchmarks/verify_bomb.py [--workdir DIR]

- zeros: a regular bundle-shaped archive with one extra member of 2 GiB of zeros (a few MB gzipped);
- members: 300,000 empty members (about 1.4 MB gzipped).
Before publish/unpack.py, verify read every member into memory: 2.1 GB for the first, 154 s for the
second (issue 31).
"""

from __future__ import annotations

import argparse
import gzip
import io
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ZEROS = 2 << 30


class Zeros:
    """A file object of `size` zero bytes, read in chunks (the archive is written without holding them)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def zeros_bundle(path: Path) -> None:
    with gzip.open(path, "wb", compresslevel=1) as raw, tarfile.open(fileobj=raw, mode="w") as archive:
        for name, data in (("b/README.md", b"# bundle\n"), ("b/SHA256SUMS", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("b/results/zeros.bin")
        info.size = ZEROS
        archive.addfile(info, Zeros(ZEROS))


def members_bundle(path: Path, count: int = 300_000) -> None:
    with gzip.open(path, "wb", compresslevel=1) as raw, tarfile.open(fileobj=raw, mode="w") as archive:
        for number in range(count):
            archive.addfile(tarfile.TarInfo(f"b/m/{number}"))


def verify(bundle: Path) -> tuple[float, float, str]:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "rlvr_scaling", "verify", str(bundle)], capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - began
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return seconds, peak_mib, (done.stdout + done.stderr).strip().splitlines()[0][:140]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="verify-bomb-"))
    for name, build in (("zeros", zeros_bundle), ("members", members_bundle)):
        bundle = workdir / f"{name}.tar.gz"
        build(bundle)
        seconds, peak, first = verify(bundle)
        # RUSAGE_CHILDREN is the largest child so far: each bomb is measured in its own order.
        print(
            f"{name}: {bundle.stat().st_size / 2**20:.1f} MiB gzipped, refused in {seconds:.1f} s, "
            f"peak RSS of verify (largest child so far) {peak:.0f} MiB: {first}"
        )


if __name__ == "__main__":
    main()
