"""Why a trainer failed, in one line: the last exception (or, without one, the last error line) of its
console and of the Ray logs the run keeps, with where it stands (#61).

A failed verl run's console runs to thousands of lines; the cause is one of them, usually far from
the end (Ray's and Hydra's own lines follow it). FAILED.txt, job.json and `status` carry this line, so
nobody has to read the console to learn that the tokenizer had no chat template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# "ValueError: ...", "torch.OutOfMemoryError: ...", "ray.exceptions.RayTaskError(ValueError): ...", a
# bare "KeyError" line, each possibly behind Ray's "(TaskRunner pid=123, ip=...)" prefix.
_RAY_PREFIX = r"(?:\([^()]*pid=\d+[^()]*\)\s+)?"
EXCEPTION = re.compile(
    _RAY_PREFIX + r"(?P<text>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)"
    r"(?:\([\w.]+\))?(?::\s.*)?)\s*$"
)
# Lines that say error without a Python exception: srun's, the shell's, a C++ library's.
ERROR_LINE = re.compile(_RAY_PREFIX + r"(?P<text>.*\b(?:error|ERROR|Error)\b:?\s.*\S)\s*$")
MAX_CHARS = 400
RAY_LOGS = "ray"  # the run folder's copy of each node's Ray start-up log (execution.launchers)


RAY_WRAPPER = "ray.exceptions.RayTaskError("
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours its "(Actor pid=N)" prefixes


@dataclass(frozen=True)
class FailureCause:
    """The exception that ended the trainer and, where another came first, the first: verl catches
    an error inside a step (a reward function's, a rollout's) and fails later on its own terms."""

    text: str  # the line, without Ray's prefix, cut at MAX_CHARS
    file: str  # relative to the run folder
    line: int  # 1-based
    first_text: str | None = None
    first_line: int | None = None

    def describe(self) -> str:
        first = f"; first error: {self.first_text} (line {self.first_line})" if self.first_text else ""
        return f"{self.text} ({self.file}, line {self.line}){first}"

    def to_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "file": self.file,
            "line": self.line,
            "first_text": self.first_text,
            "first_line": self.first_line,
            "described": self.describe(),
        }


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


def exception_lines(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(exception lines, other error lines) of `text`, each (1-based line number, the line)."""
    exceptions, errors = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        line = ANSI.sub("", line)
        if match := EXCEPTION.match(line):
            exceptions.append((number, _cut(match["text"])))
        elif match := ERROR_LINE.match(line):
            errors.append((number, _cut(match["text"])))
    return exceptions, errors


def causes(text: str) -> list[tuple[int, str]]:
    """The lines of `text` that can be the cause, in order: its exception lines less Ray's wrappers of
    an actor's error (which name its type only; the actor's own line follows), else every exception
    line, else its other error lines."""
    exceptions, errors = exception_lines(text)
    own = [(number, line) for number, line in exceptions if not line.startswith(RAY_WRAPPER)]
    return own or exceptions or errors


def last_exception(text: str) -> tuple[int, str] | None:
    """(line number, line) of the last cause of `text` (see causes)."""
    found = causes(text)
    return found[-1] if found else None


def failure_cause(run_dir: Path) -> FailureCause | None:
    """The cause from the console first (the driver's, where Ray forwards its workers' errors), then
    the Ray logs the run kept; None when none of them holds an error line."""
    candidates = [run_dir / "console.log", *sorted((run_dir / RAY_LOGS).rglob("*.log"))]
    for path in candidates:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        found = causes(text)
        if found:
            (line, last), (first_line, first) = found[-1], found[0]
            name = str(path.relative_to(run_dir))
            if first == last:
                return FailureCause(last, name, line)
            return FailureCause(last, name, line, first, first_line)
    return None
