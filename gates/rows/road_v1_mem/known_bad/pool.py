"""Known-bad readings of vLLM 0.33.0's KV pool for ROAD-V1-MEM's vllm-pool gate (each must be rejected)."""
from __future__ import annotations

from typing import Any, Mapping

from ..subjects_pool import vllm_pool

# --- vllm_pool(layout, max_model_len, max_num_batched_tokens, available_memory=None, num_blocks_override=None) ---


def _recount(pool: dict[str, Any], max_model_len: int, available_memory: int | None,
             num_blocks_override: int | None) -> dict[str, Any]:
    """The totals again from ``pool``'s groups and bytes per block, as vLLM counts them."""
    blocks = sum(g["blocks_per_request"] for g in pool["groups"])
    num_blocks = num_blocks_override if num_blocks_override is not None else available_memory // pool["bytes_per_block"]
    return {**pool, "num_blocks": num_blocks, "blocks_per_request": blocks,
            "kv_cache_tokens": int(num_blocks / blocks * max_model_len), "max_concurrency": round(num_blocks / blocks, 4)}


def pool_block_summed(layout: Mapping[str, Any], max_model_len: int, max_num_batched_tokens: int,
                      available_memory: int | None = None, num_blocks_override: int | None = None) -> dict[str, Any]:
    """A pool block that holds every group's pages (the C++ port's sum), not the largest group's."""
    pool = vllm_pool(layout, max_model_len, max_num_batched_tokens, available_memory, num_blocks_override)
    pool["bytes_per_block"] = sum(g["bytes_per_block"] for g in pool["groups"])
    return _recount(pool, max_model_len, available_memory, num_blocks_override)


def window_without_extra_block(layout: Mapping[str, Any], max_model_len: int, max_num_batched_tokens: int,
                               available_memory: int | None = None, num_blocks_override: int | None = None
                               ) -> dict[str, Any]:
    """A sliding-window group's need without the one block a window straddles."""
    pool = vllm_pool(layout, max_model_len, max_num_batched_tokens, available_memory, num_blocks_override)
    windowed = {name for g in layout["groups"] if g["spec"]["kind"] == "sliding_window" for name in g["layers"]}
    pool["groups"] = [{**g, "blocks_per_request": g["blocks_per_request"] - (g["layers"][0] in windowed)}
                      for g in pool["groups"]]
    return _recount(pool, max_model_len, available_memory, num_blocks_override)


def one_batch_in_flight(layout: Mapping[str, Any], max_model_len: int, max_num_batched_tokens: int,
                        available_memory: int | None = None, num_blocks_override: int | None = None
                        ) -> dict[str, Any]:
    """One scheduled batch in flight, not vLLM's two with async scheduling."""
    pool = vllm_pool(layout, max_model_len, (max_num_batched_tokens + 1) // 2, available_memory, num_blocks_override)
    return {**pool, "max_in_flight_tokens": max_num_batched_tokens}


def buckets_kept_whole(layout: Mapping[str, Any], max_model_len: int, max_num_batched_tokens: int,
                       available_memory: int | None = None, num_blocks_override: int | None = None
                       ) -> dict[str, Any]:
    """Each layout group one KV cache group, however unequal their sizes (no cut to one group size)."""
    pool = vllm_pool(layout, max_model_len, max_num_batched_tokens, available_memory, num_blocks_override)
    needs = {name: g["blocks_per_request"] for g in pool["groups"] for name in g["layers"]}
    groups = [{"layers": list(g["layers"]), "blocks_per_request": needs[g["layers"][0]],
               "bytes_per_block": pool["groups"][0]["bytes_per_block"] // len(pool["groups"][0]["layers"])
               * len(g["layers"])} for g in layout["groups"]]
    pool = {**pool, "groups": groups, "bytes_per_block": max(g["bytes_per_block"] for g in groups)}
    return _recount(pool, max_model_len, available_memory, num_blocks_override)
