"""Device memory snapshots and their field-wise difference (MEM-3.1).

Mirrors `MemorySnapshot` and `format_gib` of vllm/utils/mem_utils.py (0.33.0); the readings come from a
`DeviceMemoryReader` (impl/worker/device_memory.py) so the arithmetic runs without a device.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

from impl.v1.field_checks import check_int
from impl.worker.device_memory import DeviceMemoryReader

GiB = 1 << 30


def format_gib(num_bytes: int) -> float:
    """Bytes as GiB rounded to two decimals, the form vLLM prints in its memory messages."""
    return round(num_bytes / GiB, 2)


@dataclass(frozen=True)
class MemorySnapshot:
    """What one device holds at one moment: torch's peak and current allocation, free/total memory, torch-reserved
    memory (vLLM 0.33.0 reads `torch_allocated` too, for the profile's transient peak headroom, MEM-3.2).

    A snapshot recorded without the allocated reading (`torch_allocated` None) takes the most the other readings
    allow, min(torch_peak, torch_memory): torch never holds more allocated bytes than its peak or its reservation.
    """

    device: str
    torch_peak: int
    free_memory: int
    total_memory: int
    torch_memory: int
    timestamp: float
    torch_allocated: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or not self.device:
            raise ValueError(f"MemorySnapshot.device must be a non-empty device name such as 'cuda:0', got {self.device!r}")
        for name in ("torch_peak", "free_memory", "total_memory", "torch_memory"):
            check_int("MemorySnapshot", name, getattr(self, name), minimum=0)
        if self.torch_allocated is None:
            object.__setattr__(self, "torch_allocated", min(self.torch_peak, self.torch_memory))
        check_int("MemorySnapshot", "torch_allocated", self.torch_allocated, minimum=0)
        if self.torch_allocated > self.torch_peak:
            raise ValueError(f"MemorySnapshot.torch_allocated ({self.torch_allocated}) must be <= torch_peak "
                             f"({self.torch_peak}); the peak allocation is never below the current one")
        if self.total_memory == 0:
            raise ValueError("MemorySnapshot.total_memory must be > 0 bytes, got 0")
        if self.free_memory > self.total_memory:
            raise ValueError(f"MemorySnapshot.free_memory ({self.free_memory}) must be <= total_memory ({self.total_memory})")
        if self.torch_memory > self.cuda_memory:
            raise ValueError(f"MemorySnapshot.torch_memory ({self.torch_memory}) must be <= the device memory in use "
                             f"(total - free = {self.cuda_memory}); torch cannot reserve more than the device has handed out")
        if isinstance(self.timestamp, bool) or not isinstance(self.timestamp, (int, float)) or not math.isfinite(self.timestamp):
            raise ValueError(f"MemorySnapshot.timestamp must be a finite number of seconds, got {self.timestamp!r}")

    @property
    def cuda_memory(self) -> int:
        """Device memory in use by anyone: total - free."""
        return self.total_memory - self.free_memory

    @property
    def non_torch_memory(self) -> int:
        """Device memory in use that torch's allocator did not reserve: used - reserved."""
        return self.cuda_memory - self.torch_memory

    def __sub__(self, other: "MemorySnapshot") -> "MemoryDelta":
        if not isinstance(other, MemorySnapshot):
            return NotImplemented
        if other.device != self.device:
            raise ValueError(f"snapshots of different devices cannot be subtracted: {self.device!r} - {other.device!r}")
        if other.total_memory != self.total_memory:
            raise ValueError(f"snapshots of {self.device!r} disagree on total_memory ({self.total_memory} vs "
                             f"{other.total_memory}); they cannot come from one device")
        return MemoryDelta(
            device=self.device,
            torch_peak=self.torch_peak - other.torch_peak,
            torch_allocated=self.torch_allocated - other.torch_allocated,
            free_memory=self.free_memory - other.free_memory,
            cuda_memory=self.cuda_memory - other.cuda_memory,
            torch_memory=self.torch_memory - other.torch_memory,
            non_torch_memory=self.non_torch_memory - other.non_torch_memory,
            elapsed=float(self.timestamp - other.timestamp),
        )


@dataclass(frozen=True)
class MemoryDelta:
    """Field-wise difference of two snapshots of one device (`later - earlier`); any field may be negative."""

    device: str
    torch_peak: int
    torch_allocated: int
    free_memory: int
    cuda_memory: int
    torch_memory: int
    non_torch_memory: int
    elapsed: float


def measure_snapshot(reader: DeviceMemoryReader, clock: Callable[[], float] = time.perf_counter) -> MemorySnapshot:
    """Read the device once through `reader` and return the snapshot."""
    torch_peak = reader.peak_allocated()
    torch_allocated = reader.allocated()
    free, total = reader.mem_get_info()
    return MemorySnapshot(
        device=reader.device,
        torch_peak=torch_peak,
        free_memory=free,
        total_memory=total,
        torch_memory=reader.reserved(),
        timestamp=clock(),
        torch_allocated=torch_allocated,
    )
