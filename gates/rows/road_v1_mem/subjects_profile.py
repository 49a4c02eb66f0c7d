"""The utilization path as the engine runs it, in the call shapes the ROAD-V1-MEM M3 gates check.

Start-up request (impl.worker.kv_budget.request_memory) -> profile -> KV budget -> resolve_num_blocks.
"""
from __future__ import annotations

from typing import Callable

from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from impl.v1.kv_cache_interface import KVCacheConfig
from impl.worker.kv_budget import KVCacheBudget, kv_cache_budget, request_memory
from impl.worker.memory_profiler import MemoryProfilingResult

BudgetFn = Callable[[MemoryProfilingResult, float], KVCacheBudget]


def kv_budget(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> KVCacheBudget:
    """The budget the worker computes: the start-up request (on the baseline snapshot) less the profile's non-KV."""
    return kv_cache_budget(request_memory(profile.before_create, gpu_memory_utilization), profile)


def available_kv_cache_memory(profile: MemoryProfilingResult, gpu_memory_utilization: float) -> int:
    """Gate target of profile-kv-budget: the bytes left for the KV cache."""
    return kv_budget(profile, gpu_memory_utilization).available_kv_cache_memory


def num_blocks_with(budget_fn: BudgetFn, params: EngineParams, probe: KVCacheConfig,
                    profile: MemoryProfilingResult | None) -> int:
    """The pool size with the budget computed by `budget_fn`.

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


def util_path_num_blocks(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    """Gate target of profile-util-blocks: the block count of the resolved pool."""
    return num_blocks_with(kv_budget, params, probe, profile)
