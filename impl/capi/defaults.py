"""``vllm_model_params_default()`` in Python (CAPI-4.1).

Mirrors the defaults documented in spec/include/vllm.h (the C++ port's vllm_c.cpp).
"""
from __future__ import annotations

from impl.capi.abi import ModelParams

DEFAULT_BLOCK_SIZE = 32
DEFAULT_MAX_NUM_SEQS = 32
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92


def model_params_default() -> ModelParams:
    """Strings NULL, block_size 32, max_num_seqs 32, utilization 0.92, every other member 0."""
    return ModelParams(block_size=DEFAULT_BLOCK_SIZE, max_num_seqs=DEFAULT_MAX_NUM_SEQS,
                       gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION)
