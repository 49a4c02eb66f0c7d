"""vLLM's KV fit check and max-length estimate as plain data (ROAD-V1-MEM M3: kv-fit-check, estimate-max-model-len).

The case input is the rows' fit shape (gates/rows/road_v1_mem/build_fit.py): ``num_layers`` full-attention layers
of ``{block_size, num_kv_heads, head_size, dtype}``, ``available_memory`` bytes and ``max_model_len``. vLLM's
functions (vllm/v1/core/kv_cache_planning.py, 0.33.0) take a VllmConfig and ``{layer name: KVCacheSpec}``; the
config is a real one (upstream/_config.py: ModelConfig over a synthetic local config.json, CacheConfig,
ParallelConfig, the default SchedulerConfig; no device is touched; the KV cache layout resolved as the engine core
resolves it), with ``model_config.max_model_len`` and
``cache_config.block_size`` set to the case's. ``specs`` may instead give a list of SPEC mappings, one per layer
(upstream/kv_specs.py shapes, backend layout).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import upstream  # noqa: F401  (environment before vLLM's import)
from upstream._config import dtype, vllm_config
from upstream.kv_specs import build_spec

from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
from vllm.v1.core import kv_cache_planning
from vllm.v1.kv_cache_interface import FullAttentionSpec


def _layer_specs(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype_name: str,
                 specs: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    if specs is not None:
        return {f"model.layers.{i}.self_attn": build_spec(spec) for i, spec in enumerate(specs)}
    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=num_kv_heads, head_size=head_size,
                             dtype=dtype(dtype_name))
    return {f"model.layers.{i}.self_attn": spec for i in range(num_layers)}


def _config(max_model_len: int, block_size: int, max_num_batched_tokens: int | None,
            specs_by_layer: Mapping[str, Any]) -> Any:
    """The config, with the KV cache layout resolved as the engine core does before sizing the pool
    (vllm/v1/engine/core.py: ``resolve_kv_cache_layout`` over the layouts the workers' backends support, here
    TritonAttentionBackend's; vllm/v1/attention/backends/utils.py)."""
    config = vllm_config(max_model_len=max_model_len, block_size=block_size,
                         max_num_batched_tokens=max_num_batched_tokens)
    layouts = [layout.name for layout in get_supported_kv_cache_layouts([TritonAttentionBackend])]
    resolve_kv_cache_layout(config, [layouts], list(specs_by_layer.values()))
    return config


def estimate_max_model_len(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                           available_memory: int, max_model_len: int, specs: Sequence[Mapping[str, Any]] | None = None,
                           max_num_batched_tokens: int | None = None) -> int:
    """``estimate_max_model_len(vllm_config, kv_cache_spec, available_memory)`` (vllm/v1/core/kv_cache_planning.py):
    the binary search over [1, max_model_len] of the summed ``max_memory_usage_bytes``; 0 when length 1 does not
    fit. It does not hold back the null block (the check below does, before calling it)."""
    specs_by_layer = _layer_specs(num_layers, block_size, num_kv_heads, head_size, dtype, specs)
    config = _config(max_model_len, block_size, max_num_batched_tokens, specs_by_layer)
    return int(kv_cache_planning.estimate_max_model_len(config, specs_by_layer, available_memory))


def check_enough_kv_cache_memory(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                                 available_memory: int, max_model_len: int,
                                 specs: Sequence[Mapping[str, Any]] | None = None,
                                 max_num_batched_tokens: int | None = None) -> None:
    """``check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)``
    (vllm/v1/core/kv_cache_planning.py): None, or vLLM's ValueError with its message.

    0.33.0 first holds back one pool block (the null block ``BlockPool`` keeps): the budget it checks is
    ``available_memory - _pool_bytes_per_block(groups)``; then 'No available memory ...' when that is <= 0, else the
    'To serve at least one request with the model's max seq len ...' refusal when the need exceeds it, with the
    estimate made on the reduced budget.
    """
    specs_by_layer = _layer_specs(num_layers, block_size, num_kv_heads, head_size, dtype, specs)
    config = _config(max_model_len, block_size, max_num_batched_tokens, specs_by_layer)
    kv_cache_planning.check_enough_kv_cache_memory(config, specs_by_layer, available_memory)
    return None


def fit_outcome(**case: Any) -> dict[str, Any]:
    """Both functions on one case (vllm/v1/core/kv_cache_planning.py): ``{estimate, fits, message}``, message None
    when the check passes."""
    estimate = estimate_max_model_len(**case)
    try:
        check_enough_kv_cache_memory(**case)
    except ValueError as exc:
        return {"estimate": estimate, "fits": False, "message": str(exc)}
    return {"estimate": estimate, "fits": True, "message": None}


def pool_bytes_per_block(num_layers: int, block_size: int, num_kv_heads: int, head_size: int, dtype: str,
                         max_model_len: int = 4096, specs: Sequence[Mapping[str, Any]] | None = None,
                         **_: Any) -> int:
    """``_pool_bytes_per_block(vllm_config, get_kv_cache_groups(...))`` (vllm/v1/core/kv_cache_planning.py): what
    one block of the shared pool costs, the amount the fit check holds back. A private vLLM function, read to
    explain the check; it may move in another release."""
    specs_by_layer = _layer_specs(num_layers, block_size, num_kv_heads, head_size, dtype, specs)
    config = _config(max_model_len, block_size, None, specs_by_layer)
    groups = kv_cache_planning.get_kv_cache_groups(config, dict(specs_by_layer))
    return int(kv_cache_planning._pool_bytes_per_block(config, groups)) if groups else 0
