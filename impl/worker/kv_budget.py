"""The memory an instance may use and what of it is left for the KV cache (MEM-3.3, MEM-3.4).

Mirrors `request_memory` of vllm/v1/worker/utils.py and the budget step of `determine_available_memory` in
vllm/v1/worker/gpu_worker.py (without CUDA-graph estimation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from impl.v1.core.kv_cache_utils import NO_AVAILABLE_MEMORY_MESSAGE
from impl.worker.memory_profiler import MemoryProfilingResult
from impl.v1.field_checks import check_fraction, check_int
from impl.worker.memory_snapshot import MemorySnapshot, format_gib


def request_memory(init_snapshot: MemorySnapshot, gpu_memory_utilization: float) -> int:
    """ceil(total * utilization) of the startup snapshot; refused with vLLM's message when free memory is below it.

    The product is the IEEE double product, as upstream computes it.
    """
    utilization = check_fraction("request_memory", "gpu_memory_utilization", gpu_memory_utilization)
    if not isinstance(init_snapshot, MemorySnapshot):
        raise TypeError(f"init_snapshot must be a MemorySnapshot, got {type(init_snapshot).__name__}")
    requested_memory = math.ceil(init_snapshot.total_memory * utilization)
    if init_snapshot.free_memory < requested_memory:
        raise ValueError(
            f"Free memory on device {init_snapshot.device} ({format_gib(init_snapshot.free_memory)}/"
            f"{format_gib(init_snapshot.total_memory)} GiB) on startup is less than desired GPU memory utilization "
            f"({utilization}, {format_gib(requested_memory)} GiB). Decrease GPU memory utilization or "
            f"reduce GPU memory used by other processes."
        )
    return requested_memory


@dataclass(frozen=True)
class KVCacheBudget:
    """The requested memory less everything that is not KV cache; refused when nothing is left."""

    requested_memory: int
    non_kv_cache_memory: int

    def __post_init__(self) -> None:
        check_int("KVCacheBudget", "requested_memory", self.requested_memory, minimum=0)
        if isinstance(self.non_kv_cache_memory, bool) or not isinstance(self.non_kv_cache_memory, int):
            raise TypeError(f"KVCacheBudget.non_kv_cache_memory must be an int number of bytes, got {self.non_kv_cache_memory!r}")
        if self.available_kv_cache_memory <= 0:
            raise ValueError(NO_AVAILABLE_MEMORY_MESSAGE)

    @property
    def available_kv_cache_memory(self) -> int:
        return self.requested_memory - self.non_kv_cache_memory

    def __str__(self) -> str:
        return f"Available KV cache memory: {format_gib(self.available_kv_cache_memory)} GiB"


def kv_cache_budget(requested_memory: int, profile: MemoryProfilingResult) -> KVCacheBudget:
    """The KV budget a finished profile leaves of the requested memory."""
    if not isinstance(profile, MemoryProfilingResult):
        raise TypeError(f"profile must be a MemoryProfilingResult, got {type(profile).__name__}")
    return KVCacheBudget(requested_memory=requested_memory, non_kv_cache_memory=profile.non_kv_cache_memory)
