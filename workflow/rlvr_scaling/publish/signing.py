"""Signed bundles: OpenSSH's `ssh-keygen -Y sign` (on every cluster's login node) over the archive's
bytes, the signature beside it as `<bundle>.sig`; `verify --allowed-signers FILE` checks it against the
signers a reader trusts (OpenSSH's allowed_signers format: `principal key-type key`). Checksums prove
the bundle is whole; the signature proves who made it. Unsigned stays the default."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from rlvr_scaling.errors import StudyError

# The signature's namespace: a signature made for anything else (git commits, files) never passes.
NAMESPACE = "rlvr-scaling-bundle"


def signature_path(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + ".sig")


def _ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise StudyError("signing needs OpenSSH's ssh-keygen on PATH (Debian: openssh-client)")
    return found


def sign_bundle(bundle: Path, key: Path) -> Path:
    """`<bundle>.sig`, made with the private `key` (a key in an agent: its public file)."""
    if not bundle.is_file():
        raise StudyError(f"sign: {bundle} is not a file")
    if not key.is_file():
        raise StudyError(f"sign: --sign {key} is not a key file")
    signature = signature_path(bundle)
    signature.unlink(missing_ok=True)  # ssh-keygen asks before overwriting one
    done = subprocess.run(
        [_ssh_keygen(), "-Y", "sign", "-q", "-f", str(key), "-n", NAMESPACE, str(bundle)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0 or not signature.is_file():
        raise StudyError(f"sign: ssh-keygen could not sign {bundle.name} with {key}: {done.stderr.strip()}")
    return signature


def check_signature(bundle: Path, allowed_signers: Path) -> tuple[str | None, str | None]:
    """(who signed it, None), or (None, why it does not verify)."""
    signature = signature_path(bundle)
    if not signature.is_file():
        return None, f"{signature.name}: no signature beside the bundle"
    if not allowed_signers.is_file():
        return None, f"--allowed-signers {allowed_signers}: not a file"
    keygen = _ssh_keygen()
    found = subprocess.run(
        [keygen, "-Y", "find-principals", "-s", str(signature), "-f", str(allowed_signers)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    principals = found.stdout.split()
    if found.returncode != 0 or not principals:
        return None, f"{signature.name}: made by a key that is not in {allowed_signers.name}"
    with open(bundle, "rb") as data:
        checked = subprocess.run(
            [keygen, "-Y", "verify", "-f", str(allowed_signers), "-I", principals[0], "-n", NAMESPACE,
             "-s", str(signature)],
            stdin=data,
            capture_output=True,
            text=True,
        )  # fmt: skip
    if checked.returncode != 0:
        reason = (checked.stderr or checked.stdout).strip().splitlines()
        return None, f"{signature.name}: does not verify for {principals[0]} ({reason[-1] if reason else 'no reason'})"
    return principals[0], None
