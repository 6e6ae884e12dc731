"""The base of every typed section of the config and the site (study.sections): a frozen record of one
mapping, built from it with each field as its type says, and giving that mapping back unchanged."""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Self


@dataclass(frozen=True)
class Section:
    """A mapping of the config or site file, typed; `raw` is that mapping as it was read."""

    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, kw_only=True)

    @classmethod
    def from_dict(cls, mapping: dict[str, Any]) -> Self:
        hints = typing.get_type_hints(cls)
        values = {f.name: _typed(hints[f.name], mapping[f.name]) for f in dataclasses.fields(cls) if f.name in mapping}
        return cls(**values, raw=copy.deepcopy(mapping))

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)


def _typed(hint: Any, value: Any) -> Any:
    """A value of the mapping as its field's type says: nested sections are built, the rest copied."""
    if value is None:
        return None
    if isinstance(hint, types.UnionType):  # `X | None`: what a present value is
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if typing.get_origin(hint) is None and isinstance(hint, type) and issubclass(hint, Section):
        return hint.from_dict(value)
    if typing.get_origin(hint) is dict:
        _, item = typing.get_args(hint)
        return {key: _typed(item, entry) for key, entry in value.items()}
    return copy.deepcopy(value)
