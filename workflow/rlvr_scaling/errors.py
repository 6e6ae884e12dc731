"""Errors that stop the pipeline before anything expensive starts."""

from __future__ import annotations

from typing import Any


class StudyError(Exception):
    """A problem with the study or site definition; the CLI exits with status 2."""


class ConfigError(StudyError):
    """A config value breaks a rule: names the key, the value and what was expected."""

    def __init__(self, key: str, value: Any, expected: str, source: str = "config") -> None:
        self.key = key
        self.value = value
        self.expected = expected
        self.source = source
        super().__init__(
            f"Invalid {source}: key '{key}' has value {value!r}, but {expected}. "
            f"Fix '{key}' and run again; nothing was started or submitted."
        )
