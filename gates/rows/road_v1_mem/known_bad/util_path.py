"""Known-bad util-path-num-blocks implementations for the declared util-path deviations (spec/deviations.yaml,
util path; gate upstream-util-path-deviations, MEM-1.7, MEM-3.5). Each must be rejected. Each mistake is written
on (params, probe, profile) and given the profile-util-blocks subject's call shape by profile._blocks_gate."""
from __future__ import annotations

from impl.entrypoints.model_loader import EngineParams
from impl.v1.kv_cache_interface import KVCacheConfig, kv_bytes_per_block
from impl.worker.gpu_worker import determine_available_memory, profiled_num_blocks
from impl.worker.memory_profiler import MemoryProfilingResult

from .profile import _blocks_gate


def _no_fallback_without_profile(params: EngineParams, probe: KVCacheConfig,
                                profile: MemoryProfilingResult | None) -> int:
    """No pool at all without a profile or a knob, as if the port had vLLM's profile-only path (the C++ port's
    contract is a 256-block pool)."""
    if profile is None and params.num_blocks == 0 and params.kv_cache_memory_bytes == 0:
        raise ValueError("no memory profile and no sizing knob: nothing sizes the KV pool")
    return profiled_num_blocks(params, probe, profile)


def _block_count_unbounded(params: EngineParams, probe: KVCacheConfig,
                          profile: MemoryProfilingResult | None) -> int:
    """The budget's block count however large, as vLLM's planner counts it, where the int32_t num_blocks cannot
    hold it."""
    try:
        return profiled_num_blocks(params, probe, profile)
    except ValueError:
        budget = params.kv_cache_memory_bytes
        if not budget and profile is not None:
            budget = determine_available_memory(profile, float(params.gpu_memory_utilization)).available_kv_cache_memory
        blocks = budget // kv_bytes_per_block(probe)
        if blocks <= 2**31 - 1:
            raise
        return blocks


no_fallback_without_profile = _blocks_gate(_no_fallback_without_profile)
block_count_unbounded = _blocks_gate(_block_count_unbounded)
