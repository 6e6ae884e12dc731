"""A loaded study with some of its config or site values changed, for tests of what they change.

The study's sections are frozen records built from their mappings; a test changes the mapping and
builds them again, as loading would (without the checks, which some tests want to call themselves).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlvr_scaling.study.config import Study, deep_merge
from rlvr_scaling.study.sections import Site, StudyConfig


def edited(study: Study, *, site: dict[str, Any] | None = None, config: dict[str, Any] | None = None) -> Study:
    """`study` with `site` and `config` merged over its site and config (nested mappings merge)."""
    return dataclasses.replace(
        study,
        site=Site.from_dict(deep_merge(study.site.to_dict(), site or {})),
        config=StudyConfig.from_dict(deep_merge(study.config.to_dict(), config or {})),
    )
