"""A run's identity: a hash of exactly what defines its result, so equal runs share one id."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def digest(value: Any, length: int = 10) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def make_run_id(dataset: str, nodes: int, prompts: int, identity: dict[str, Any]) -> str:
    """Readable prefix for people, hash suffix for everything that is not in the prefix."""
    return f"{dataset}-n{nodes}-p{prompts}-{digest(identity)}"
