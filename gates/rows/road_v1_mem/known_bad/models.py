"""Known-bad model-geometry and kv-plan implementations for ROAD-V1-MEM M2 (each must be rejected)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..subjects import kv_plan_summary, model_bytes_per_block, model_config

# --- model_bytes_per_block(model, tensor_parallel_size, block_size, kv_cache_dtype="auto") ---------------


def kv_heads_not_replicated(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                            kv_cache_dtype: str = "auto") -> int:
    """Bytes split evenly over ranks, as if KV heads were never replicated when tp exceeds them."""
    return model_bytes_per_block(model, 1, block_size, kv_cache_dtype) // tensor_parallel_size


def head_dim_ignored(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                     kv_cache_dtype: str = "auto") -> int:
    """head_dim dropped from the config: the head size falls back to the model type's default or hidden_size /
    num_attention_heads (wrong wherever head_dim is neither, e.g. a Llama config with head_dim 256 over 128)."""
    cfg = {k: v for k, v in model_config(model).items() if k != "head_dim"}
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def mla_latent_per_head(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                        kv_cache_dtype: str = "auto") -> int:
    """An MLA latent stored once per KV head of the rank instead of once."""
    cfg = model_config(model)
    bpb = model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)
    if cfg.get("kv_lora_rank") is not None:
        return bpb * max(1, cfg.get("num_key_value_heads", 1) // tensor_parallel_size)
    return bpb


def linear_layers_as_attention(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                               kv_cache_dtype: str = "auto") -> int:
    """Hybrid layer types ignored: every layer pays for full-attention KV."""
    cfg = {k: v for k, v in model_config(model).items() if k not in ("full_attention_interval", "layer_types")}
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def mla_heads_not_divided(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                          kv_cache_dtype: str = "auto") -> int:
    """An MLA model sized at any tp, as if its one latent KV head freed it from the attention-heads divisibility
    check vLLM applies to every model (DeepSeek-V2-Lite's 16 heads at tp=3 built instead of refused)."""
    cfg = model_config(model)
    if cfg.get("kv_lora_rank") is not None:
        return model_bytes_per_block(cfg, 1, block_size, kv_cache_dtype)
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


# --- kv_plan_summary(model=None, argv=(), config=None) ----------------------------------------------------


def capacity_in_blocks(model: str | None = None, argv: Sequence[str] = (),
                       config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """KV capacity reported in blocks where vLLM reports tokens."""
    summary = kv_plan_summary(model, argv, config)
    return {**summary, "kv_cache_tokens": summary["num_blocks"]}


def fallback_reported_as_utilization(model: str | None = None, argv: Sequence[str] = (),
                                     config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The 256-block fallback credited to --gpu-memory-utilization."""
    summary = kv_plan_summary(model, argv, config)
    if summary["decided_by"] == "fallback":
        return {**summary, "decided_by": "gpu_memory_utilization"}
    return summary


def vllm_section_as_port(model: str | None = None, argv: Sequence[str] = (),
                         config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """vLLM's pool reported with the port's figures (blocks summed over groups), as if the two models agreed."""
    summary = kv_plan_summary(model, argv, config)
    if not summary["vllm"]["computed"]:
        return summary
    port = {key: summary[key] for key in ("bytes_per_block", "num_blocks", "kv_cache_tokens", "max_concurrency")}
    return {**summary, "vllm": {**summary["vllm"], **port, "agrees_with_port": True}}
