"""vLLM 0.33.0's texts for a KV cache that does not fit (vllm/v1/core/kv_cache_planning.py), in a module that
imports nothing: the flag parser and kv-plan start without torch and still print them (MEM-3.4, MEM-3.6)."""
from __future__ import annotations

CONSERVING_MEMORY_DOCS = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"

NO_AVAILABLE_MEMORY_MESSAGE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
    "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). "
    f"See {CONSERVING_MEMORY_DOCS} for more details."
)
"""The refusal of a KV budget that holds no block beyond the null block."""
