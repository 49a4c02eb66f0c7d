"""Independent re-derivation of vLLM's KV memory budget, pool size and length fit (MEM-3.2 to MEM-3.7).

Restates vllm/utils/mem_utils.py, vllm/v1/worker/utils.py and vllm/v1/core/kv_cache_utils.py from raw readings:
non-torch growth is read off the drop in free memory less the growth in torch's reservation, KV bytes are
measured from meta tensors, and the longest length that fits is a closed form instead of a search.
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

FALLBACK_NUM_BLOCKS = 256  # the C++ port's pool size when nothing sized it (ROAD-V1-MEM M1)


def _reading(snapshot: Mapping[str, object], key: str) -> int:
    value = snapshot[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"reading {key} must be a non-negative int, got {value!r}")
    return value


def _ceil_of_product(total: int, fraction: float) -> int:
    """The smallest int not below the double `total * fraction` (upstream's float product, rounded up)."""
    product = total * fraction
    whole = int(product)
    return whole if whole == product else whole + 1


def startup_share(baseline: Mapping[str, object], gpu_memory_utilization: float) -> int:
    """The share of the device the instance may use; ValueError when start-up finds less than that free."""
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization {gpu_memory_utilization!r} outside (0, 1]")
    allowed = _ceil_of_product(_reading(baseline, "total_memory"), gpu_memory_utilization)
    if _reading(baseline, "free_memory") < allowed:
        raise ValueError("free memory at start-up is below the requested share")
    return allowed


def available_kv_cache_bytes(baseline: Mapping[str, object], before_profile: Mapping[str, object],
                             after_profile: Mapping[str, object], weights_memory: int,
                             gpu_memory_utilization: float) -> int:
    """Bytes left for the KV cache, or ValueError where vLLM refuses to start or has nothing left."""
    readings = (baseline, before_profile, after_profile)
    if len({r["device"] for r in readings}) != 1 or len({_reading(r, "total_memory") for r in readings}) != 1:
        raise ValueError("the three readings must come from one device")
    allowed = startup_share(baseline, gpu_memory_utilization)
    activation_peak = _reading(after_profile, "torch_peak") - _reading(before_profile, "torch_peak")
    free_drop = _reading(baseline, "free_memory") - _reading(after_profile, "free_memory")
    reservation_growth = _reading(after_profile, "torch_memory") - _reading(baseline, "torch_memory")
    grown_outside_torch = free_drop - reservation_growth  # device memory taken since start-up, not by torch

    left = allowed - weights_memory - activation_peak - grown_outside_torch
    if left <= 0:
        raise ValueError("no memory left for the KV cache")
    return left


def measured_block_bytes(block_size: int, num_kv_heads: int, head_size: int, dtype: str) -> int:
    """Bytes of K and V for `block_size` tokens of one layer, as torch sizes a meta tensor of that shape."""
    block = torch.empty((2, block_size, num_kv_heads, head_size), dtype=getattr(torch, dtype), device="meta")
    return block.nbytes


def pool_num_blocks(baseline: Mapping[str, object], before_profile: Mapping[str, object],
                    after_profile: Mapping[str, object], weights_memory: int, gpu_memory_utilization: float,
                    num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                    kv_cache_memory_bytes: int, profiled: bool) -> int:
    """Blocks of a pool of `num_layers` full-attention layers: an explicit byte budget first, then the profile.

    A measured device is checked at start-up whatever sizes the pool.
    """
    per_block = num_layers * measured_block_bytes(block_size, num_kv_heads, head_size, dtype)
    if profiled:
        startup_share(baseline, gpu_memory_utilization)
    if kv_cache_memory_bytes > 0:
        budget = kv_cache_memory_bytes
    elif profiled:
        budget = available_kv_cache_bytes(baseline, before_profile, after_profile, weights_memory,
                                          gpu_memory_utilization)
    else:
        return FALLBACK_NUM_BLOCKS
    if budget < per_block:
        raise ValueError("the budget does not hold one block")
    return budget // per_block


def longest_fitting_len(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                        available_memory: int, max_model_len: int) -> int:
    """Longest request (at most max_model_len) whose whole blocks in every layer fit; 0 if none does."""
    per_block = num_layers * measured_block_bytes(block_size, num_kv_heads, head_size, dtype)
    whole_blocks = max(available_memory, 0) // per_block
    return min(whole_blocks * block_size, max_model_len)


def refuse_if_too_small(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                        available_memory: int, max_model_len: int) -> None:
    """ValueError when the budget is empty or cannot hold one request of max_model_len tokens."""
    if available_memory <= 0:
        raise ValueError("no memory for the cache blocks")
    if longest_fitting_len(num_layers, block_size, num_kv_heads, head_size, dtype, available_memory,
                           max_model_len) < max_model_len:
        raise ValueError("one request of max_model_len does not fit")
