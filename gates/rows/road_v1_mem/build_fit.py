"""Case inputs of the ROAD-V1-MEM M3 fit-check and length-estimate gates: a full-attention model made into specs.

Input: num_layers, block_size, num_kv_heads, head_size, dtype (a torch dtype name), available_memory,
max_model_len, optionally max_num_batched_tokens. The oracle takes these as they are; the impl gets one
FullAttentionSpec per layer.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from vllm_gates import Call
from impl.v1.kv_cache_interface import FullAttentionSpec

FIELDS = {"num_layers", "block_size", "num_kv_heads", "head_size", "dtype", "available_memory", "max_model_len"}
OPTIONAL_FIELDS = {"max_num_batched_tokens"}


def layer_specs(data: Mapping[str, Any]) -> dict[str, FullAttentionSpec]:
    """One full-attention spec per layer, named as a decoder's attention layers."""
    spec = FullAttentionSpec(block_size=data["block_size"], num_kv_heads=data["num_kv_heads"],
                             head_size=data["head_size"], dtype=getattr(torch, data["dtype"]))
    return {f"model.layers.{i}.self_attn": spec for i in range(data["num_layers"])}


def fit_call(data: Mapping[str, Any]) -> Call:
    """impl side: (kv_cache_spec, available_memory, max_model_len[, max_num_batched_tokens])."""
    if not FIELDS <= set(data) <= FIELDS | OPTIONAL_FIELDS:
        raise ValueError(f"fit case input must have exactly {sorted(FIELDS)} and optionally "
                         f"{sorted(OPTIONAL_FIELDS)}, got {sorted(data)}")
    optional = {key: data[key] for key in OPTIONAL_FIELDS & set(data)}
    return Call(kwargs={"kv_cache_spec": layer_specs(data), "available_memory": data["available_memory"],
                        "max_model_len": data["max_model_len"], **optional})
