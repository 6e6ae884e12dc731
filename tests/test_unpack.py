"""verify unpacks a bundle as a reader's `tar xzf` would, inside bounds (publish/unpack.py): anything
but regular files and folders under one top folder, each name once, is named and refused before any
check, and a bundle over a limit is refused at the first member over it. The bomb's time and memory
are measured by benchmarks/verify_bomb.py."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from rlvr_scaling.publish import unpack
from rlvr_scaling.publish.unpack import unpack_bundle
from rlvr_scaling.publish.verify import verify_bundle


def _archive(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                archive.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return path


def _special(name: str, kind: bytes, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


README = ("b/README.md", b"# A bundle\n")


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        (_special("b/README.md", tarfile.SYMTYPE, "/etc/passwd"), "b/README.md: a symbolic link, not a file"),
        (_special("b/README.md", tarfile.LNKTYPE, "b/other"), "b/README.md: a hard link, not a file"),
        (_special("b/dev", tarfile.CHRTYPE), "b/dev: a character device, not a file"),
        (_special("b/pipe", tarfile.FIFOTYPE), "b/pipe: a FIFO, not a file"),
        (("b/README.md", b"# The attacker's words\n"), "b/README.md: a second member of this name"),
        (("b/../../etc/cron.d/x", b"x"), "b/../../etc/cron.d/x: a name outside the bundle's folder"),
        (("/etc/passwd", b"x"), "/etc/passwd: a name outside the bundle's folder"),
        (("other/README.md", b"x"), "other/README.md: not under the bundle's one top folder b/"),
        # Names tar spells otherwise: README.md as a folder, or a second README.md.
        (
            _special("b/./README.md", tarfile.DIRTYPE),
            "b/./README.md: not a plain name (tar would unpack it as b/README.md)",
        ),
        (("b//README.md", b"x"), "b//README.md: not a plain name"),
        (("b/NOTES.md/", b"x"), "b/NOTES.md/: not a plain name"),
        (_special("b/README.md/", tarfile.DIRTYPE), "b/README.md: a second member of this name"),
    ],
    ids=[
        "symlink",
        "hardlink",
        "device",
        "fifo",
        "duplicate",
        "dotdot",
        "absolute",
        "second-top",
        "dot-folder",
        "double-slash",
        "file-with-slash",
        "folder-over-file",
    ],
)
def test_what_tar_would_unpack_otherwise_is_named_and_refused(tmp_path: Path, member, expected: str) -> None:
    # After a regular README.md: a reader's tar xzf would give them the second member's bytes.
    bundle = _archive(tmp_path / "b.tar.gz", [README, member])
    found = verify_bundle(bundle)
    assert len(found.problems) == 1 and found.problems[0].startswith(expected), found.problems
    assert found.checked["checksums"] == 0  # refused before anything is checked


def test_a_plain_bundle_unpacks_with_every_files_digest(tmp_path: Path) -> None:
    folder = tarfile.TarInfo("b/results")
    folder.type = tarfile.DIRTYPE
    bundle = _archive(tmp_path / "b.tar.gz", [folder, README, ("b/results/x.json", b"{}")])
    unpacked = unpack_bundle(bundle, tmp_path / "out")
    assert unpacked.problems == [] and unpacked.top == "b"
    assert unpacked.digests == {
        "README.md": hashlib.sha256(README[1]).hexdigest(),
        "results/x.json": "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",  # sha256 of {}
    }
    assert (tmp_path / "out" / "results" / "x.json").read_bytes() == b"{}"


def test_limits_hold_at_the_boundary_and_refuse_one_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unpack, "MAX_MEMBERS", 3)
    monkeypatch.setattr(unpack, "MAX_MEMBER_BYTES", 100)
    monkeypatch.setattr(unpack, "MAX_TOTAL_BYTES", 150)
    # Exactly at each limit: 3 members, one of 100 bytes, 150 in all.
    at = [("b/a", b"x" * 100), ("b/b", b"y" * 25), ("b/c", b"z" * 25)]
    assert unpack_bundle(_archive(tmp_path / "at.tar.gz", at), tmp_path / "at").problems == []
    over = {
        "members": ([*at[:2], ("b/c", b""), ("b/d", b"")], "more than 3 members"),
        "member": ([("b/a", b"x" * 101)], "b/a: 101 bytes, over the limit of 100 for one member"),
        "total": ([*at[:2], ("b/c", b"z" * 26)], "over 150 bytes unpacked (at b/c)"),
    }
    for which, (members, expected) in over.items():
        problems = unpack_bundle(_archive(tmp_path / f"{which}.tar.gz", members), tmp_path / which).problems
        assert len(problems) == 1 and expected in problems[0], (which, problems)


def test_a_header_over_its_bound_or_a_chain_of_headers_is_refused(tmp_path, monkeypatch) -> None:
    # tarfile reads a long name's header whole before the member is seen: its size is checked first.
    monkeypatch.setattr(unpack, "MAX_HEADER_BYTES", 150)
    long_name = "b/" + "n" * 140  # a 143-byte GNU long-name header: within 150
    fits = tarfile.open(tmp_path / "fits.tar.gz", "w:gz", format=tarfile.GNU_FORMAT)
    for name in (long_name,):
        info = tarfile.TarInfo(name)
        fits.addfile(info, io.BytesIO(b""))
    fits.close()
    assert unpack_bundle(tmp_path / "fits.tar.gz", tmp_path / "fits").problems == []
    over = tarfile.open(tmp_path / "over.tar.gz", "w:gz", format=tarfile.GNU_FORMAT)
    over.addfile(tarfile.TarInfo("b/" + "n" * 160), io.BytesIO(b""))
    over.close()
    [problem] = unpack_bundle(tmp_path / "over.tar.gz", tmp_path / "over").problems
    assert problem == "a header of 163 bytes (for the member after it), over 150"
    # 5,000 long-name headers in a row: tarfile follows them by recursion.
    link = tarfile.TarInfo("././@LongLink")
    link.type, link.size = tarfile.GNUTYPE_LONGNAME, 2
    block = link.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape") + b"a\0".ljust(512, b"\0")
    chain = tmp_path / "chain.tar.gz"
    chain.write_bytes(gzip.compress(block * 5000 + bytes(1024)))
    [problem] = unpack_bundle(chain, tmp_path / "chain").problems
    assert problem == "chain.tar.gz: a chain of headers too long to read; no bundle has one"


def test_a_bundle_whose_gzip_checksum_fails_is_refused_as_tar_would(tmp_path: Path) -> None:
    good = _archive(tmp_path / "good.tar.gz", [README])
    data = bytearray(good.read_bytes())
    data[-8] ^= 0xFF  # the gzip trailer's CRC-32
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(bytes(data))
    assert unpack_bundle(good, tmp_path / "good").problems == []
    [problem] = unpack_bundle(bad, tmp_path / "bad").problems
    assert problem.startswith("bad.tar.gz: not a gzip-compressed tar archive (CRC check failed")
