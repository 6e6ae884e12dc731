"""The RO-Crate community's validator (roc-validator) run offline on a bundle's crate.

The validator fetches the crate's JSON-LD context over HTTP through a `requests_cache` cache, and its
`offline` mode serves only what that cache holds. This machine has no network, so the cache is filled
from files shipped here instead of the web: the RO-Crate 1.1 context (tests/data/jsonld/, CC0, taken
from the rocrate 0.9.0 wheel on PyPI: rocrate/data/ro-crate.jsonld). A reader with network runs the
validator as it is (`rocrate-validator validate DIR`); the answer is the same.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import requests
import urllib3
from requests.adapters import BaseAdapter, HTTPAdapter

from .conftest import REPO

CONTEXTS = {"https://w3id.org/ro/crate/1.1/context": REPO / "tests/data/jsonld/ro-crate-1.1-context.jsonld"}


class _ShippedFiles(BaseAdapter):
    """Answers GET with a shipped file, 404 for anything else: nothing leaves the machine."""

    def send(self, request: requests.PreparedRequest, **_kwargs) -> requests.Response:
        path = CONTEXTS.get(str(request.url))
        raw = urllib3.HTTPResponse(
            body=io.BytesIO(path.read_bytes() if path else b""),
            headers={"Content-Type": "application/ld+json"},
            status=200 if path else 404,
            preload_content=False,
            request_url=request.url,
        )
        return HTTPAdapter().build_response(request, raw)

    def close(self) -> None:
        pass


def warm_cache(cache: Path) -> None:
    """The validator's HTTP cache (its own settings: sqlite, GET, these codes) holding CONTEXTS."""
    from requests_cache import CachedSession

    session = CachedSession(
        cache_name=str(cache), backend="sqlite", allowable_methods=("GET",), allowable_codes=(200, 302, 404)
    )
    for scheme in ("https://", "http://"):
        session.mount(scheme, _ShippedFiles())
    for url in CONTEXTS:
        assert session.get(url).status_code == 200
    session.close()


@dataclass
class Verdict:
    profile: str
    passed: bool
    issues: list[str] = field(default_factory=list)
    offline_misses: list[str] = field(default_factory=list)  # URLs it wanted and the cache lacked


def validate_offline(crate_dir: Path, profiles: list[str], cache: Path, monkeypatch) -> list[Verdict]:
    """Each profile at REQUIRED level, offline; a check the validator skipped for a resource not in the
    cache is recorded as a miss (it would otherwise pass silently)."""
    from rocrate_validator import models, services
    from rocrate_validator.models.validation import ValidationContext
    from rocrate_validator.utils.http import find_offline_cache_miss

    warm_cache(cache)
    misses: list[str] = []
    original = ValidationContext.maybe_warn_offline_cache_miss

    def recording(self, exc: BaseException) -> bool:
        miss = find_offline_cache_miss(exc)
        if miss is not None:
            misses.append(miss.url)
        return original(self, exc)

    monkeypatch.setattr(ValidationContext, "maybe_warn_offline_cache_miss", recording)
    verdicts = []
    for profile in profiles:
        misses.clear()
        settings = models.ValidationSettings(
            rocrate_uri=str(crate_dir),
            profile_identifier=profile,
            requirement_severity="REQUIRED",
            offline=True,
            cache_path=cache,
        )
        result = services.validate(settings)
        issues = [f"{issue.check.identifier}: {issue.message}" for issue in result.get_issues()]
        verdicts.append(Verdict(profile, result.passed(), issues, sorted(set(misses))))
    return verdicts
