"""The worker's sizing path with a device measured (MEM-3.3, MEM-3.5): start-up request, profile budget, pool size.

Mirrors vllm/v1/worker/gpu_worker.py (0.33.0; init_device's memory request, determine_available_memory) as the engine
hands the budget to vllm/v1/core/kv_cache_utils.py; the budget function is a parameter so one step can be swapped.
"""
from __future__ import annotations

from typing import Callable

from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from impl.v1.kv_cache_interface import KVCacheConfig
from impl.worker.kv_budget import KVCacheBudget, kv_cache_budget, request_memory
from impl.worker.memory_profiler import MemoryProfilingResult
from impl.worker.memory_snapshot import format_gib

BudgetFn = Callable[[MemoryProfilingResult, float], KVCacheBudget]


def check_free_memory_did_not_grow(profile: MemoryProfilingResult) -> None:
    """vLLM 0.33.0's profiling check (determine_available_memory, vllm/v1/worker/gpu_worker.py): free memory after the
    profile above free memory at start-up means another process released memory meanwhile, and the budget read off
    free memory would be wrong. vLLM asserts; the port refuses with the same text (MEM-3.4)."""
    initial, current = profile.before_create.free_memory, profile.after_profile.free_memory
    if initial < current:
        raise ValueError(
            f"Error in memory profiling. Initial free memory {format_gib(initial)} GiB, current free memory "
            f"{format_gib(current)} GiB. This happens when other processes sharing the same container release GPU "
            "memory while vLLM is profiling during initialization. To fix this, ensure consistent GPU memory "
            "allocation or isolate vLLM in its own container.")


def determine_available_memory(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    """The KV budget: the start-up request (on the baseline snapshot) less the profile's non-KV memory, after
    vLLM's check that free memory did not grow during the profile."""
    requested = request_memory(profile.before_create, gpu_memory_utilization)
    check_free_memory_did_not_grow(profile)
    return kv_cache_budget(requested, profile)


def num_blocks_with(budget_fn: BudgetFn, params: EngineParams, probe: KVCacheConfig,
                    profile: MemoryProfilingResult | None) -> int:
    """The pool size with the budget computed by ``budget_fn``.

    With a profile (a device was measured) the start-up request is checked whatever sizes the pool, as vLLM's
    init_device does; the profile's budget is computed only when neither num_blocks nor the byte knob wins.
    """
    budget = None
    if profile is not None:
        utilization = float(params.gpu_memory_utilization)
        request_memory(profile.before_create, utilization)
        if params.num_blocks == 0 and params.kv_cache_memory_bytes == 0:
            budget = budget_fn(profile, utilization)
    return resolve_num_blocks(params, probe, budget)


def profiled_num_blocks(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    """The block count the engine resolves when the worker profiled the device (or none, without a profile)."""
    return num_blocks_with(determine_available_memory, params, probe, profile)
