"""vLLM's model geometry for a Hugging Face config.json as plain data (ROAD-V1-MEM M2, model-bytes-per-block).

``ModelConfig`` (vllm/config/model.py) reads the config from a local folder (upstream/_config.py writes it; nothing
is downloaded); ``VllmConfig`` (vllm/config/vllm.py) checks it against a ``ParallelConfig`` of the given TP size,
which is where vLLM refuses a head count TP does not divide (``verify_with_parallel_config``). The per-rank figures
are ModelConfig's getters. vLLM sizes a layer's KV from the model's attention modules, which are not built here;
:func:`pool_bytes_per_block` therefore builds one spec per layer from these getters and the config's layer types
(the port's reading of which layers slide) and asks vLLM's own grouping what one pool block costs
(vllm/v1/core/kv_cache_planning.py ``get_kv_cache_groups`` / ``_pool_bytes_per_block``).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import upstream  # noqa: F401  (environment before vLLM's import)
from upstream._config import model_folder


def _vllm_config(config: Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                 kv_cache_dtype: str) -> Any:
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, VllmConfig

    folder = model_folder(json.dumps(dict(config), sort_keys=True))
    model_config = ModelConfig(model=folder, skip_tokenizer_init=True, dtype="auto")
    parallel_config = ParallelConfig(tensor_parallel_size=tensor_parallel_size)
    cache_config = CacheConfig(block_size=block_size, cache_dtype=kv_cache_dtype)
    vllm_config = VllmConfig(model_config=model_config, parallel_config=parallel_config, cache_config=cache_config)
    vllm_config.cache_config.block_size = block_size
    return vllm_config


def geometry(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
             kv_cache_dtype: str = "auto") -> dict[str, Any]:
    """Per-rank geometry from ``ModelConfig`` / ``VllmConfig`` (vllm/config/model.py, vllm/config/vllm.py):
    ``{num_kv_heads, total_num_kv_heads, num_attention_heads, head_size, num_layers, use_mla, dtype,
    sliding_window, is_hybrid, max_model_len}``; vLLM's refusal (ValueError) propagates."""
    vllm_config = _vllm_config(config, tensor_parallel_size, block_size, kv_cache_dtype)
    model = vllm_config.model_config
    parallel = vllm_config.parallel_config
    return {
        "num_kv_heads": int(model.get_num_kv_heads(parallel)),
        "total_num_kv_heads": int(model.get_total_num_kv_heads()),
        "num_attention_heads": int(model.get_num_attention_heads(parallel)),
        "head_size": int(model.get_head_size()),
        "num_layers": int(model.get_num_layers(parallel)),
        "use_mla": bool(model.use_mla),
        "dtype": str(model.dtype).removeprefix("torch."),
        "sliding_window": model.get_sliding_window(),
        "is_hybrid": bool(model.is_hybrid),
        "max_model_len": int(model.max_model_len),
    }


def refusal(config: Mapping[str, Any], tensor_parallel_size: int) -> str | None:
    """vLLM's message when it refuses the model at this TP size (vllm/config/model.py), else None."""
    try:
        _vllm_config(config, tensor_parallel_size, 16, "auto")
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        if callable(errors):
            try:
                return "; ".join(str(e.get("msg", "")) for e in errors())
            except Exception:  # noqa: BLE001
                pass
        return str(exc)
    return None


def pool_bytes_per_block(config: Mapping[str, Any], tensor_parallel_size: int = 1, block_size: int = 16,
                         kv_cache_dtype: str = "auto") -> dict[str, Any]:
    """What one block of vLLM's shared KV pool costs for this model, by vLLM's grouping
    (vllm/v1/core/kv_cache_planning.py), with one spec per attention layer built from :func:`geometry`:
    MLAAttentionSpec for MLA models, SlidingWindowSpec for layers the config marks sliding
    (``layer_types`` 'sliding_attention', or every other layer of Gemma-2 as transformers lays it out), else
    FullAttentionSpec. Returns ``{pool_bytes_per_block, groups: [{layers, page_size_bytes, kind}], sum_of_pages}``.
    Layers without attention KV (linear attention / Mamba) are not modelled here."""
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
    from vllm.v1.attention.backends.utils import get_supported_kv_cache_layouts, resolve_kv_cache_layout
    from vllm.v1.core import kv_cache_planning
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec,
                                            get_kv_quant_mode)

    vllm_config = _vllm_config(config, tensor_parallel_size, block_size, kv_cache_dtype)
    model = vllm_config.model_config
    parallel = vllm_config.parallel_config
    storage = kv_cache_dtype_str_to_dtype(kv_cache_dtype, model)
    mode = get_kv_quant_mode(kv_cache_dtype)
    heads, head_size, layers = model.get_num_kv_heads(parallel), model.get_head_size(), model.get_num_layers(parallel)
    layer_types = list(getattr(model.hf_text_config, "layer_types", None) or [])
    window = model.get_sliding_window() or getattr(model.hf_text_config, "sliding_window", None)
    specs: dict[str, Any] = {}
    for i in range(layers):
        name = f"model.layers.{i}.self_attn"
        if model.use_mla:
            specs[name] = MLAAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=head_size,
                                           dtype=storage, kv_quant_mode=mode, cache_dtype_str=kv_cache_dtype)
        elif window and i < len(layer_types) and layer_types[i] == "sliding_attention":
            specs[name] = SlidingWindowSpec(block_size=block_size, num_kv_heads=heads, head_size=head_size,
                                            dtype=storage, kv_quant_mode=mode, sliding_window=window)
        else:
            specs[name] = FullAttentionSpec(block_size=block_size, num_kv_heads=heads, head_size=head_size,
                                            dtype=storage, kv_quant_mode=mode)
    layouts = [layout.name for layout in get_supported_kv_cache_layouts([TritonAttentionBackend])]
    resolve_kv_cache_layout(vllm_config, [layouts], list(specs.values()))
    groups = kv_cache_planning.get_kv_cache_groups(vllm_config, dict(specs))
    return {
        "pool_bytes_per_block": int(kv_cache_planning._pool_bytes_per_block(vllm_config, groups)),
        "groups": [{"layers": len(g.layer_names), "page_size_bytes": int(g.kv_cache_spec.page_size_bytes),
                    "kind": type(g.kv_cache_spec).__name__} for g in groups],
        "sum_of_pages": int(sum(spec.page_size_bytes for spec in specs.values())),
    }
