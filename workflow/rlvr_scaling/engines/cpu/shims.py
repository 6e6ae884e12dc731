"""Shims for CUDA assumptions hard-coded in verl 0.9.1 (see docs/cpu-engine.md)."""

from __future__ import annotations

import functools

import torch.distributed


def _dedup_backend(backend: str | None) -> str | None:
    # verl builds "cpu:gloo,cpu:gloo" from (device, backend) pairs; torch rejects the duplicate.
    if not backend or "," not in backend:
        return backend
    parts = list(dict.fromkeys(p.strip() for p in backend.split(",") if p.strip()))
    return ",".join(parts)


def _patch_init_process_group() -> None:
    original = torch.distributed.init_process_group
    if getattr(original, "_rlvr_patched", False):
        return

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        if "backend" in kwargs:
            kwargs["backend"] = _dedup_backend(kwargs["backend"])
        elif args:
            args = (_dedup_backend(args[0]), *args[1:])
        return original(*args, **kwargs)

    init_process_group._rlvr_patched = True  # type: ignore[attr-defined]  # a mark on torch's function: patched once
    torch.distributed.init_process_group = init_process_group


def install() -> None:
    # The reference model's pinned CPUOffloadPolicy (a second shim verl on CPU would need) only matters with a KL
    # term; the study runs without one (no reference model is built), so it is not patched.
    _patch_init_process_group()
