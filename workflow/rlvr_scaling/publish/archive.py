"""A reproducible tar.gz: the same members give the same bytes (sorted names, fixed times, owners
and modes, a gzip header without a name or time), and a SHA256SUMS a reader checks with
`sha256sum -c`."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

SUMS = "SHA256SUMS"
EXECUTABLE_SUFFIXES = (".sh",)


def sha256_sums(members: dict[str, bytes]) -> bytes:
    """`sha256sum -c SHA256SUMS` format, every member but itself, by name."""
    lines = [f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(members.items()) if name != SUMS]
    return "".join(lines).encode()


def read_sums(text: str) -> dict[str, str]:
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise ValueError(f"{SUMS} line {number} is not '<sha256>  <name>': {line!r}")
        sums[name] = digest
    return sums


def write_archive(output: Path, top: str, members: dict[str, bytes], mtime: int) -> None:
    """Members under the directory `top`, written whole or not at all."""
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial")
    with open(partial, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as compressed:
            with tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive:
                for name in sorted(members):
                    data = members[name]
                    info = tarfile.TarInfo(f"{top}/{name}")
                    info.size, info.mtime = len(data), mtime
                    info.mode = 0o755 if name.endswith(EXECUTABLE_SUFFIXES) else 0o644
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    archive.addfile(info, io.BytesIO(data))
    partial.replace(output)


def read_archive(path: Path) -> tuple[str, dict[str, bytes]]:
    """The top directory and the members under it (anything else in the archive is a member too,
    named as it is, so that verify names it)."""
    members: dict[str, bytes] = {}
    with tarfile.open(path, "r:gz") as archive:
        for info in archive.getmembers():
            member = archive.extractfile(info) if info.isfile() else None
            if member is not None:
                members[info.name] = member.read()
    tops = {name.split("/", 1)[0] if "/" in name else "" for name in members}
    if len(tops) != 1 or "" in tops:
        return "", members
    return tops.pop(), {name.split("/", 1)[1]: data for name, data in members.items()}
