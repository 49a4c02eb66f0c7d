"""A scripted device for the M3 tests: torch's caching allocator and memory outside it, with a call log."""
from __future__ import annotations

SEGMENT = 2 << 20  # the allocator takes memory from the device in 2 MiB steps


class ScriptedDevice:
    """Implements impl.worker.device_memory.DeviceMemoryReader over plain counters."""

    def __init__(self, total: int, used_by_others: int = 0, device: str = "cuda:0") -> None:
        self.device = device
        self.total = total
        self.outside_torch = used_by_others
        self.allocated_bytes = 0
        self.reserved_bytes = 0
        self.peak = 0
        self.calls: list[str] = []

    # what a workload does
    def allocate(self, num_bytes: int) -> None:
        self.allocated_bytes += num_bytes
        self.peak = max(self.peak, self.allocated_bytes)
        if self.allocated_bytes > self.reserved_bytes:
            self.reserved_bytes = -(-self.allocated_bytes // SEGMENT) * SEGMENT

    def free(self, num_bytes: int) -> None:
        self.allocated_bytes -= num_bytes  # the segments stay cached until empty_cache

    def take_outside_torch(self, num_bytes: int) -> None:
        self.outside_torch += num_bytes

    # the reader interface
    def mem_get_info(self) -> tuple[int, int]:
        self.calls.append("mem_get_info")
        return self.total - self.reserved_bytes - self.outside_torch, self.total

    def peak_allocated(self) -> int:
        self.calls.append("peak_allocated")
        return self.peak

    def allocated(self) -> int:
        return self.allocated_bytes

    def reserved(self) -> int:
        self.calls.append("reserved")
        return self.reserved_bytes

    def empty_cache(self) -> None:
        self.calls.append("empty_cache")
        self.reserved_bytes = -(-self.allocated_bytes // SEGMENT) * SEGMENT

    def reset_peak(self) -> None:
        self.calls.append("reset_peak")
        self.peak = self.allocated_bytes


class Clock:
    """A clock that advances by `step` seconds per reading."""

    def __init__(self, start: float = 100.0, step: float = 0.5) -> None:
        self.now, self.step = start, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now
