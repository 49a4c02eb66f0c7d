"""Subjects of the ROAD-V1-MEM M3 profile gates: impl.worker.gpu_worker's sizing path, as plain numbers.

Each subject builds the impl's snapshots and profile from the case's raw readings itself, so the impl's refusals of
inconsistent readings (MEM-3.1: free above total, no total, totals or devices that differ, time out of order) are
its answers to the case, not failures of the gate's builder.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from impl.entrypoints.model_loader import EngineParams
from impl.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from impl.worker.gpu_worker import determine_available_memory, profiled_num_blocks
from impl.worker.memory_profiler import MemoryProfilingResult
from impl.worker.memory_snapshot import MemorySnapshot

PHASES = ("before_create", "before_profile", "after_profile")


def profiling_result(device: str, snapshots: Mapping[str, Mapping[str, Any]], weights_memory: int) -> MemoryProfilingResult:
    """The impl's profiling result of three recorded readings of `device` (each MemorySnapshot's fields)."""
    return MemoryProfilingResult(*(MemorySnapshot(device=device, **snapshots[phase]) for phase in PHASES),
                                 weights_memory=weights_memory)


def kv_probe(kv: Mapping[str, Any]) -> KVCacheConfig:
    """A one-group KV config of `num_layers` full-attention layers (the block count is irrelevant to sizing)."""
    spec = FullAttentionSpec(block_size=kv["block_size"], num_kv_heads=kv["num_kv_heads"], head_size=kv["head_size"],
                             dtype=getattr(torch, kv["dtype"]))
    names = tuple(f"model.layers.{i}.self_attn" for i in range(kv["num_layers"]))
    return KVCacheConfig(num_blocks=0, kv_cache_tensors=(), kv_cache_groups=(KVCacheGroupSpec(names, spec),))


def available_kv_cache_memory(device: str, snapshots: Mapping[str, Mapping[str, Any]], weights_memory: int,
                              gpu_memory_utilization: float) -> int:
    """Gate target of profile-kv-budget: the bytes left for the KV cache."""
    profile = profiling_result(device, snapshots, weights_memory)
    return determine_available_memory(profile, gpu_memory_utilization).available_kv_cache_memory


def sizing_inputs(device: str, snapshots: Mapping[str, Mapping[str, Any]], weights_memory: int,
                  gpu_memory_utilization: float, kv: Mapping[str, Any], kv_cache_memory_bytes: int,
                  profiled: bool) -> tuple[EngineParams, KVCacheConfig, MemoryProfilingResult | None]:
    """profile-util-blocks' case as the sizing path takes it: (params, probe, profile); without a profile the
    utilization is left at its default, as a caller without M3 would."""
    if not profiled:
        return EngineParams(kv_cache_memory_bytes=kv_cache_memory_bytes), kv_probe(kv), None
    params = EngineParams(gpu_memory_utilization=gpu_memory_utilization, kv_cache_memory_bytes=kv_cache_memory_bytes)
    return params, kv_probe(kv), profiling_result(device, snapshots, weights_memory)


def util_path_num_blocks(device: str, snapshots: Mapping[str, Mapping[str, Any]], weights_memory: int,
                         gpu_memory_utilization: float, kv: Mapping[str, Any], kv_cache_memory_bytes: int,
                         profiled: bool) -> int:
    """Gate target of profile-util-blocks: the block count of the resolved pool."""
    return profiled_num_blocks(*sizing_inputs(device, snapshots, weights_memory, gpu_memory_utilization, kv,
                                              kv_cache_memory_bytes, profiled))
