"""The vllm-pool operation's plain-data view of impl/v1/core/kv_pool_groups.py: vLLM 0.33.0's KV pool of a layout,
as kv-plan shows it beside the C++ port's figures (MEM-2.12; operations.yaml vllm-pool)."""
from __future__ import annotations

from typing import Any, Mapping

from .build import impl_kv_config


def vllm_pool(layout: Mapping[str, Any], max_model_len: int, max_num_batched_tokens: int,
              available_memory: int | None = None, num_blocks_override: int | None = None) -> dict[str, Any]:
    """Build the layout's KV config and read vLLM's pool for it; an unmodelled layout is the impl's refusal."""
    from impl.v1.core.kv_pool_groups import vllm_pool as impl_vllm_pool

    pool = impl_vllm_pool(impl_kv_config(layout), max_model_len, max_num_batched_tokens,
                          available_memory=available_memory, num_blocks_override=num_blocks_override)
    return {"groups": [{"layers": list(g.layer_names), "bytes_per_block": g.bytes_per_block,
                        "blocks_per_request": g.blocks_per_request} for g in pool.groups],
            "bytes_per_block": pool.bytes_per_block, "num_blocks": pool.num_blocks,
            "blocks_per_request": pool.blocks_per_request, "max_in_flight_tokens": pool.max_in_flight_tokens,
            "kv_cache_tokens": pool.kv_cache_tokens, "max_concurrency": round(pool.max_concurrency, 4)}
