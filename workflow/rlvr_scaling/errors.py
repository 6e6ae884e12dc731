"""Errors that stop the pipeline before anything expensive starts."""

from __future__ import annotations

from typing import Any


class StudyError(Exception):
    """A problem with the study or site definition; the CLI exits with status 2."""


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


# The value of a key that is not there at all (a ConfigError then says "is missing").
MISSING: Any = _Missing()


class ConfigError(StudyError):
    """A config value breaks a rule: names the key, the value and what was expected."""

    def __init__(self, key: str, value: Any, expected: str, source: str = "config") -> None:
        self.key = key
        self.value = value
        self.expected = expected
        self.source = source
        found = "is missing" if value is MISSING else f"has value {value!r}"
        super().__init__(
            f"Invalid {source}: key '{key}' {found}, but {expected}. "
            f"Fix '{key}' and run again; nothing was started or submitted."
        )
