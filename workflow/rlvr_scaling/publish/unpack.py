"""Unpacking a bundle the way a reader's `tar xzf` would, inside bounds, before anything is checked.

verify checks the bytes a reader gets: only regular files and directories under one top folder, each
name once. A link, a device, a FIFO, a name outside the top folder or a second member of one name
would make `tar xzf` give the reader other bytes than those checked (a regular README.md followed by
a symlink of the same name replaces it), so each is named and the bundle refused. Members are
streamed to disk and hashed as they come, never held whole in memory, and the archive is refused at
the first member over a limit: a bomb costs seconds, in bounded memory (benchmarks/verify_bomb.py:
0.5 s and 40 MiB for 2 GiB of zeros, 4.3 s and 108 MiB, mostly the interpreter, for 300,000 members).
"""

from __future__ import annotations

import gzip
import hashlib
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

# A real study's bundle stays far below these: the local study's has 136 members in 2 MB; the LUMI
# study's 27 runs with their console logs (a few MB each) some 200 members and a few hundred MB.
MAX_MEMBERS = 20_000
MAX_MEMBER_BYTES = 1 << 30  # 1 GiB: a run's console.log of a long job is tens of MB
MAX_TOTAL_BYTES = 4 << 30  # 4 GiB unpacked in all
# A long name or a pax header is read whole by tarfile before any member can be looked at: a header
# that claims more is refused before it is read (a bundle's names are a few hundred bytes).
MAX_HEADER_BYTES = 1 << 20
CHUNK = 1 << 20
META_TYPES = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)

KINDS = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
}


@dataclass
class Unpacked:
    """What was unpacked under `root`: the top folder and every regular file's sha256, by its name
    under the top folder; or the problems that refused the bundle."""

    root: Path
    top: str = ""
    digests: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def read(self, name: str) -> bytes | None:
        return (self.root / name).read_bytes() if name in self.digests else None


class Refused(Exception):
    """The archive is no bundle a reader can unpack safely; the message names the member."""


class _BoundedTarInfo(tarfile.TarInfo):
    """tarfile's header reader, refusing a long-name or pax header over MAX_HEADER_BYTES before it reads it."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in META_TYPES and self.size > MAX_HEADER_BYTES:
            raise Refused(f"a header of {self.size} bytes (for the member after it), over {MAX_HEADER_BYTES}")
        return super()._proc_member(tarfile_)  # type: ignore[misc]  # tarfile's private header reader, not in typeshed


def _member_name(info: tarfile.TarInfo, top: str | None) -> tuple[str, str]:
    """(top folder, name under it) of a member, or Refused when the name could leave the folder or is
    not in its one plain spelling (b/./x, b//x and a file b/x/ are b/x to tar, not to a digest list)."""
    path = PurePosixPath(info.name)
    if path.is_absolute() or ".." in path.parts or not path.parts or "\\" in info.name:
        raise Refused(f"{info.name}: a name outside the bundle's folder")
    plain = "/".join(path.parts)
    if info.name not in (plain, plain + "/") or (info.name.endswith("/") and not info.isdir()):
        raise Refused(f"{info.name}: not a plain name (tar would unpack it as {plain})")
    first = path.parts[0]
    if top is not None and first != top:
        raise Refused(f"{info.name}: not under the bundle's one top folder {top}/")
    return first, "/".join(path.parts[1:])


def unpack_bundle(path: Path, root: Path) -> Unpacked:
    unpacked = Unpacked(root)
    try:
        _stream(path, unpacked)
    except Refused as refused:
        unpacked.problems.append(str(refused))
    except RecursionError:  # tarfile follows chained long-name headers by recursion
        unpacked.problems.append(f"{path.name}: a chain of headers too long to read; no bundle has one")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        unpacked.problems.append(f"{path.name}: not a gzip-compressed tar archive ({exc})")
    if not unpacked.problems and not unpacked.digests:
        unpacked.problems.append(f"{path.name}: holds no files")
    return unpacked


def _stream(path: Path, unpacked: Unpacked) -> None:
    seen: set[str] = set()
    total = 0
    top: str | None = None
    # One pass over the stream, as tar xzf reads it; no member is looked up twice. Through GzipFile,
    # which checks the gzip trailer's CRC at the end of the stream (tarfile's own "r|gz" does not).
    with gzip.open(path, "rb") as stream, tarfile.open(fileobj=stream, mode="r|", tarinfo=_BoundedTarInfo) as archive:
        for count, info in enumerate(archive, 1):
            if count > MAX_MEMBERS:
                raise Refused(f"{path.name}: more than {MAX_MEMBERS} members (a bundle has a few hundred)")
            top, name = _member_name(info, top)
            if not info.isreg() and not info.isdir():
                raise Refused(f"{info.name}: {KINDS.get(info.type, f'a member of type {info.type!r}')}, not a file")
            if info.name.rstrip("/") in seen:
                raise Refused(f"{info.name}: a second member of this name (tar xzf would keep the last)")
            seen.add(info.name.rstrip("/"))
            if info.isdir():
                # Made now, so a file and a folder of one name clash here as they would for tar.
                if name and (unpacked.root / name).is_file():
                    raise Refused(f"{info.name}: a folder where the bundle has a file of that name")
                try:
                    (unpacked.root / name).mkdir(parents=True, exist_ok=True)
                except (FileExistsError, NotADirectoryError) as exc:
                    raise Refused(f"{info.name}: in a folder the bundle has as a file") from exc
                continue
            if not name:
                raise Refused(f"{info.name}: not under one top folder, as a bundle's files are")
            if info.size > MAX_MEMBER_BYTES:
                raise Refused(f"{info.name}: {info.size} bytes, over the limit of {MAX_MEMBER_BYTES} for one member")
            total += info.size
            if total > MAX_TOTAL_BYTES:
                raise Refused(f"{path.name}: over {MAX_TOTAL_BYTES} bytes unpacked (at {info.name})")
            unpacked.digests[name] = _write(archive, info, unpacked.root / name)
        # What follows the archive's end (padding) up to the gzip trailer, so that its CRC is checked.
        left = MAX_TOTAL_BYTES
        while left > 0 and (chunk := stream.read(min(CHUNK, left))):
            left -= len(chunk)
    unpacked.top = top or ""


def _write(archive: tarfile.TarFile, info: tarfile.TarInfo, target: Path) -> str:
    digest = hashlib.sha256()
    source = archive.extractfile(info)
    if source is None:
        raise Refused(f"{info.name}: its data cannot be read")
    if target.is_dir():
        raise Refused(f"{info.name}: a file where the bundle has a folder of that name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise Refused(f"{info.name}: in a folder the bundle has as a file") from exc
    with open(target, "wb") as out:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()
