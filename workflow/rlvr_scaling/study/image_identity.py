"""What the engine image is made of, known from the study before it is built: the part of a run's
identity that names its image (study.plan reads it for every run; inputs.container builds the image)."""

from __future__ import annotations

from typing import Any

from rlvr_scaling import paths
from rlvr_scaling.fsutil import sha256_file
from rlvr_scaling.study.config import Study

# The script that adds verl to the base image, whose bytes are part of the image's identity.
ADD_VERL = "containers/add-verl.sh"


def image_identity(study: Study) -> dict[str, Any]:
    """What the engine image is made of, known before it is built: the part of a run's identity that
    names its image. The built image's own sha256 cannot be: a rebuild of the same definition differs
    in timestamps, and run ids are fixed when the workflow is planned. Runs record that digest
    (job.json), Snakemake reruns them when the image is rebuilt, and an index refuses a series
    measured on two images (analysis.per_run.results_io.one_image). Contents, not paths: two clones of the
    repository name the same runs."""
    container = study.require_container()
    lock = container.constraints
    return {
        "build": container.build,
        "add_verl_sha256": sha256_file(paths.REPO_ROOT / ADD_VERL),
        "base_image": container.base_image,
        "base_sha256": container.base_sha256,
        "definition_sha256": sha256_file(paths.REPO_ROOT / container.definition),
        "python": container.python,
        "verl_extras": container.verl_extras,
        "requirements": container.requirements,
        "constraints_sha256": sha256_file(paths.REPO_ROOT / lock) if lock else None,
    }
