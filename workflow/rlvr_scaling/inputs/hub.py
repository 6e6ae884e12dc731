"""Calls to the Hugging Face hub, with one line instead of a traceback when it cannot answer: an
offline or unreachable hub, a repository or revision it does not have. The line names the input, its
revision and how to point the study at a local copy instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rlvr_scaling.errors import StudyError

T = TypeVar("T")


def _local_copy_hint(kind: str, key: str, repo: str, revision: str) -> str:
    repo_type = " --repo-type dataset" if kind == "dataset" else ""
    download = f"hf download {repo}{repo_type} --revision {revision} --local-dir DIR"
    if kind == "dataset":
        return f"download it where the hub is reachable ({download}) and set {key}.source: ./DIR (a local folder)"
    return f"download it where the hub is reachable ({download}) and set model.source: local, model.path: DIR"


def _reason(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__


def hub_call(kind: str, key: str, repo: str, revision: str, call: Callable[[], T]) -> T:
    """`call()`, or StudyError in one line naming the input, its revision and the local-copy way."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{kind} {repo} at revision {revision}"
    try:
        return call()
    except (RepositoryNotFoundError, GatedRepoError) as exc:  # gated: a subclass, answered first below
        if isinstance(exc, GatedRepoError):
            raise StudyError(
                f"{where}: the hub refuses access ({_reason(exc)}); log in (hf auth login) or "
                f"{_local_copy_hint(kind, key, repo, revision)}"
            ) from None
        raise StudyError(f"{where}: the hub has no such {kind} ({key}: check the id)") from None
    except RevisionNotFoundError:
        raise StudyError(f"{where}: the hub has no such revision ({key}.revision: a branch, tag or commit)") from None
    except EntryNotFoundError as exc:
        raise StudyError(f"{where}: the repository has no such file ({_reason(exc)}; {key}.files)") from None
    except OfflineModeIsEnabled as exc:
        raise StudyError(
            f"{where}: the hub is off (HF_HUB_OFFLINE is set: {_reason(exc)}); "
            f"{_local_copy_hint(kind, key, repo, revision)}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - httpx, requests, OSError: the hub could not be reached
        if not _is_network_error(exc):
            raise
        raise StudyError(
            f"{where}: the hub cannot be reached ({_reason(exc)}); {_local_copy_hint(kind, key, repo, revision)}"
        ) from None


def answered_commit(kind: str, repo: str, revision: str, sha: str | None) -> str:
    """The commit the hub's info names for a revision; StudyError when it names none (the hub's client
    types it optional): the input would be fetched at whatever the revision is then, and locked as null."""
    if not sha:
        raise StudyError(f"{kind} {repo} at revision {revision}: the hub named no commit for it, nothing to pin it to")
    return sha


def _is_network_error(exc: BaseException) -> bool:
    """Connection, timeout, DNS, TLS and the hub client's 'not in the cache while offline'."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    modules = {cls.__module__.split(".")[0] for cls in type(exc).__mro__}
    return bool(
        names
        & {
            "ConnectError",
            "ConnectTimeout",
            "TimeoutException",
            "NetworkError",
            "ConnectionError",
            "LocalEntryNotFoundError",
            "HfHubHTTPError",
            "TransportError",
        }
        or modules & {"httpx", "httpcore", "requests", "urllib3"}
    )
