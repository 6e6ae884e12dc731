"""`rlvr-scaling verify BUNDLE`: a bundle checked from itself alone, offline. First the checksums and
the files every bundle holds; then every run's summary recomputed from its own metrics, every index,
selection and table from the summaries and the report from the tables (publish.recompute), each
compared with what the bundle holds. A difference is named by file, and by table, row and column."""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
import zlib
from pathlib import Path

from rlvr_scaling.publish.archive import SUMS, read_archive, read_sums
from rlvr_scaling.publish.recompute import Findings, check_study

# What every bundle holds besides its runs and tables (publish.bundle writes them).
REQUIRED = (
    "README.md",
    "CITATION.cff",
    "ro-crate-metadata.json",
    "provenance.json",
    "study/config.json",
    "study/site.json",
    "results/report/study.md",
    "results/figures/captions.json",
)


def check_sums(members: dict[str, bytes], findings: Findings) -> None:
    if SUMS not in members:
        findings.problems.append(f"{SUMS}: not in the bundle, so no file can be checked")
        return
    try:
        sums = read_sums(members[SUMS].decode())
    except (UnicodeDecodeError, ValueError) as exc:
        findings.problems.append(f"{SUMS}: {exc}")
        return
    for name, digest in sorted(sums.items()):
        if name not in members:
            findings.problems.append(f"{name}: listed in {SUMS} but not in the bundle")
        elif hashlib.sha256(members[name]).hexdigest() != digest:
            findings.problems.append(f"{name}: its sha256 is not the one {SUMS} lists (the file was changed)")
    for name in sorted(set(members) - set(sums) - {SUMS}):
        findings.problems.append(f"{name}: in the bundle but not listed in {SUMS} (added)")
    findings.checked["checksums"] = len(sums)


def check_required(members: dict[str, bytes], findings: Findings) -> None:
    findings.problems += [
        f"{name}: not in the bundle (every bundle has it)" for name in REQUIRED if name not in members
    ]
    try:
        captions = json.loads(members.get("results/figures/captions.json", b"{}"))
    except ValueError:
        return
    for figure in captions:
        for suffix in (".png", ".pdf"):
            if f"results/figures/{figure}{suffix}" not in members:
                findings.problems.append(f"results/figures/{figure}{suffix}: captioned but not in the bundle")


def unpack(members: dict[str, bytes], root: Path, findings: Findings) -> None:
    for name, data in members.items():
        target = root / name
        if not target.resolve().is_relative_to(root.resolve()):
            findings.problems.append(f"{name}: a member outside the bundle's directory; not unpacked")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def verify_bundle(path: Path) -> Findings:
    findings = Findings()
    try:
        top, members = read_archive(path)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        findings.problems.append(f"{path.name}: not a gzip-compressed tar archive ({exc})")
        return findings
    if not top:
        findings.problems.append(f"{path.name}: its files are not under one top directory, as a bundle's are")
        return findings
    check_sums(members, findings)
    check_required(members, findings)
    with tempfile.TemporaryDirectory(prefix="rlvr-verify-") as scratch:
        unpack(members, Path(scratch), findings)
        check_study(Path(scratch), findings)
    return findings
