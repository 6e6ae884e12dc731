"""Inputs that gave tracebacks (#31 item 6): each is now one line naming the file and the problem,
rc != 0, and nothing partial left behind."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
from rlvr_scaling import fsutil
from rlvr_scaling.errors import StudyError

from .conftest import PYTHON


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "rlvr_scaling", *argv], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"site: local\nstudy:\n  name: caf\xe9\n", "bad.yaml is not UTF-8 text: byte 0xe9 at offset 30"),
        (b"site: local\noverrides: &x\n  a: *x\n", "an alias (*name) that refers to the value it is in"),
        (b"site: local\noverrides: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested deeper than 50 levels"),
        (b"site: local\noverrides: " + b"[" * 60 + b"]" * 60 + b"\n", "nested deeper than 50 levels"),
        (
            b"a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
            + b"".join(
                b"%c: &%c [" % (98 + i, 98 + i) + b", ".join([b"*%c" % (97 + i)] * 10) + b"]\n" for i in range(9)
            ),
            "more than 100,000 values once its aliases are written out",
        ),
    ],
    ids=["not-utf8", "self-alias", "5000-deep", "60-deep", "billion-laughs"],
)
def test_a_config_that_cannot_be_one_is_named_in_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "bad.yaml").write_bytes(content)
    done = _cli("plan", "--config", "bad.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [f"rlvr-scaling: error: {done.stderr.split('error: ', 1)[1].strip()}"]
    assert message in done.stderr


def test_a_metrics_file_nested_too_deeply_is_no_step_record_in_metrics_and_import(tmp_path: Path) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"step": 1, "data": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    shown = _cli("metrics", str(deep), cwd=tmp_path)
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    assert "line 1: not a step record (nested too deeply)" in shown.stderr
    shape = ["--dataset", "gsm8k", "--nodes", "1", "--gpus-per-node", "1", "--prompts", "1"]
    imported = _cli("import", str(deep), *shape, "--max-response-length", "64", "--root", str(tmp_path), cwd=tmp_path)
    assert imported.returncode == 2 and "Traceback" not in imported.stderr
    assert "holds no step of a verl run (line 1: not a step record (nested too deeply))" in imported.stderr
    assert not (tmp_path / "results").exists()  # nothing written for a log that is no run


def test_a_full_disk_leaves_the_old_file_and_no_partial_one(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "summary.json"
    fsutil.write_json(target, {"old": 1})

    class FullDisk:
        def __init__(self, fd: int, *args, **kwargs) -> None:
            self.fd = fd

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            os.close(self.fd)

        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fsutil.os, "fdopen", FullDisk)
    with pytest.raises(StudyError, match=r"cannot write .*summary.json: No space left on device; the file there is"):
        fsutil.write_json(target, {"new": 2})
    assert json.loads(target.read_text()) == {"old": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_writers_of_one_output_at_once_never_share_a_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "table.csv"
    texts = [f"writer {i}\n" * 2000 for i in range(32)]
    errors: list[BaseException] = []

    def write(text: str) -> None:
        try:
            fsutil.write_text_atomically(target, text)
        except BaseException as error:  # noqa: BLE001 - any failure of a writer fails the test
            errors.append(error)

    threads = [threading.Thread(target=write, args=(text,)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_text() in texts  # one writer's text, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~fsutil.UMASK)
