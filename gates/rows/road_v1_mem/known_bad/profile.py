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
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from impl.worker.gpu_worker import check_free_memory_did_not_grow, num_blocks_with
from impl.entrypoints.model_loader import EngineParams, resolve_num_blocks
from impl.v1.kv_cache_interface import KVCacheConfig
from impl.worker.kv_budget import KVCacheBudget, kv_cache_budget, request_memory
from impl.worker.memory_profiler import MemoryProfilingResult

from ..subjects_profile import profiling_result, sizing_inputs


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


Readings = Mapping[str, Mapping[str, Any]]


def _budget_gate(mistake: Callable[[MemoryProfilingResult, float], KVCacheBudget]) -> Callable[..., int]:
    """A profile-kv-budget target (the subject's signature) whose budget is `mistake`'s."""
    def target(device: str, snapshots: Readings, weights_memory: int, gpu_memory_utilization: float) -> int:
        profile = profiling_result(device, snapshots, weights_memory)
        return mistake(profile, gpu_memory_utilization).available_kv_cache_memory
    target.__name__ = target.__qualname__ = mistake.__name__
    return target


def _blocks_gate(sizing: Callable[[EngineParams, KVCacheConfig, MemoryProfilingResult | None], int]) -> Callable[..., int]:
    """A profile-util-blocks target (the subject's signature) whose block count is `sizing`'s."""
    def target(device: str, snapshots: Readings, weights_memory: int, gpu_memory_utilization: float,
               kv: Mapping[str, Any], kv_cache_memory_bytes: int, profiled: bool) -> int:
        return sizing(*sizing_inputs(device, snapshots, weights_memory, gpu_memory_utilization, kv,
                                     kv_cache_memory_bytes, profiled))
    named = sizing.args[0] if isinstance(sizing, partial) else sizing
    target.__name__ = target.__qualname__ = f"blocks_{named.__name__.lstrip('_')}"
    return target


# profile-kv-budget: (device, snapshots, weights_memory, gpu_memory_utilization) -> bytes
budget_from_free = _budget_gate(free_memory_budget)
weights_not_counted = _budget_gate(weightless_budget)
consumed_since_before_profile = _budget_gate(late_baseline_budget)
pre_033_formula = _budget_gate(pre_033_budget)
headroom_from_reservation = _budget_gate(reserved_headroom_budget)
free_growth_accepted = _budget_gate(free_growth_budget)


def _profile_ignored(params: EngineParams, probe: KVCacheConfig, profile: MemoryProfilingResult | None) -> int:
    """The pre-M3 resolver: the profile is never passed on, so the utilization path stays at 256 blocks."""
    return resolve_num_blocks(params, probe, None)


# profile-util-blocks: (device, snapshots, weights_memory, gpu_memory_utilization, kv, kv_cache_memory_bytes, profiled)
blocks_budget_from_free = _blocks_gate(partial(num_blocks_with, free_memory_budget))
blocks_weights_not_counted = _blocks_gate(partial(num_blocks_with, weightless_budget))
blocks_consumed_since_before_profile = _blocks_gate(partial(num_blocks_with, late_baseline_budget))
blocks_pre_033_formula = _blocks_gate(partial(num_blocks_with, pre_033_budget))
blocks_profile_ignored = _blocks_gate(_profile_ignored)
