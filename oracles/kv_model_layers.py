"""Oracle for a model's KV geometry per rank (MEM-2.10, MEM-2.11): the layers a config.json makes, for allocation.

Derives KV heads per rank from which query heads each rank serves and which KV head each query head
reads (grouped-query attention), as vllm/model_executor/layers/linear.py (QKVParallelLinear) shards
them; layer kinds as the model files decide them (vllm/model_executor/models/gemma2.py, gemma3.py,
qwen3_next.py). Bytes per block are then measured by ``oracles.kv_allocation``.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from oracles.kv_allocation import PagedLayer, StateLayer, marginal_bytes_per_block

_MODEL_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
# kv_cache_dtype -> (stored element dtype or None for the model dtype, storage format)
_CACHE_FORMATS = {
    "auto": (None, "plain"), "bfloat16": (torch.bfloat16, "plain"), "float16": (torch.float16, "plain"),
    "fp8": (torch.uint8, "fp8_per_tensor"),
    "fp8_e4m3": (torch.uint8, "fp8_per_tensor"), "fp8_e5m2": (torch.uint8, "fp8_per_tensor"),
    "fp8_ds_mla": (torch.uint8, "fp8_ds_mla"), "int8_per_token_head": (torch.int8, "per_token_head"),
    "fp8_per_token_head": (torch.uint8, "per_token_head"), "nvfp4": (torch.uint8, "nvfp4"),
}


# The transformers config classes whose head_dim has a fixed default (Gemma2Config, Gemma3TextConfig,
# Qwen3NextConfig: 256; Qwen3Config: 128); vLLM reads the loaded config's attribute (MEM-2.10). Others derive it.
_CLASS_HEAD_DIM = {"gemma2": 256, "gemma3_text": 256, "qwen3_next": 256, "qwen3": 128}
_FLOAT_CACHES = ("bfloat16", "float16")
# vLLM runs these families in bfloat16 even from a float16 checkpoint (vllm/config/model.py: float16 is numerically
# unstable for them); the cache follows the dtype the model runs in.
_NO_HALF = ("gemma2", "gemma3", "gemma3_text", "glm4")


def _positive(cfg: Mapping[str, Any], key: str) -> int:
    value = cfg.get(key)
    if type(value) is not int or value < 1:
        raise ValueError(f"config {key}={value!r} is not a positive integer")
    return value


def _rotated_fractions(cfg: Mapping[str, Any]) -> list[float]:
    """The share of a head each RoPE table rotates: the tables' own partial_rotary_factor, else the config's,
    else Qwen3-Next's class default of a quarter, else the whole head (transformers' configs, MEM-2.10)."""
    def number(value: Any) -> float | None:
        return float(value) if type(value) in (int, float) else None

    fallback = number(cfg.get("partial_rotary_factor"))
    if fallback is None:
        fallback = 0.25 if cfg.get("model_type") == "qwen3_next" else 1.0
    tables = cfg.get("rope_parameters")
    if not isinstance(tables, dict):
        tables = cfg.get("rope_scaling")
    if not isinstance(tables, dict):
        return [fallback]
    per_layer = [t for t in tables.values() if isinstance(t, dict)] or [tables]
    shares = [number(t.get("partial_rotary_factor")) for t in per_layer]
    return [fallback if share is None else share for share in shares]


def _rotatable(cfg: Mapping[str, Any], width: int) -> int:
    """RoPE turns dimensions in pairs: a head turned in full (its rotated part, truncated, is all of it) needs an
    even width, which transformers' config check demands above 4 dimensions (vLLM reads configs through it)."""
    for share in _rotated_fractions(cfg):
        rotated = int(width * share)
        if rotated == width and width > 4 and rotated % 2 == 1:
            raise ValueError(f"a head of {width} dimensions is rotated whole, which RoPE cannot do with an odd width")
    return width


def _head_width(cfg: Mapping[str, Any], query_heads: int) -> int:
    """A KV head's width: head_dim; absent, the config class's default; 0 or null, hidden / heads (a null
    head_dim is refused by the classes that default it, whose field is typed int)."""
    model_type = cfg.get("model_type")
    if "head_dim" in cfg and cfg["head_dim"] is None and model_type in _CLASS_HEAD_DIM:
        raise ValueError(f"{model_type} configs type head_dim as an int; null is not one")
    width = cfg["head_dim"] if "head_dim" in cfg else _CLASS_HEAD_DIM.get(model_type)
    if width is None or (type(width) is int and width == 0):
        # A head_dim of 0 means "not set" to vLLM, and then the class default is not applied either.
        hidden = _positive(cfg, "hidden_size")
        if hidden % query_heads:
            raise ValueError("hidden_size does not split into the attention heads")
        width = hidden // query_heads
    if type(width) is not int or width < 1:
        raise ValueError(f"head_dim={width!r} is not a width (the port refuses what vLLM reads as unset)")
    return _rotatable(cfg, width)


