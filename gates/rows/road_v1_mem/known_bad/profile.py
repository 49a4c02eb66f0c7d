"""Known-bad KV budgets the ROAD-V1-MEM M3 profile gates must reject, each with its gate target's signature.

The three mistakes: the budget taken from free instead of total memory; the weights not subtracted; the
non-torch growth measured from `before_profile` instead of the start-up baseline. The `*_budget` functions
are the mistakes themselves; the rest wrap them in the call shape of each gate.
"""
from __future__ import annotations

import math

from impl.worker.gpu_worker import num_blocks_with
from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from impl.v1.kv_cache_interface import KVCacheConfig
from impl.worker.kv_budget import KVCacheBudget, kv_cache_budget, request_memory
from impl.worker.memory_profiler import MemoryProfilingResult


def free_memory_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    request_memory(profile.before_create, gpu_memory_utilization)  # the start-up refusal is kept
    requested = math.ceil(profile.before_create.free_memory * gpu_memory_utilization)
    return kv_cache_budget(requested, profile)


def weightless_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    requested = request_memory(profile.before_create, gpu_memory_utilization)
    return KVCacheBudget(requested, profile.torch_peak_increase + profile.non_torch_increase)


def late_baseline_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    requested = request_memory(profile.before_create, gpu_memory_utilization)
    growth = (profile.after_profile - profile.before_profile).non_torch_memory
    return KVCacheBudget(requested, profile.weights_memory + profile.torch_peak_increase + growth)


# profile-kv-budget: (profile, gpu_memory_utilization) -> bytes
def budget_from_free(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return free_memory_budget(profile, gpu_memory_utilization).available_kv_cache_memory


def weights_not_subtracted(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return weightless_budget(profile, gpu_memory_utilization).available_kv_cache_memory


def non_torch_since_before_profile(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return late_baseline_budget(profile, gpu_memory_utilization).available_kv_cache_memory


# profile-util-blocks: (params, probe, profile) -> blocks
def blocks_budget_from_free(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    return num_blocks_with(free_memory_budget, params, probe, profile)


def blocks_weights_not_subtracted(params: EngineParams, probe: KVCacheConfig,
                                  profile: MemoryProfilingResult | None) -> int:
    return num_blocks_with(weightless_budget, params, probe, profile)


def blocks_non_torch_since_before_profile(params: EngineParams, probe: KVCacheConfig,
                                          profile: MemoryProfilingResult | None) -> int:
    return num_blocks_with(late_baseline_budget, params, probe, profile)


def blocks_profile_ignored(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    """The pre-M3 resolver: the profile is never passed on, so the utilization path stays at 256 blocks."""
    return resolve_num_blocks(params, probe, None)
