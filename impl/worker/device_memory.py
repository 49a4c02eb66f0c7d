"""Where memory readings come from: a reader interface and its torch.cuda implementation (MEM-3.1).

Mirrors the torch.cuda calls of `MemorySnapshot.measure` and `memory_profiling` in vllm/utils/mem_utils.py.
"""
from __future__ import annotations

from typing import Protocol

import torch

# Compute capabilities of devices that share system memory with the CPU (Orin, Thor, Spark/GB10); on
# those vLLM takes free memory from the operating system's available memory, not from cudaMemGetInfo.
UMA_CAPABILITIES = frozenset({(8, 7), (11, 0), (12, 1)})


class DeviceMemoryReader(Protocol):
    """The device-memory readings and controls a snapshot and a profiling run need."""

    device: str

    def mem_get_info(self) -> tuple[int, int]:
        """(free, total) device memory in bytes."""

    def peak_allocated(self) -> int:
        """Peak bytes allocated by torch since the last `reset_peak`."""

    def allocated(self) -> int:
        """Bytes allocated by torch now."""

    def reserved(self) -> int:
        """Bytes torch's caching allocator holds from the device now."""

    def empty_cache(self) -> None:
        """Return torch's unused cached blocks to the device."""

    def reset_peak(self) -> None:
        """Restart peak tracking from the current allocation."""


def _system_available_bytes(meminfo: str = "/proc/meminfo") -> int:
    """MemAvailable of the operating system in bytes (what vLLM reads through psutil on UMA devices)."""
    with open(meminfo, encoding="ascii") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                value, unit = line.split()[1:3]
                if unit != "kB":
                    raise ValueError(f"{meminfo}: MemAvailable in unexpected unit {unit!r} (expected 'kB')")
                return int(value) * 1024
    raise ValueError(f"{meminfo} has no MemAvailable line")


class CudaMemoryReader:
    """Reads one CUDA device through torch.cuda."""

    def __init__(self, device: str | int | torch.device = "cuda") -> None:
        if not torch.cuda.is_available():
            raise RuntimeError("CudaMemoryReader needs a CUDA device, but torch.cuda.is_available() is False")
        resolved = torch.device("cuda", device) if isinstance(device, int) and not isinstance(device, bool) else torch.device(device)
        if resolved.type != "cuda":
            raise ValueError(f"CudaMemoryReader.device must be a CUDA device, got {device!r}")
        index = torch.cuda.current_device() if resolved.index is None else resolved.index
        self._device = torch.device("cuda", index)
        self.device = str(self._device)
        self._shares_system_memory = torch.cuda.get_device_capability(index) in UMA_CAPABILITIES

    def mem_get_info(self) -> tuple[int, int]:
        free, total = torch.cuda.mem_get_info(self._device)
        if self._shares_system_memory:
            free = _system_available_bytes()
        return int(free), int(total)

    def peak_allocated(self) -> int:
        return int(torch.cuda.max_memory_allocated(self._device))

    def allocated(self) -> int:
        return int(torch.cuda.memory_allocated(self._device))

    def reserved(self) -> int:
        return int(torch.cuda.memory_reserved(self._device))

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self._device)
