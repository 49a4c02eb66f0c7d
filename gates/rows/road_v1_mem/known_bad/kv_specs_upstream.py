"""Known-bad page sizes and max memory usage for the ROAD-V1-MEM upstream KV-spec gates (each must be rejected).

Page-size stand-ins take ``gates.rows.road_v1_mem.subjects:page_size_bytes``'s parameters; usage stand-ins take
``subjects:max_memory_usage_bytes``'s. Each plants one mistake a port of vllm/v1/kv_cache_interface.py can make.
"""
from __future__ import annotations

from typing import Any, Mapping

from impl.v1.kv_cache_interface import AttentionSpec, KVQuantMode, MambaSpec, SlidingWindowSpec, cdiv

from ..build import impl_spec
from ..subjects import max_memory_usage_bytes

_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def page_nvfp4_unequal_widths_accepted(spec: Mapping[str, Any]) -> int:
    """NVFP4 with K and V of different widths packed side by side (vLLM's FlashInfer layout refuses it)."""
    fields = dict(spec)
    if fields.get("kv_quant_mode") == "NVFP4" and fields.get("head_size_v", fields["head_size"]) != fields["head_size"]:
        widths = sum(w // 2 + w // 16 for w in (fields["head_size"], fields["head_size_v"]))
        page = fields["block_size"] * fields["num_kv_heads"] * widths
        return max(page, fields.get("page_size_padded") or 0)
    return impl_spec(spec).page_size_bytes


def page_one_scale_per_token_head(spec: Mapping[str, Any]) -> int:
    """Per-token-head modes with one fp32 scale per token and head instead of one each for K and V."""
    built = impl_spec(spec)
    if isinstance(built, AttentionSpec) and built.kv_quant_mode.is_per_token_head and built.page_size_padded is None:
        return built.data_page_size_bytes + built.scale_bytes_per_page // 2
    return built.page_size_bytes


def page_accepts_declared_refusals(spec: Mapping[str, Any]) -> int:
    """Builds what vLLM's dataclass builds where the port declares a refusal: K + V widths times the dtype."""
    try:
        return impl_spec(spec).page_size_bytes
    except (TypeError, ValueError):
        fields = dict(spec)
        width = fields["head_size"]
        v_width = fields.get("head_size_v", 0 if fields["kind"] == "mla" else width)
        return int(fields["block_size"]) * int(fields["num_kv_heads"]) * (width + v_width) * _ITEMSIZE[fields["dtype"]]


def page_raw_dataclass(spec: Mapping[str, Any]) -> int:
    """vLLM's raw dataclass page: the quantization mode and fp8_ds_mla's entry ignored (no backend layout)."""
    built = impl_spec(spec)
    if isinstance(built, AttentionSpec) and built.page_size_padded is None and (
            built.kv_quant_mode is not KVQuantMode.NONE or getattr(built, "cache_dtype_str", None)):
        v_width = built.head_size_v if hasattr(built, "head_size_v") else built.head_size
        return built.block_size * built.num_kv_heads * (built.head_size + v_width) * built.dtype.itemsize
    return built.page_size_bytes


# --- max-memory-usage stand-ins -----------------------------------------------------------------------------------

def usage_align_without_checkpoints(spec: Mapping[str, Any], max_model_len: int,
                                    max_num_batched_tokens: int | None = None) -> int:
    """Align mode's prefill-checkpoint states left out."""
    built = impl_spec(spec)
    if isinstance(built, MambaSpec) and built.mamba_cache_mode == "align":
        return (2 + built.num_speculative_blocks) * built.page_size_bytes
    return max_memory_usage_bytes(spec, max_model_len, max_num_batched_tokens)


def usage_mamba_page_per_block(spec: Mapping[str, Any], max_model_len: int,
                               max_num_batched_tokens: int | None = None) -> int:
    """A Mamba state per block of the request (the port's old "all" mode, applied to every mode)."""
    built = impl_spec(spec)
    if isinstance(built, MambaSpec):
        return cdiv(max_model_len, built.block_size) * built.page_size_bytes
    return max_memory_usage_bytes(spec, max_model_len, max_num_batched_tokens)


def usage_window_without_extra_page(spec: Mapping[str, Any], max_model_len: int,
                                    max_num_batched_tokens: int | None = None) -> int:
    """A sliding window's pages without the one for a window starting mid-page."""
    built = impl_spec(spec)
    if isinstance(built, SlidingWindowSpec):
        batched = max_model_len if max_num_batched_tokens is None else max_num_batched_tokens
        tokens = min(built.sliding_window - 1 + batched, max_model_len)
        return cdiv(tokens, built.block_size) * built.page_size_bytes
    return max_memory_usage_bytes(spec, max_model_len, max_num_batched_tokens)


def usage_whole_blocks_only(spec: Mapping[str, Any], max_model_len: int,
                            max_num_batched_tokens: int | None = None) -> int:
    """Full attention's pages counted by floor division: a part-filled last block is missed."""
    built = impl_spec(spec)
    if type(built).__name__ in ("FullAttentionSpec", "MLAAttentionSpec"):
        return (max_model_len // built.block_size) * built.page_size_bytes
    return max_memory_usage_bytes(spec, max_model_len, max_num_batched_tokens)
