"""How a v15 engine sized the KV pool from vllm_model_params, which had no sizing knobs (CAPI-7.1, CAPI-7.2).

Models the pre-v16 C++ port (vllm_c.cpp, ResolveNumBlocks): num_blocks > 0 was the pool, else 256 blocks.
"""
from __future__ import annotations

V15_DEFAULT_NUM_BLOCKS = 256


def v15_pool(num_blocks: int) -> dict[str, object]:
    """``{"num_blocks": ..., "warnings": []}`` of a v15 struct whose ``num_blocks`` member is ``num_blocks``."""
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or not -2**31 <= num_blocks < 2**31:
        raise TypeError(f"num_blocks must be an int32_t value, got {num_blocks!r}")
    return {"num_blocks": num_blocks if num_blocks > 0 else V15_DEFAULT_NUM_BLOCKS, "warnings": []}
