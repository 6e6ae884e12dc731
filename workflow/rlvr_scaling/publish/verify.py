"""`rlvr-scaling verify BUNDLE`: a bundle checked from itself alone, offline. First the checksums and
the files every bundle holds; then every run's summary recomputed from its own metrics, every index,
selection and table from the summaries and the report from the tables (publish.recompute), each
compared with what the bundle holds. A difference is named by file, and by table, row and column."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from rlvr_scaling.publish.archive import SUMS, read_sums
from rlvr_scaling.publish.recompute import Findings, check_study
from rlvr_scaling.publish.unpack import Unpacked, unpack_bundle

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
    "results/figures/figure_data.json",
)


def check_sums(unpacked: Unpacked, findings: Findings) -> None:
    listing = unpacked.read(SUMS)
    if listing is None:
        findings.problems.append(f"{SUMS}: not in the bundle, so no file can be checked")
        return
    try:
        sums = read_sums(listing.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        findings.problems.append(f"{SUMS}: {exc}")
        return
    digests = unpacked.digests
    for name, digest in sorted(sums.items()):
        if name not in digests:
            findings.problems.append(f"{name}: listed in {SUMS} but not in the bundle")
        elif digests[name] != digest:
            findings.problems.append(f"{name}: its sha256 is not the one {SUMS} lists (the file was changed)")
    for name in sorted(set(digests) - set(sums) - {SUMS}):
        findings.problems.append(f"{name}: in the bundle but not listed in {SUMS} (added)")
    findings.checked["checksums"] = len(sums)


def check_required(unpacked: Unpacked, findings: Findings) -> None:
    findings.problems += [
        f"{name}: not in the bundle (every bundle has it)" for name in REQUIRED if name not in unpacked.digests
    ]
    try:
        captions = json.loads(unpacked.read("results/figures/captions.json") or b"{}")
    except ValueError:
        return
    for figure in captions if isinstance(captions, dict) else []:
        for suffix in (".png", ".pdf"):
            if f"results/figures/{figure}{suffix}" not in unpacked.digests:
                findings.problems.append(f"results/figures/{figure}{suffix}: captioned but not in the bundle")


def verify_bundle(path: Path) -> Findings:
    """Unpacked as a reader's tar would (publish.unpack: only files and folders, each name once, inside
    bounds); a bundle that is refused there is checked no further."""
    findings = Findings()
    with tempfile.TemporaryDirectory(prefix="rlvr-verify-") as scratch:
        unpacked = unpack_bundle(path, Path(scratch))
        if unpacked.problems:
            findings.problems += unpacked.problems
            return findings
        check_sums(unpacked, findings)
        check_required(unpacked, findings)
        check_study(Path(scratch), findings)
        findings.evidence = evidence_kinds(set(unpacked.digests) - findings.recomputed - {SUMS})
    return findings


def evidence_kinds(names: set[str]) -> dict[str, int]:
    """The members checked by their checksum only (no value of theirs is recomputed), by kind: a run's
    record by its file name, anything else by its folder."""
    kinds: dict[str, int] = {}
    for name in names:
        parts = name.split("/")
        if parts[:2] == ["results", "runs"] and len(parts) > 3:
            kind = f"runs' {parts[-1]}"
        elif len(parts) > 1:
            kind = "/".join(parts[:2]) if parts[0] == "results" else parts[0]
        else:
            kind = name
        kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items()))
