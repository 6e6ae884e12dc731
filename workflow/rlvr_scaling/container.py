"""The site's container definition, rendered from containers/<template> with the site's pins."""

from __future__ import annotations

from . import paths
from .config import Study
from .errors import StudyError


def render_definition(study: Study) -> str:
    container = study.site["container"]
    if not container:
        raise StudyError(f"site '{study.site_name}' runs without a container: there is nothing to build")
    template = (paths.REPO_ROOT / container["definition"]).read_text()
    return template.format(
        base_image=container["base_image"],
        verl_version=study.config["software"]["verl"],
    )
