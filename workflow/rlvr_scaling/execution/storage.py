"""Where a study's results live: results/ in the clone, or a link from it to the site's storage
(LUMI: the project's scratch, as home and project space allow 100k files and jobs are not to run
from them). Everything the workflow writes is under results/: data, model, image, runs, logs."""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
from pathlib import Path

from rlvr_scaling import paths
from rlvr_scaling.errors import ConfigError, StudyError
from rlvr_scaling.execution.run_environment import REFERENCE
from rlvr_scaling.study.config import Study

# Set, it replaces the site's storage.results for this user (e.g. flash instead of scratch).
OVERRIDE = "RLVR_RESULTS_ROOT"


def results_location(study: Study) -> tuple[Path, str] | None:
    """The results root the site (or RLVR_RESULTS_ROOT) asks for, and where that came from."""
    if os.environ.get(OVERRIDE):
        location = Path(os.environ[OVERRIDE]).expanduser()
        if not location.is_absolute():
            raise ConfigError(OVERRIDE, os.environ[OVERRIDE], "it must be an absolute path", "environment")
        return location, OVERRIDE
    template = study.site.storage.results
    if not template:
        return None
    where = f"site '{study.site_name}'"
    account = study.slurm_account()
    if "{account}" in template and not account:
        raise ConfigError(
            "storage.results", template, "{account} needs the Slurm account: set RLVR_SLURM_ACCOUNT", where
        )

    def variable(match: re.Match[str]) -> str:
        if match.group(1) not in os.environ:
            raise ConfigError(
                "storage.results", template, f"it refers to ${{{match.group(1)}}}, which the environment lacks", where
            )
        return os.environ[match.group(1)]

    try:
        text = REFERENCE.sub(variable, template).format(account=account or "", user=getpass.getuser())
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            "storage.results", template, "it may fill in only {account}, {user} and ${NAME}", where
        ) from exc
    location = Path(text).expanduser()
    if not location.is_absolute():
        raise ConfigError("storage.results", template, "it must be an absolute path", where)
    return location, f"site '{study.site_name}' storage.results"


def link_results(study: Study, root: Path) -> Path:
    """Make results/ the site's storage (a link to it), once; return where results are written.

    Without a setting, results/ stays as it is, a directory or an earlier link: results already made
    are never left behind. A link to another place, or results already in the clone, is an error
    that says how to move them."""
    link = paths.results_dir(root)
    wanted = results_location(study)
    if wanted is None:
        return link.resolve() if link.is_symlink() else link
    location, source = wanted
    if link.is_symlink():
        if link.resolve() != location.resolve():
            raise StudyError(
                f"results/ links to {os.readlink(link)}, but {source} asks for {location}: move the results "
                f"(mv {link.resolve()} {location}; rm results) or change the setting"
            )
    elif link.exists():
        if any(link.iterdir()):
            raise StudyError(
                f"results/ in {root.resolve()} holds results, but {source} keeps them in {location}: "
                f"move them there (mv {link.resolve()} {location}, if {location} does not exist yet; otherwise "
                "move what results/ holds, hidden files too), or unset the setting"
            )
        link.rmdir()
    try:
        location.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StudyError(f"cannot keep results in {location} ({source}): {exc}") from exc
    _claim(location, root, source)
    try:
        if not link.is_symlink():
            link.symlink_to(location, target_is_directory=True)
    except FileExistsError:
        # Another process of the same workflow (a job parsing the Snakefile) made it first.
        if not (link.is_symlink() and link.resolve() == location.resolve()):
            raise
    except OSError as exc:
        raise StudyError(f"cannot link results/ to {location} ({source}): {exc}") from exc
    return location


CLONE_MARK = ".clone"


def _claim(location: Path, root: Path, source: str) -> None:
    """One clone per results root: Snakemake's lock is in each clone's .snakemake/, so two clones
    writing one results tree would not see each other. The root names the clone that uses it."""
    mark = location / CLONE_MARK
    clone = str(root.resolve())
    try:
        owner = mark.read_text().strip()
    except FileNotFoundError:
        mark.write_text(clone + "\n")
        return
    if owner != clone and Path(owner).is_dir():
        raise StudyError(
            f"{location} ({source}) holds the results of the clone {owner}: two clones must not share one "
            f"results root (Snakemake locks each clone separately); set RLVR_RESULTS_ROOT to another place, "
            f"or remove {mark} if {owner} no longer runs this study"
        )
    if owner != clone:  # the clone moved or is gone: this one takes over
        mark.write_text(clone + "\n")


def space_report(
    results: Path, model: Path, account: str | None = None
) -> tuple[dict[str, object], list[str], list[str]]:
    """For the preflight: the results root is writable and has room for what the runs add (their logs
    and metrics are small; the model is the large part and is already there). Lustre quotas (`lfs
    quota`) are recorded where the command exists. Facts, problems, warnings."""
    facts: dict[str, object] = {"results": str(results.resolve())}
    problems: list[str] = []
    warnings: list[str] = []
    probe = results / f".preflight-write-{os.getpid()}"
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        problems.append(f"the results root {results.resolve()} is not writable here: {exc}")
        return facts, problems, warnings
    stats = os.statvfs(results)
    free = stats.f_bavail * stats.f_frsize
    model_bytes = sum(f.stat().st_size for f in model.rglob("*") if f.is_file()) if model.exists() else 0
    facts.update(free_bytes=free, model_bytes=model_bytes)
    # Room for another copy of the model (a re-download) and a margin for the runs' outputs.
    wanted = model_bytes + 10 * 2**30
    if free < wanted:
        warnings.append(
            f"{free / 2**30:.1f} GiB free under {results.resolve()}, less than the model's "
            f"{model_bytes / 2**30:.1f} GiB plus 10 GiB for the runs"
        )
    lfs = shutil.which("lfs")
    if lfs:
        try:
            # LUMI's scratch quotas are the project's (its Unix group), the user's are recorded too.
            owners = [("-u", getpass.getuser())] + ([("-g", account)] if account else [])
            quotas: dict[str, str] = {}
            facts["lfs_quota"] = quotas
            for flag, owner in owners:
                shown = subprocess.run(
                    [lfs, "quota", "-h", flag, owner, str(results.resolve())],
                    capture_output=True, text=True, timeout=60,
                )  # fmt: skip
                quotas[f"{flag} {owner}"] = shown.stdout.strip() or shown.stderr.strip()
                # lfs marks a limit that is exceeded with '*'.
                if "*" in shown.stdout:
                    warnings.append(f"lfs quota {flag} {owner} shows a limit reached:\n{shown.stdout.strip()}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            facts["lfs_quota"] = f"not available: {exc}"
    return facts, problems, warnings
