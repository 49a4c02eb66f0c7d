"""The memory profiling result and the context manager that measures it (MEM-3.2).

Mirrors `MemoryProfilingResult` and `memory_profiling` of vllm/utils/mem_utils.py (0.33.0): the non-KV memory is
the drop in free memory since start-up plus the transient peak headroom; weights are recorded, not added.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Callable

from impl.worker.device_memory import DeviceMemoryReader
from impl.v1.field_checks import check_int
from impl.worker.memory_snapshot import MemorySnapshot, format_gib, measure_snapshot


@dataclass(frozen=True)
class MemoryProfilingResult:
    """Three snapshots of one device and the weights; every other figure is derived from them, in bytes."""

    before_create: MemorySnapshot   # the startup baseline, taken before the engine allocated anything
    before_profile: MemorySnapshot  # after the weights were loaded, just before the profile run
    after_profile: MemorySnapshot   # after the profile run, its garbage collected and the cache emptied
    weights_memory: int

    def __post_init__(self) -> None:
        for name in ("before_create", "before_profile", "after_profile"):
            value = getattr(self, name)
            if not isinstance(value, MemorySnapshot):
                raise TypeError(f"MemoryProfilingResult.{name} must be a MemorySnapshot, got {type(value).__name__}")
        check_int("MemoryProfilingResult", "weights_memory", self.weights_memory, minimum=0)
        # Subtracting checks that all three come from one device; the order must be chronological.
        if (self.before_profile - self.before_create).elapsed < 0 or self.profile_time < 0:
            raise ValueError("MemoryProfilingResult snapshots must be in time order before_create <= before_profile <= "
                             f"after_profile, got timestamps {self.before_create.timestamp}, "
                             f"{self.before_profile.timestamp}, {self.after_profile.timestamp}")

    @property
    def torch_peak_increase(self) -> int:
        """Peak torch allocation during the profile over the allocation when it started: the activation peak."""
        return (self.after_profile - self.before_profile).torch_peak

    @property
    def non_torch_increase(self) -> int:
        """Growth of non-torch memory since the startup baseline (not since `before_profile`)."""
        return (self.after_profile - self.before_create).non_torch_memory

    @property
    def total_consumed(self) -> int:
        """Device memory the instance took since the start-up baseline, read off free memory (not torch's
        reservation, which pluggable allocators bypass): before_create.free - after_profile.free."""
        return -(self.after_profile - self.before_create).free_memory

    @property
    def transient_peak_headroom(self) -> int:
        """The profile's peak allocation above what torch still holds allocated after it: activations that recur
        at every forward pass but are freed in between (total_consumed already counts what stays allocated)."""
        return self.after_profile.torch_peak - self.after_profile.torch_allocated

    @property
    def non_kv_cache_memory(self) -> int:
        """Everything the instance needs besides the KV cache (vLLM 0.33.0): total_consumed + transient headroom."""
        return self.total_consumed + self.transient_peak_headroom

    @property
    def profile_time(self) -> float:
        return (self.after_profile - self.before_profile).elapsed

    def __str__(self) -> str:
        return (f"Memory profiling takes {self.profile_time:.2f} seconds. Total non KV cache memory: "
                f"{format_gib(self.non_kv_cache_memory)}GiB; torch peak memory increase: "
                f"{format_gib(self.torch_peak_increase)}GiB; total consumed (from mem_get_info): "
                f"{format_gib(self.total_consumed)}GiB; weights memory: {format_gib(self.weights_memory)}GiB.")


class memory_profiling:  # noqa: N801 - named as vLLM's context manager
    """Profile the device memory of the block it guards.

    On entry: collect garbage, empty torch's cache, reset the peak statistics, measure `before_profile`.
    On a normal exit: collect garbage, empty the cache, measure `after_profile`; `result` is then set.
    An exception in the block propagates and leaves no result, as in vLLM.
    """

    def __init__(self, baseline: MemorySnapshot, weights_memory: int, reader: DeviceMemoryReader,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if not isinstance(baseline, MemorySnapshot):
            raise TypeError(f"memory_profiling.baseline must be a MemorySnapshot, got {type(baseline).__name__}")
        if baseline.device != reader.device:
            raise ValueError(f"memory_profiling.baseline is of {baseline.device!r} but the reader reads {reader.device!r}")
        check_int("memory_profiling", "weights_memory", weights_memory, minimum=0)
        self.baseline = baseline
        self.weights_memory = weights_memory
        self.reader = reader
        self.clock = clock
        self.before_profile: MemorySnapshot | None = None
        self._result: MemoryProfilingResult | None = None

    def __enter__(self) -> "memory_profiling":
        if self.before_profile is not None:
            raise RuntimeError("memory_profiling is single-use: this profile was already entered")
        gc.collect()
        self.reader.empty_cache()
        self.reader.reset_peak()
        self.before_profile = measure_snapshot(self.reader, self.clock)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if exc_type is not None:
            return None
        gc.collect()
        self.reader.empty_cache()
        after_profile = measure_snapshot(self.reader, self.clock)
        before_profile = self.before_profile
        if before_profile is None:
            raise RuntimeError("memory_profiling exited without having been entered")
        self._result = MemoryProfilingResult(self.baseline, before_profile, after_profile, self.weights_memory)
        return None

    @property
    def result(self) -> MemoryProfilingResult:
        if self._result is None:
            raise RuntimeError("memory_profiling.result is available only after the with-block exited normally")
        return self._result
