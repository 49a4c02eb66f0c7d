"""Hypothesis strategies for the ROAD-V1-MEM gates: specs of every kind, KV layouts, sizing knobs,
size strings and model configs, as plain data in the shapes ``gates.rows.road_v1_mem.build`` builds from."""
from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
# kv_quant_mode -> element dtypes it may be stored in
_MODE_DTYPES = {"NONE": ["float32", "float16", "bfloat16", "uint8"], "FP8_PER_TENSOR": ["uint8", "float8_e4m3fn"],
                "INT8_PER_TOKEN_HEAD": ["int8"], "FP8_PER_TOKEN_HEAD": ["uint8"], "NVFP4": ["uint8"]}
BLOCK_SIZES = st.one_of(st.sampled_from([1, 8, 16, 32, 64]), st.integers(1, 128))


def _padding_bound(spec: dict[str, Any]) -> int:
    """A page size no spec of these fields can exceed: K and V at full width plus fp32 scales."""
    bs, heads, width = spec["block_size"], spec["num_kv_heads"], spec["head_size"]
    v_width = spec.get("head_size_v") or width
    return bs * heads * (width + v_width) * _ITEMSIZE[spec["dtype"]] + 2 * bs * heads * 4


@st.composite
def _maybe_padded(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    if draw(st.integers(0, 3)) == 0:
        spec["page_size_padded"] = _padding_bound(spec) + draw(st.integers(0, 4096))
    return spec


@st.composite
def attention_specs(draw: st.DrawFn, kinds: tuple[str, ...] = ("full", "mla", "sliding_window", "chunked_local")
                    ) -> dict[str, Any]:
    """An attention spec of any kind, quantization mode and padding."""
    kind = draw(st.sampled_from(kinds))
    if kind == "mla" and draw(st.integers(0, 4)) == 0:
        spec = {"kind": "mla", "block_size": draw(BLOCK_SIZES), "num_kv_heads": 1, "head_size": 576,
                "dtype": "uint8", "kv_quant_mode": "FP8_PER_TENSOR", "cache_dtype_str": "fp8_ds_mla"}
        return draw(_maybe_padded(spec))
    modes = list(_MODE_DTYPES) if kind == "full" else [m for m in _MODE_DTYPES if m != "NVFP4"]
    mode = draw(st.sampled_from(modes))
    width = st.integers(1, 16).map(lambda w: 16 * w) if mode == "NVFP4" else st.integers(1, 320)
    spec = {"kind": kind, "block_size": draw(BLOCK_SIZES),
            "num_kv_heads": draw(st.integers(1, 2) if kind == "mla" else st.integers(1, 8)),
            "head_size": draw(st.just(576) | width if kind == "mla" else width),
            "dtype": draw(st.sampled_from(_MODE_DTYPES[mode]))}
    if mode != "NONE":
        spec["kv_quant_mode"] = mode
    if kind == "full" and draw(st.booleans()):
        spec["head_size_v"] = draw(width)
    if kind == "full" and draw(st.integers(0, 3)) == 0:
        spec[draw(st.sampled_from(["sliding_window", "attention_chunk_size"]))] = draw(st.integers(1, 8192))
    if kind == "sliding_window":
        spec["sliding_window"] = draw(st.integers(1, 8192))
    if kind == "chunked_local":
        spec["attention_chunk_size"] = draw(st.integers(1, 8192))
    return draw(_maybe_padded(spec))


@st.composite
def mamba_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Recurrent state: one to three tensors of up to three dims."""
    shapes = draw(st.lists(st.lists(st.integers(1, 64), min_size=1, max_size=3), min_size=1, max_size=3))
    dtypes = draw(st.lists(st.sampled_from(["float32", "float16", "bfloat16"]), min_size=len(shapes),
                           max_size=len(shapes)))
    spec = {"kind": "mamba", "block_size": draw(BLOCK_SIZES), "shapes": shapes, "dtypes": dtypes}
    if draw(st.integers(0, 3)) == 0:
        real = sum(_ITEMSIZE[d] * int(torch.Size(s).numel()) for s, d in zip(shapes, dtypes))
        spec["page_size_padded"] = real + draw(st.integers(0, 4096))
    return spec


def single_specs() -> st.SearchStrategy[dict[str, Any]]:
    """Case inputs ``{spec: SPEC}`` for the page-size gate."""
    return st.one_of(attention_specs(), mamba_specs()).map(lambda spec: {"spec": spec})


@st.composite
def _layouts(draw: st.DrawFn, max_groups: int, max_layers: int) -> dict[str, Any]:
    groups = []
    for g in range(draw(st.integers(1, max_groups))):
        spec = draw(st.one_of(attention_specs(), attention_specs(), mamba_specs()))
        count = draw(st.integers(1, max_layers))
        groups.append({"layers": [f"g{g}.layer{i}" for i in range(count)], "spec": spec})
    if not draw(st.booleans()):
        return {"groups": groups}
    # heterogeneous-KV form: one entry per real layer (null for recurrent ones), placeholder groups
    per_layer = [None if g["spec"]["kind"] == "mamba" else g["spec"] for g in groups for _ in g["layers"]]
    per_layer = draw(st.permutations(per_layer))
    placeholders = [g if g["spec"]["kind"] == "mamba" else {"layers": [f"placeholder{i}"], "spec": g["spec"]}
                    for i, g in enumerate(groups)]
    return {"groups": placeholders, "per_layer": list(per_layer)}


def kv_layouts() -> st.SearchStrategy[dict[str, Any]]:
    """KV layouts for the bytes-per-block gate: 1-4 groups of 1-5 layers, grouped or per-layer form."""
    return _layouts(4, 5)


@st.composite
def sizing_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Knob combinations (override, budget, utilization, profile) over small generated probes."""
    params: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        params["num_blocks"] = draw(st.integers(1, 10**6))
    budget = draw(st.sampled_from(["none", "small", "large"]))
    if budget != "none":
        params["kv_cache_memory_bytes"] = draw(st.integers(1, 2**16) if budget == "small" else st.integers(1, 2**34))
    if draw(st.booleans()):
        params["gpu_memory_utilization"] = draw(st.floats(0.01, 1.0))
    data: dict[str, Any] = {"params": params, "probe": draw(_layouts(3, 3))}
    if draw(st.booleans()):
        data["profile"] = {"available_kv_cache_memory": draw(st.integers(-2**20, 2**34))}
    return data


_UNITS = ["", "k", "m", "g", "t", "K", "M", "G", "T", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
          "B", "b", "kb", "gb", "Gb", "GIB", "gib", "Ki", "KIB", "e9", "_000", "x"]


@st.composite
def size_texts(draw: st.DrawFn) -> dict[str, Any]:
    """Size strings: well-formed ones of every unit, near misses, and arbitrary short text."""
    if draw(st.integers(0, 5)) == 0:
        text = draw(st.text(alphabet=" +-.0123456789eEkKmMgGtTiIbB_\t", max_size=8))
    else:
        number = draw(st.from_regex(r"[0-9]{1,10}", fullmatch=True))
        if draw(st.booleans()):
            number += "." + draw(st.from_regex(r"[0-9]{1,4}", fullmatch=True))
        sign = draw(st.sampled_from(["", "", "", "", "", " ", "-", "+"]))
        unit = draw(st.sampled_from(_UNITS[:17]) | st.sampled_from(_UNITS))  # valid units twice as likely
        text = sign + number + draw(st.sampled_from(["", "", " ", "  "])) + unit + draw(st.sampled_from(["", "", " "]))
    return {"text": text, "what": "--kv-cache-memory"}


@st.composite
def model_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """Synthetic Hugging Face configs of each family, with a tp size, block size and KV cache dtype."""
    family = draw(st.sampled_from(["dense", "mla", "gdn_hybrid", "gemma2", "gemma3", "layer_types"]))
    kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    cfg: dict[str, Any] = {"model_type": {"gemma2": "gemma2", "gemma3": "gemma3_text"}.get(family, "llama"),
                           "num_hidden_layers": draw(st.integers(1, 12)),
                           "num_attention_heads": kv_heads * draw(st.sampled_from([1, 2, 4])),
                           "num_key_value_heads": kv_heads,
                           "torch_dtype": draw(st.sampled_from(["bfloat16", "float16", "float32"]))}
    if draw(st.booleans()):
        cfg["head_dim"] = draw(st.sampled_from([64, 80, 128, 256]))
    cfg["hidden_size"] = cfg["num_attention_heads"] * draw(st.sampled_from([32, 64, 96, 128]))
    cache_dtypes = ["auto", "float16", "fp8", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head", "nvfp4"]
    if family == "mla":
        cfg.update(model_type="deepseek_v2", kv_lora_rank=draw(st.sampled_from([512, 256])),
                   qk_rope_head_dim=draw(st.sampled_from([64, 32])))
        cache_dtypes = ["auto", "fp8", "fp8_ds_mla", "bfloat16"]
    elif family == "gdn_hybrid":
        cfg.update(model_type="qwen3_next", full_attention_interval=draw(st.integers(1, 4)),
                   linear_num_key_heads=draw(st.sampled_from([2, 4])), linear_num_value_heads=draw(st.sampled_from([4, 8])),
                   linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4)
    elif family in ("gemma2", "gemma3"):
        cfg["sliding_window"] = draw(st.sampled_from([512, 4096]))
        if family == "gemma3":
            cfg["sliding_window_pattern"] = draw(st.integers(1, 6))
    elif family == "layer_types":
        cfg["sliding_window"] = 1024
        cfg["layer_types"] = draw(st.lists(st.sampled_from(["full_attention", "sliding_attention"]),
                                           min_size=cfg["num_hidden_layers"], max_size=cfg["num_hidden_layers"]))
    return {"config": cfg, "tensor_parallel_size": draw(st.sampled_from([1, 2, 3, 4, 8])),
            "block_size": draw(st.sampled_from([1, 16, 32])), "kv_cache_dtype": draw(st.sampled_from(cache_dtypes))}
