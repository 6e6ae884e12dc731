"""A `cpu` platform for verl: device "cpu", backend gloo, memory counters from the process itself."""

from __future__ import annotations

import resource
import sys
import types
from contextlib import contextmanager
from typing import Any

import psutil
import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry


def _peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux: the process's high-water mark, the CPU stand-in for peak GPU memory.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss_bytes() -> int:
    return psutil.Process().memory_info().rss


def _build_device_module() -> types.ModuleType:
    """A stand-in for torch.cuda built on torch.cpu; memory figures describe this process's RAM."""
    module = types.ModuleType("rlvr_scaling_cpu_device")
    for name in ("Event", "Stream", "current_stream", "stream", "synchronize", "is_available"):
        setattr(module, name, getattr(torch.cpu, name))

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return memory.available, memory.total

    # Set by name: a module object has no such attributes for a type checker to know.
    functions: dict[str, Any] = {
        "current_device": lambda: torch.device("cpu"),
        "device_count": lambda: 1,
        "set_device": lambda index: None,
        "empty_cache": lambda: None,
        "ipc_collect": lambda: None,
        "set_per_process_memory_fraction": lambda fraction, device=None: None,
        "get_device_name": lambda device=None: "cpu",
        "get_rng_state": lambda device=None: torch.get_rng_state(),
        "set_rng_state": lambda state, device=None: torch.set_rng_state(state),
        "manual_seed": torch.manual_seed,
        "manual_seed_all": torch.manual_seed,
        "memory_allocated": lambda device=None: _rss_bytes(),
        "memory_reserved": lambda device=None: _rss_bytes(),
        "max_memory_allocated": lambda device=None: _peak_rss_bytes(),
        "max_memory_reserved": lambda device=None: _peak_rss_bytes(),
        "reset_peak_memory_stats": lambda device=None: None,
        "mem_get_info": mem_get_info,
    }
    for name, function in functions.items():
        setattr(module, name, function)
    return module


_DEVICE_MODULE = _build_device_module()
sys.modules.setdefault(_DEVICE_MODULE.__name__, _DEVICE_MODULE)


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """Selected with VERL_PLATFORM=cpu; Ray "GPU" slots stand for CPU workers."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: only VERL_PLATFORM=cpu selects it.
        return False

    def current_device(self) -> Any:
        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
