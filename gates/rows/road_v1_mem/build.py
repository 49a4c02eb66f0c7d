"""Builders for the ROAD-V1-MEM gates: plain case data -> impl objects, and the same data -> oracle layers.

Input shapes (YAML-friendly):

- a *spec* is a mapping with ``kind`` (``full``, ``mla``, ``sliding_window``, ``chunked_local``,
  ``mamba``), the vLLM field names (``block_size``, ``num_kv_heads``, ``head_size``, ``head_size_v``,
  ``sliding_window``, ``attention_chunk_size``, ``page_size_padded``, ``cache_dtype_str``, ``shapes``),
  ``dtype``/``dtypes`` as torch dtype names and ``kv_quant_mode`` as a ``KVQuantMode`` member name;
- a *KV layout* is ``{groups: [{layers: [names], spec: SPEC}], per_layer: [SPEC or null, ...]}``;
  ``per_layer`` lists the model's real attention layers (null for a GDN layer) and is optional;
- a *sizing* input is ``{params: {EngineParams fields}, probe: KV layout, profile: {available_kv_cache_memory}}``;
  without ``probe`` the C++ port's test layer is used (bs16, 2 heads, D64, fp32: 16384 bytes, one layer).
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Mapping

import torch

from vllm_gates import Call
from impl.entrypoints.model_loader import EngineParams
from impl.v1 import kv_cache_interface as kv

if TYPE_CHECKING:  # imported where an oracle builder runs: the impl's worker may not read oracles/ (its sandbox)
    from oracles.kv_allocation import PagedLayer, StateLayer

DTYPES = {name: getattr(torch, name) for name in
          ("float32", "float16", "bfloat16", "uint8", "int8", "float8_e4m3fn", "float8_e5m2")}
IMPL_KINDS = {"full": kv.FullAttentionSpec, "mla": kv.MLAAttentionSpec, "sliding_window": kv.SlidingWindowSpec,
              "chunked_local": kv.ChunkedLocalAttentionSpec, "mamba": kv.MambaSpec}
DEFAULT_PROBE = {"groups": [{"layers": ["layer1"], "spec": {
    "kind": "full", "block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": "float32"}}]}
_ORACLE_FORMAT = {"NONE": "plain", "FP8_PER_TENSOR": "fp8_per_tensor", "INT8_PER_TOKEN_HEAD": "per_token_head",
                  "FP8_PER_TOKEN_HEAD": "per_token_head", "NVFP4": "nvfp4"}


def impl_spec(data: Mapping[str, Any]) -> kv.KVCacheSpec:
    """Construct the impl spec a mapping describes (validation errors propagate)."""
    fields = dict(data)
    cls = IMPL_KINDS[fields.pop("kind")]
    if "dtype" in fields:
        fields["dtype"] = DTYPES[fields["dtype"]]
    if "dtypes" in fields:
        fields["dtypes"] = tuple(DTYPES[name] for name in fields["dtypes"])
    if "shapes" in fields:
        fields["shapes"] = tuple(tuple(shape) for shape in fields["shapes"])
    if "kv_quant_mode" in fields:
        fields["kv_quant_mode"] = kv.KVQuantMode[fields["kv_quant_mode"]]
    return cls(**fields)


def oracle_layer(name: str, data: Mapping[str, Any]) -> PagedLayer | StateLayer:
    """The runner's view of a layer: which backend layout it gets and how its values are stored."""
    from oracles.kv_allocation import PagedLayer, StateLayer

    kind = data["kind"]
    if kind == "mamba":
        return StateLayer(name, tuple(tuple(s) for s in data["shapes"]), tuple(DTYPES[d] for d in data["dtypes"]),
                          slot_bytes=data.get("page_size_padded"))
    fmt = _ORACLE_FORMAT[data.get("kv_quant_mode", "NONE")]
    if kind == "mla" and data.get("cache_dtype_str") == "fp8_ds_mla":
        fmt = "fp8_ds_mla"
    v_width = data.get("head_size_v") if kind == "full" else None  # only full attention has its own V width
    return PagedLayer(name, "mla" if kind == "mla" else "flash_attn", data["block_size"], data["num_kv_heads"],
                      data["head_size"], v_width or data["head_size"], DTYPES[data["dtype"]], fmt,
                      data.get("page_size_padded"))