def kv_heads_on_each_rank(query_heads: int, kv_heads: int, tp: int) -> int:
    """How many distinct KV heads the query heads of one rank read; every rank must need the same
    number, and ranks either split the KV heads without overlap or each keep exactly one."""
    if query_heads % tp or query_heads % kv_heads:
        raise ValueError(f"{query_heads} query heads, {kv_heads} KV heads and {tp} ranks do not shard evenly")
    per_rank, group = query_heads // tp, query_heads // kv_heads
    needed = [{q // group for q in range(r * per_rank, (r + 1) * per_rank)} for r in range(tp)]
    sizes = {len(s) for s in needed}
    overlapping = sum(len(s) for s in needed) != len(set().union(*needed))
    if len(sizes) != 1 or (overlapping and sizes != {1}):
        raise ValueError(f"{kv_heads} KV heads cannot be split or replicated evenly over {tp} ranks")
    return sizes.pop()


def _mixer_kinds(cfg: Mapping[str, Any]) -> list[str]:
    """``attention``, ``sliding`` or ``recurrent`` for each decoder layer."""
    n = _positive(cfg, "num_hidden_layers")
    named = {"full_attention": "attention", "sliding_attention": "sliding", "linear_attention": "recurrent"}
    if cfg.get("layer_types") is not None:
        if len(cfg["layer_types"]) != n:
            raise ValueError("layer_types does not list every layer")
        return [named[t] for t in cfg["layer_types"]]
    if cfg.get("full_attention_interval") is not None:
        every = _positive(cfg, "full_attention_interval")
        return ["attention" if i % every == every - 1 else "recurrent" for i in range(n)]
    window_on = cfg.get("sliding_window") is not None and cfg.get("use_sliding_window", True) is not False
    if not window_on:
        return ["attention"] * n
    if cfg.get("model_type") == "gemma2":
        return ["attention" if i % 2 else "sliding" for i in range(n)]
    if cfg.get("model_type") in ("gemma3", "gemma3_text"):
        every = _positive(cfg, "sliding_window_pattern")
        return ["attention" if i % every == every - 1 else "sliding" for i in range(n)]
    # Other families slide only where layer_types says so (vllm/model_executor/models/llama.py); a bare window
    # is not applied to any layer.
    return ["attention"] * n


def model_layers(cfg: Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                 kv_cache_dtype: str = "auto") -> list[PagedLayer | StateLayer]:
    """The per-rank layers of a model, in the shapes the runner allocates."""
    tp = tensor_parallel_size
    model = _MODEL_DTYPES[cfg.get("torch_dtype", cfg.get("dtype"))]
    if model is torch.float16 and cfg.get("model_type") in _NO_HALF:
        model = torch.bfloat16
    if kv_cache_dtype not in _CACHE_FORMATS:
        raise ValueError(f"vLLM has no KV cache dtype {kv_cache_dtype!r}")
    storage, fmt = _CACHE_FORMATS[kv_cache_dtype]
    if kv_cache_dtype in _FLOAT_CACHES and storage is not model:
        # vLLM (vllm/config/vllm.py) keeps an unquantized cache in the model's own dtype; another float is refused.
        raise ValueError(f"kv_cache_dtype {kv_cache_dtype} is not the model dtype {model}")
    storage = storage or model
    # Every rank serves an equal share of the query heads, whatever the attention kind (latent attention's
    # per-head query/output projections are column-sharded too), so the query heads must split over the ranks.
    query_heads = _positive(cfg, "num_attention_heads")
    if query_heads % tp:
        raise ValueError(f"{query_heads} attention heads do not split evenly over {tp} ranks "
                         f"(--tensor-parallel-size {tp})")
    latent = cfg.get("kv_lora_rank") is not None
    if fmt == "fp8_ds_mla" and not latent:
        raise ValueError("fp8_ds_mla is an MLA cache format")
    layers: list[PagedLayer | StateLayer] = []
    for index, kind in enumerate(_mixer_kinds(cfg)):
        name = f"layer{index}"
        if kind == "recurrent":
            k_heads, v_heads = _positive(cfg, "linear_num_key_heads"), _positive(cfg, "linear_num_value_heads")
            k_dim, v_dim = _positive(cfg, "linear_key_head_dim"), _positive(cfg, "linear_value_head_dim")
            channels = 2 * k_heads * k_dim + v_heads * v_dim
            if channels % tp or v_heads % tp:
                raise ValueError("linear attention does not shard evenly")
            window = _positive(cfg, "linear_conv_kernel_dim") - 1
            layers.append(StateLayer(name, ((channels // tp, window), (v_heads // tp, k_dim, v_dim)), (model, model)))
        elif latent:
            if kind != "attention":
                raise ValueError("latent attention with a sliding window is not modelled")
            if fmt == "per_token_head":
                raise ValueError("per-token-head scales are not laid out for latent attention here")
            width = _positive(cfg, "kv_lora_rank") + _rotatable(cfg, _positive(cfg, "qk_rope_head_dim"))
            layers.append(PagedLayer(name, "mla", block_size, 1, width, width, storage, fmt))
        else:
            query_heads = _positive(cfg, "num_attention_heads")
            kv_heads = _positive(cfg, "num_key_value_heads") if "num_key_value_heads" in cfg else query_heads
            width = _head_width(cfg, query_heads)
            if kind == "sliding" and fmt == "nvfp4":
                raise ValueError("NVFP4 is laid out for full attention only")
            heads = kv_heads_on_each_rank(query_heads, kv_heads, tp)
            layers.append(PagedLayer(name, "flash_attn", block_size, heads, width, width, storage, fmt))
    return layers


def model_bytes_per_block(config: Mapping[str, Any], tensor_parallel_size: int, block_size: int,
                          kv_cache_dtype: str = "auto") -> int:
    """Marginal bytes per block of one rank of the model, measured on the meta device."""
    return marginal_bytes_per_block(model_layers(config, tensor_parallel_size, block_size, kv_cache_dtype))
