"""Known-bad model-bytes-per-block implementations for the head-width rules of MEM-2.10 that follow vLLM 0.33.0
(transformers' RoPE check and typed head_dim, read by vllm/transformers_utils/config.py) or are declared
(``model-negative-head-dim-refused``, spec/deviations.yaml). Each must be rejected (gate.yaml: model geometry)."""
from __future__ import annotations

from typing import Any, Mapping

from ..subjects import model_bytes_per_block, model_config


def odd_rotary_width_accepted(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                              kv_cache_dtype: str = "auto") -> int:
    """An odd head width sized as given, RoPE's pairing ignored (the port before this check): the config is
    sized as if half of each head were rotated."""
    cfg = dict(model_config(model))
    for key in ("rope_parameters", "rope_scaling"):
        cfg.pop(key, None)
    return model_bytes_per_block({**cfg, "partial_rotary_factor": 0.5}, tensor_parallel_size, block_size,
                                 kv_cache_dtype)


def null_head_dim_as_default(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                             kv_cache_dtype: str = "auto") -> int:
    """``head_dim: null`` read as absent, so a Gemma-2/3 or Qwen3 config takes its class default (transformers'
    config class refuses a null for its int field)."""
    cfg = dict(model_config(model))
    if "head_dim" in cfg and cfg["head_dim"] is None:
        del cfg["head_dim"]
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def negative_head_dim_as_unset(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                               kv_cache_dtype: str = "auto") -> int:
    """A negative head_dim read as unset (hidden / heads), as vLLM reads it, instead of refused as declared."""
    cfg = dict(model_config(model))
    if isinstance(cfg.get("head_dim"), int) and cfg["head_dim"] < 0:
        cfg["head_dim"] = 0
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)
