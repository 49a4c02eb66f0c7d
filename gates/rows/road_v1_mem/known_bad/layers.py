"""Known-bad model-kv-layers implementations (ROAD-V1-MEM M2, MEM-2.11; m2.yaml model-kv-layers). Each must be
rejected."""
from __future__ import annotations

from typing import Any, Mapping

from ..subjects import model_config, model_kv_layers


def gemma3_global_first_of_pattern(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                                   kv_cache_dtype: str = "auto") -> dict[str, str]:
    """Gemma-3's global layer taken as the first of each sliding_window_pattern (i % k == 0), not its last."""
    cfg = model_config(model)
    if cfg.get("model_type") in ("gemma3", "gemma3_text") and cfg.get("layer_types") is None:
        k = cfg["sliding_window_pattern"]
        kinds = ["full_attention" if i % k == 0 else "sliding_attention" for i in range(cfg["num_hidden_layers"])]
        cfg = {**cfg, "layer_types": kinds}
    return model_kv_layers(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def linear_layers_named_as_attention(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                                     kv_cache_dtype: str = "auto") -> dict[str, str]:
    """A gated delta-net layer named after the attention module (model.layers.<i>.self_attn.attn)."""
    layers = model_kv_layers(model, tensor_parallel_size, block_size, kv_cache_dtype)
    return {name.replace(".linear_attn", ".self_attn.attn"): kind for name, kind in layers.items()}
