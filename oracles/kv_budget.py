"""Oracle for the block count a set of sizing knobs gives (MEM-1.2 to MEM-1.7).

Mirrors vllm/v1/worker/gpu_worker.py (a byte budget is the available memory, verbatim) and
vllm/v1/core/kv_cache_utils.py (override, then blocks from memory). The count is found by searching
for the largest pool whose meta-device allocation stays within the budget, not by dividing; a count the
port's int32_t cannot hold is refused.
"""
from __future__ import annotations

from typing import Sequence

from oracles.kv_allocation import PagedLayer, StateLayer, allocated_bytes

FALLBACK_BLOCKS = 256  # the C++ port's pool until the profile run exists
INT32_BLOCKS = 2**31 - 1  # the port's block count is an int32_t (vllm_model_params.num_blocks, EngineParams)


def _paged_bytes(layers: Sequence[PagedLayer | StateLayer], blocks: int) -> int:
    """Bytes the pool takes for ``blocks`` blocks beyond what it takes for none."""
    return allocated_bytes(layers, blocks) - allocated_bytes(layers, 0)


def largest_pool_within(layers: Sequence[PagedLayer | StateLayer], budget: int) -> int:
    """The most blocks whose allocation fits in ``budget`` bytes (0 if not even one fits)."""
    if _paged_bytes(layers, 1) == 0:
        raise ValueError("these layers allocate nothing per block; a byte budget cannot size them")
    fits, too_many = 0, 1
    while _paged_bytes(layers, too_many) <= budget:
        fits, too_many = too_many, too_many * 2
    while too_many - fits > 1:
        middle = (fits + too_many) // 2
        if _paged_bytes(layers, middle) <= budget:
            fits = middle
        else:
            too_many = middle
    return fits


def blocks_for_knobs(*, num_blocks: int, kv_cache_memory_bytes: int, layers: Sequence[PagedLayer | StateLayer],
                     available_kv_cache_memory: int | None) -> int:
    """Blocks for the first knob that is set: override, byte budget, profiled memory, else the fallback."""
    sources = [("override", num_blocks if num_blocks > 0 else None),
               ("budget", kv_cache_memory_bytes if kv_cache_memory_bytes > 0 else None),
               ("profile", available_kv_cache_memory)]
    for source, value in sources:
        if value is None:
            continue
        if source == "override":
            return value
        if value <= 0:
            raise ValueError(f"no memory left for the KV cache ({value} bytes)")
        blocks = largest_pool_within(layers, value)
        if blocks == 0:
            raise ValueError(f"{value} bytes do not hold one KV block")
        if blocks > INT32_BLOCKS:
            raise ValueError(f"{value} bytes hold {blocks} blocks, more than an int32_t count ({INT32_BLOCKS})")
        return blocks
    return FALLBACK_BLOCKS