def impl_kv_config(layout: Mapping[str, Any]) -> kv.KVCacheConfig:
    groups = tuple(kv.KVCacheGroupSpec(tuple(g["layers"]), impl_spec(g["spec"])) for g in layout["groups"])
    per_layer = tuple(None if s is None else impl_spec(s) for s in layout.get("per_layer", ()))
    return kv.KVCacheConfig(num_blocks=0, kv_cache_tensors=(), kv_cache_groups=groups, per_layer_attn_specs=per_layer)


def oracle_layers(layout: Mapping[str, Any]) -> list[PagedLayer | StateLayer]:
    """Every real layer once: the per-layer list when given (its nulls hold no paged KV), else the groups'
    attention layers; recurrent layers always come from their groups."""
    per_layer = layout.get("per_layer") or []
    layers = [oracle_layer(f"het.{i}", s) for i, s in enumerate(per_layer) if s is not None]
    for group in layout["groups"]:
        if per_layer and group["spec"]["kind"] != "mamba":
            continue
        layers += [oracle_layer(name, group["spec"]) for name in group["layers"]]
    return layers


def kv_layout_impl(data: Mapping[str, Any]) -> Call:
    """Case input (a KV layout) -> the bytes-per-block adapter, which constructs the config itself, so a refused
    group (a blank or repeated layer name, issue 28) is the impl's outcome."""
    return Call(args=(dict(data),))


def kv_layout_oracle(data: Mapping[str, Any]) -> Call:
    """Case input (a KV layout) -> ``marginal_bytes_per_block(layers)``."""
    return Call(args=(oracle_layers(data),))


def spec_impl(data: Mapping[str, Any]) -> Call:
    """Case input ``{spec: SPEC}`` -> the page-size adapter, which constructs the spec itself."""
    return Call(args=(dict(data["spec"]),))


def spec_oracle(data: Mapping[str, Any]) -> Call:
    return Call(args=(oracle_layer("layer", data["spec"]),))


def _profile(data: Mapping[str, Any]) -> Any:
    profile = data.get("profile")
    return None if profile is None else SimpleNamespace(**profile)


def sizing_impl(data: Mapping[str, Any]) -> Call:
    """Case input (a sizing input) -> ``resolve_num_blocks(params, probe, profile)``."""
    probe = impl_kv_config(data.get("probe", DEFAULT_PROBE))
    return Call(args=(EngineParams(**data.get("params", {})), probe, _profile(data)))


def sizing_oracle(data: Mapping[str, Any]) -> Call:
    """Case input (a sizing input) -> ``oracles.kv_budget.blocks_for_knobs``."""
    params = data.get("params", {})
    profile = data.get("profile")
    return Call(kwargs={
        "num_blocks": params.get("num_blocks", 0),
        "kv_cache_memory_bytes": params.get("kv_cache_memory_bytes", 0),
        "layers": oracle_layers(data.get("probe", DEFAULT_PROBE)),
        "available_kv_cache_memory": None if profile is None else profile["available_kv_cache_memory"],
    })


def _fixture_json(name: str) -> dict[str, Any]:
    path = Path(__file__).resolve().parent / "fixtures" / "models" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _model_args(data: Mapping[str, Any]) -> dict[str, Any]:
    return {"tensor_parallel_size": data.get("tensor_parallel_size", 1), "block_size": data.get("block_size", 16),
            "kv_cache_dtype": data.get("kv_cache_dtype", "auto")}


def model_impl(data: Mapping[str, Any]) -> Call:
    """Case input ``{model: fixture stem | config: {...}, tensor_parallel_size, block_size, kv_cache_dtype}``."""
    return Call(kwargs={"model": data["model"] if "model" in data else dict(data["config"]), **_model_args(data)})


def model_oracle(data: Mapping[str, Any]) -> Call:
    config = _fixture_json(data["model"]) if "model" in data else dict(data["config"])
    return Call(kwargs={"config": config, **_model_args(data)})
