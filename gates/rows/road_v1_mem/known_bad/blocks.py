"""Known-bad bytes-per-block and page-size implementations for ROAD-V1-MEM M2 (each must be rejected).

``group_counted_once`` is the defect the C++ port shipped (FIX-KV-GROUP-LAYER-COUNT): registries published
one placeholder layer name per group, so a 1 GiB budget allocated 8.5 GiB on a 27B model.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from impl.v1.kv_cache_interface import (
    FP8_DS_MLA,
    AttentionSpec,
    KVCacheConfig,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    kv_bytes_per_block,
)

from ..build import impl_kv_config, impl_spec


def _on_layout(stand_in: Callable[[KVCacheConfig], int]) -> Callable[[Mapping[str, Any]], int]:
    """A config stand-in given the layout, as gates.rows.road_v1_mem.subjects:kv_bytes_per_block is."""
    def on_layout(layout: Mapping[str, Any]) -> int:
        return stand_in(impl_kv_config(layout))
    # the name and docstring, not functools.wraps: its __wrapped__ would show the harness (config) for (layout)
    on_layout.__name__, on_layout.__qualname__ = stand_in.__name__, stand_in.__qualname__
    on_layout.__doc__ = stand_in.__doc__
    return on_layout


def _mla_doubled(spec: Any) -> int:
    if isinstance(spec, MLAAttentionSpec) and spec.cache_dtype_str != FP8_DS_MLA and spec.page_size_padded is None:
        return 2 * spec.data_page_size_bytes + spec.scale_bytes_per_page
    return spec.page_size_bytes


@_on_layout
def mla_keeps_factor_2(config: KVCacheConfig) -> int:
    """MLA pages counted as separate K and V."""
    specs = [s for s in config.per_layer_attn_specs if s is not None] if config.per_layer_attn_specs else [
        g.kv_cache_spec for g in config.kv_cache_groups if isinstance(g.kv_cache_spec, AttentionSpec)
        for _ in g.layer_names]
    return sum(_mla_doubled(s) for s in specs)


@_on_layout
def mamba_counted_per_block(config: KVCacheConfig) -> int:
    """Recurrent state added to every block as if it were paged."""
    state = sum(g.kv_cache_spec.page_size_bytes * len(g.layer_names)
                for g in config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec))
    return kv_bytes_per_block(config) + state


@_on_layout
def group_counted_once(config: KVCacheConfig) -> int:
    """One page per group whatever its layer count (the C++ port's placeholder-name defect)."""
    if config.per_layer_attn_specs:
        return kv_bytes_per_block(config)
    return sum(g.kv_cache_spec.page_size_bytes for g in config.kv_cache_groups
               if isinstance(g.kv_cache_spec, AttentionSpec))


@_on_layout
def per_layer_path_ignored(config: KVCacheConfig) -> int:
    """Always sums the groups, even when heterogeneous per-layer specs are given."""
    return kv_bytes_per_block(KVCacheConfig(config.num_blocks, config.kv_cache_tensors, config.kv_cache_groups))


def _unpadded(spec: Any) -> int:
    return spec.unpadded_page_size_bytes if isinstance(spec, AttentionSpec) else spec.page_size_bytes


@_on_layout
def padded_page_ignored(config: KVCacheConfig) -> int:
    """The real page is used where a padded page was declared."""
    if config.per_layer_attn_specs:
        return sum(_unpadded(s) for s in config.per_layer_attn_specs if s is not None)
    return sum(_unpadded(g.kv_cache_spec) * len(g.layer_names) for g in config.kv_cache_groups
               if isinstance(g.kv_cache_spec, AttentionSpec))


# --- page-size stand-ins: same signature as gates.rows.road_v1_mem.subjects:page_size_bytes -------------------------

def page_padded_below_real_accepted(spec: Mapping[str, Any]) -> int:
    """A padded page smaller than the real one is taken as given."""
    fields = dict(spec)
    padded = fields.pop("page_size_padded", None)
    real = impl_spec(fields).page_size_bytes
    return real if padded is None else padded


def page_mla_keeps_factor_2(spec: Mapping[str, Any]) -> int:
    return _mla_doubled(impl_spec(spec))


def page_nvfp4_unpacked(spec: Mapping[str, Any]) -> int:
    """NVFP4 values counted a byte each, without scales."""
    built = impl_spec(spec)
    if getattr(built, "kv_quant_mode", None) is KVQuantMode.NVFP4 and built.page_size_padded is None:
        return built.block_size * built.num_kv_heads * (built.head_size + built.head_size_v)
    return built.page_size_bytes


def page_scales_dropped(spec: Mapping[str, Any]) -> int:
    """Per-token-head scales left out of the page."""
    built = impl_spec(spec)
    if isinstance(built, AttentionSpec) and built.page_size_padded is None:
        return built.data_page_size_bytes
    return built.page_size_bytes


def page_fp8_ds_mla_as_latent(spec: Mapping[str, Any]) -> int:
    """fp8_ds_mla read as a plain 576-byte fp8 latent instead of its 656-byte entry."""
    built = impl_spec(spec)
    if isinstance(built, MLAAttentionSpec) and built.cache_dtype_str == FP8_DS_MLA and built.page_size_padded is None:
        return built.block_size * built.head_size
    return built.page_size_bytes
