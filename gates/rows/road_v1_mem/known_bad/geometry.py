"""Known-bad model-bytes-per-block implementations for the upstream geometry gates (ROAD-V1-MEM M2, MEM-2.10 to
MEM-2.12; gate.yaml, upstream: model geometry and hybrid pools). Each must be rejected."""
from __future__ import annotations

from typing import Any, Mapping

from ..subjects import model_bytes_per_block, model_config


def head_dim_default_ignored(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                             kv_cache_dtype: str = "auto") -> int:
    """A config without head_dim sized at hidden / heads, ignoring the model type's default (Gemma-2/3 and
    Qwen3-Next: 256)."""
    cfg = model_config(model)
    if cfg.get("head_dim") is None and cfg.get("kv_lora_rank") is None:
        cfg = {**cfg, "head_dim": cfg["hidden_size"] // cfg["num_attention_heads"]}
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def float_cache_dtype_not_checked(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                                  kv_cache_dtype: str = "auto") -> int:
    """An explicit float16/bfloat16 KV cache dtype accepted whatever the model dtype (vLLM refuses a mismatch)."""
    cfg = model_config(model)
    if kv_cache_dtype in ("float16", "bfloat16", "float32"):
        cfg = {**cfg, "torch_dtype": kv_cache_dtype}
        kv_cache_dtype = "auto"
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def float_cache_dtype_checked_per_layer(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                                        kv_cache_dtype: str = "auto") -> int:
    """The mismatched float KV cache dtype refused only where an attention layer is built (the port's defect that a
    fresh seed found, issue 25): a model whose layers are all linear attention is answered, vLLM refuses it."""
    cfg = model_config(model)
    if kv_cache_dtype in ("float16", "bfloat16") and "attention" not in layer_kinds(cfg):
        return model_bytes_per_block(cfg, tensor_parallel_size, block_size, "auto")
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def layer_kinds(cfg: Mapping[str, Any]) -> set[str]:
    """The port's layer kinds of a config, as 'attention' (full or sliding) or 'linear_attention'."""
    from impl.entrypoints.model_geometry import layer_types

    return {"linear_attention" if kind == "linear_attention" else "attention" for kind in layer_types(cfg)}


def hybrid_pool_by_largest_group(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                                 kv_cache_dtype: str = "auto") -> int:
    """vLLM's pool block (the largest attention kind's pages) reported where the row gates the summed figure."""
    from impl.entrypoints.model_geometry import ProbeRequest, probe_kv_cache_config
    from impl.v1.kv_cache_interface import AttentionSpec

    request = ProbeRequest(tensor_parallel_size=tensor_parallel_size, block_size=block_size,
                           kv_cache_dtype=kv_cache_dtype)
    probe = probe_kv_cache_config(model_config(model), request)
    return max(group.kv_cache_spec.page_size_bytes * len(group.layer_names) for group in probe.kv_cache_groups
               if isinstance(group.kv_cache_spec, AttentionSpec))


def uneven_kv_heads_floored(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                            kv_cache_dtype: str = "auto") -> int:
    """KV heads per rank floored to max(1, total // tp), as ModelConfig.get_num_kv_heads reads them, instead of
    refusing shards the QKV projection cannot make."""
    cfg = model_config(model)
    total, tp = cfg.get("num_key_value_heads", cfg["num_attention_heads"]), tensor_parallel_size
    if cfg.get("kv_lora_rank") is not None or cfg["num_attention_heads"] % tp:
        return model_bytes_per_block(cfg, tp, block_size, kv_cache_dtype)
    whole = model_bytes_per_block(cfg, 1, block_size, kv_cache_dtype)
    return whole * max(1, total // tp) // total


def float32_downcast(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                     kv_cache_dtype: str = "auto") -> int:
    """A float32 checkpoint sized in bfloat16, as vLLM's --dtype auto runs it on a bf16-capable GPU."""
    cfg = model_config(model)
    if cfg.get("torch_dtype") == "float32":
        cfg = {**cfg, "torch_dtype": "bfloat16"}
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def float32_cache_accepted(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                           kv_cache_dtype: str = "auto") -> int:
    """``--kv-cache-dtype float32`` read as "auto" for a float32 model (vLLM refuses the string)."""
    return model_bytes_per_block(model, tensor_parallel_size, block_size,
                                 "auto" if kv_cache_dtype == "float32" else kv_cache_dtype)


def head_dim_zero_as_default(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                             kv_cache_dtype: str = "auto") -> int:
    """``head_dim: 0`` dropped, so the model type's default head_dim applies (vLLM reads hidden / heads)."""
    cfg = model_config(model)
    if cfg.get("head_dim") == 0:
        cfg = {key: value for key, value in cfg.items() if key != "head_dim"}
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def bare_window_slides(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                       kv_cache_dtype: str = "auto") -> int:
    """A Llama config's sliding_window without layer_types applied to every layer (vLLM builds full attention)."""
    cfg = model_config(model)
    if cfg.get("sliding_window") is not None and cfg.get("layer_types") is None and \
            cfg.get("model_type") not in ("gemma2", "gemma3", "gemma3_text") and "full_attention_interval" not in cfg:
        cfg = {**cfg, "layer_types": ["sliding_attention"] * cfg["num_hidden_layers"]}
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def gemma_float16_kept(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                       kv_cache_dtype: str = "auto") -> int:
    """A float16 Gemma checkpoint run in float16 (vLLM runs it in bfloat16, so a float16 cache is refused)."""
    cfg = model_config(model)
    if cfg.get("torch_dtype") == "float16" and cfg.get("model_type") in ("gemma2", "gemma3", "gemma3_text", "glm4") \
            and kv_cache_dtype == "float16":
        kv_cache_dtype = "auto"
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def hidden_floored(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                   kv_cache_dtype: str = "auto") -> int:
    """hidden // heads taken as the head width when the heads do not divide hidden_size (vLLM's Mistral reading)."""
    cfg = model_config(model)
    if not cfg.get("head_dim") and cfg.get("kv_lora_rank") is None and cfg["hidden_size"] % cfg["num_attention_heads"]:
        cfg = {**cfg, "head_dim": cfg["hidden_size"] // cfg["num_attention_heads"]}
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)


def hidden_checked_with_head_dim(model: str | Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                                 kv_cache_dtype: str = "auto") -> int:
    """hidden_size refused when the heads do not divide it even though head_dim gives the width (transformers'
    Llama check)."""
    cfg = model_config(model)
    if cfg.get("kv_lora_rank") is None and cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise ValueError(f"hidden_size ({cfg['hidden_size']}) is not a multiple of num_attention_heads "
                         f"({cfg['num_attention_heads']})")
    return model_bytes_per_block(cfg, tensor_parallel_size, block_size, kv_cache_dtype)
