"""Known-bad KV budgets the ROAD-V1-MEM M3 profile gates must reject, each with its gate target's signature.

The mistakes (against vLLM 0.33.0's profile, vllm/utils/mem_utils.py and vllm/v1/worker/gpu_worker.py): the request
taken from free instead of total memory; the weights left out of the non-KV memory; the consumption measured from
`before_profile` instead of the start-up baseline; the pre-0.33 formula (weights + activation peak increase +
non-torch growth, the one impl and oracle shared before); the transient headroom taken against torch's reservation
instead of its allocation; free memory that grew during the profile accepted. The `*_budget` functions are the
mistakes themselves; the rest wrap them in the call shape of each gate.
"""
from __future__ import annotations

import math

from impl.worker.gpu_worker import check_free_memory_did_not_grow, num_blocks_with
from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from impl.v1.kv_cache_interface import KVCacheConfig
from impl.worker.kv_budget import KVCacheBudget, kv_cache_budget, request_memory
from impl.worker.memory_profiler import MemoryProfilingResult


def free_memory_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    request_memory(profile.before_create, gpu_memory_utilization)  # the start-up refusal is kept
    check_free_memory_did_not_grow(profile)
    requested = math.ceil(profile.before_create.free_memory * gpu_memory_utilization)
    return kv_cache_budget(requested, profile)


def weightless_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    """Only the profile's own growth: activation peak and non-torch growth, the weights left out."""
    requested = request_memory(profile.before_create, gpu_memory_utilization)
    check_free_memory_did_not_grow(profile)
    return KVCacheBudget(requested, profile.torch_peak_increase + profile.non_torch_increase)


def late_baseline_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    """The consumption read from before_profile's free memory, so what loading took is missed."""
    requested = request_memory(profile.before_create, gpu_memory_utilization)
    check_free_memory_did_not_grow(profile)
    consumed = profile.before_profile.free_memory - profile.after_profile.free_memory
    return KVCacheBudget(requested, consumed + profile.transient_peak_headroom)


def pre_033_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    """The formula before vLLM 0.33.0: weights + activation peak increase + non-torch growth since start-up."""
    requested = request_memory(profile.before_create, gpu_memory_utilization)
    return KVCacheBudget(requested, profile.weights_memory + profile.torch_peak_increase + profile.non_torch_increase)


def reserved_headroom_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    """The transient headroom against torch's reservation (peak - reserved, at least 0), not its allocation."""
    requested = request_memory(profile.before_create, gpu_memory_utilization)
    check_free_memory_did_not_grow(profile)
    after = profile.after_profile
    return KVCacheBudget(requested, profile.total_consumed + max(0, after.torch_peak - after.torch_memory))


def free_growth_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    """vLLM's formula without its check that free memory did not grow during the profile."""
    return kv_cache_budget(request_memory(profile.before_create, gpu_memory_utilization), profile)


# profile-kv-budget: (profile, gpu_memory_utilization) -> bytes
def budget_from_free(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return free_memory_budget(profile, gpu_memory_utilization).available_kv_cache_memory


def weights_not_counted(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return weightless_budget(profile, gpu_memory_utilization).available_kv_cache_memory


def consumed_since_before_profile(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return late_baseline_budget(profile, gpu_memory_utilization).available_kv_cache_memory


def pre_033_formula(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return pre_033_budget(profile, gpu_memory_utilization).available_kv_cache_memory


def headroom_from_reservation(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return reserved_headroom_budget(profile, gpu_memory_utilization).available_kv_cache_memory


def free_growth_accepted(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    return free_growth_budget(profile, gpu_memory_utilization).available_kv_cache_memory


# profile-util-blocks: (params, probe, profile) -> blocks
def blocks_budget_from_free(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    return num_blocks_with(free_memory_budget, params, probe, profile)


def blocks_weights_not_counted(params: EngineParams, probe: KVCacheConfig,
                               profile: MemoryProfilingResult | None) -> int:
    return num_blocks_with(weightless_budget, params, probe, profile)


def blocks_consumed_since_before_profile(params: EngineParams, probe: KVCacheConfig,
                                         profile: MemoryProfilingResult | None) -> int:
    return num_blocks_with(late_baseline_budget, params, probe, profile)


def blocks_pre_033_formula(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    return num_blocks_with(pre_033_budget, params, probe, profile)


def blocks_profile_ignored(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    """The pre-M3 resolver: the profile is never passed on, so the utilization path stays at 256 blocks."""
    return resolve_num_blocks(params, probe, None)
