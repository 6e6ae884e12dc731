"""What a site's study_overrides do to the user's config: which of its values they replace (shown by
`plan`, named in an error about one of them), and which datasets they scale down."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from rlvr_scaling.errors import ConfigError


@dataclass(frozen=True)
class SiteReplacement:
    """A value of the user's config that the site's study_overrides replaced."""

    key: str
    yours: Any
    site: Any


def _leaves(document: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = []
    for key, value in document.items():
        if isinstance(value, dict) and value:
            found += _leaves(value, (*prefix, key))
        else:
            found.append(((*prefix, key), value))
    return found


def _lookup(document: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    for part in path:
        if not isinstance(document, dict) or part not in document:
            return False, None
        document = document[part]
    return True, document


def site_study(site_def: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """The site's study_overrides for this config: it scales down the user's datasets, never adds one
    the user removed."""
    overrides = copy.deepcopy(site_def.get("study_overrides") or {})
    datasets = overrides.get("datasets")
    if isinstance(datasets, dict) and isinstance(user.get("datasets"), dict):
        overrides["datasets"] = {name: value for name, value in datasets.items() if name in user["datasets"]}
    return overrides


def _differing(key: str, yours: Any, final: Any) -> list[SiteReplacement]:
    """The leaves where two values differ (mappings compared key by key)."""
    if isinstance(yours, dict) and isinstance(final, dict):
        keys = list(yours) + [k for k in final if k not in yours]
        return [r for k in keys for r in _differing(f"{key}.{k}", yours.get(k), final.get(k))]
    return [] if yours == final else [SiteReplacement(key, yours, final)]


def replaced_values(user: dict[str, Any], config: dict[str, Any], overrides: dict[str, Any]) -> list[SiteReplacement]:
    """Every leaf the site changed from what the user's config said (not the keys the user set
    explicitly with --set or `overrides`, which win); where both are mappings, only their leaves
    that differ."""
    replaced = []
    for path, _ in _leaves(overrides):
        had, yours = _lookup(user, path)
        _, final = _lookup(config, path)
        if had:
            replaced += _differing(".".join(path), yours, final)
    return replaced


def with_site_part(error: ConfigError, site_name: str, replaced: tuple[SiteReplacement, ...]) -> ConfigError:
    """The error, saying which of the values it names the site set (not the user's config), and how to change it."""
    named = [r for r in replaced if r.key == error.key or f"{r.key} = " in str(error.expected)]
    if not named:
        return error
    parts = "; ".join(f"{r.key} is the site's {r.site!r} (yours: {r.yours!r})" for r in named)
    return ConfigError(
        error.key,
        error.value,
        f"{error.expected} [site '{site_name}' set this in its study_overrides: {parts}; change "
        f"{error.key}, or set {named[0].key} with --set]",
        error.source,
    )
