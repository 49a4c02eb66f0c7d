"""Subjects of the ROAD-V1-MEM M3 profile gates: impl.worker.gpu_worker's sizing path, as plain numbers."""
from __future__ import annotations

from impl.entrypoints.model_loader import EngineParams
from impl.v1.kv_cache_interface import KVCacheConfig
from impl.worker.gpu_worker import determine_available_memory, profiled_num_blocks
from impl.worker.memory_profiler import MemoryProfilingResult


def available_kv_cache_memory(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    """Gate target of profile-kv-budget: the bytes left for the KV cache."""
    return determine_available_memory(profile, gpu_memory_utilization).available_kv_cache_memory


def util_path_num_blocks(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    """Gate target of profile-util-blocks: the block count of the resolved pool."""
    return profiled_num_blocks(params, probe, profile)
