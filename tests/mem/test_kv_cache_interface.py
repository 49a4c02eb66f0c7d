"""Spec classes and bytes per block (MEM-2.1 to MEM-2.9): the C++ port's five cases plus formulas by hand."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from impl.v1.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
    KVQuantMode,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    kv_bytes_per_block,
    kv_quant_mode_for,
)

pytestmark = pytest.mark.cpu


def dense(heads: int = 2, **kw) -> FullAttentionSpec:
    return FullAttentionSpec(block_size=16, num_kv_heads=heads, head_size=64, dtype=torch.float32, **kw)


def gdn() -> MambaSpec:
    return MambaSpec(block_size=16, shapes=((3, 1024), (16, 64, 64)), dtypes=(torch.float32, torch.float32))


def config(*groups: KVCacheGroupSpec, per_layer=()) -> KVCacheConfig:
    return KVCacheConfig(num_blocks=0, kv_cache_tensors=(), kv_cache_groups=groups, per_layer_attn_specs=per_layer)


def test_cpp_case_1_dense_group_weighted_by_layer_count():
    assert dense().page_size_bytes == 16384
    assert kv_bytes_per_block(config(KVCacheGroupSpec(("layer1", "layer2"), dense()))) == 32768


def test_cpp_case_2_mla_drops_the_kv_factor_2():
    mla = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=576, dtype=torch.bfloat16)
    assert kv_bytes_per_block(config(KVCacheGroupSpec(("mla",), mla))) == 18432


def test_cpp_case_3_hybrid_excludes_the_mamba_group():
    cfg = config(KVCacheGroupSpec(("attn",), dense()), KVCacheGroupSpec(("g0", "g1", "g2"), gdn()))
    assert gdn().page_size_bytes == (3 * 1024 + 16 * 64 * 64) * 4
    assert kv_bytes_per_block(cfg) == 16384


def test_cpp_case_4_per_layer_specs_sum_and_skip_gdn_nulls():
    cfg = config(KVCacheGroupSpec(("fa",), dense()), per_layer=(dense(), dense(heads=1), None))
    assert kv_bytes_per_block(cfg) == 24576


def test_the_placeholder_defect_shape_counts_every_layer():
    """One group of 8 real layers costs 8 pages, not 1 (the C++ port's FIX-KV-GROUP-LAYER-COUNT)."""
    spec = FullAttentionSpec(block_size=32, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)
    one_name = kv_bytes_per_block(config(KVCacheGroupSpec(("fa",), spec)))
    eight = kv_bytes_per_block(config(KVCacheGroupSpec(tuple(f"l{i}" for i in range(8)), spec)))
    assert eight == 8 * one_name == 8 * 32 * 8 * 256 * 2


def test_page_formulas_by_hand():
    assert FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16).page_size_bytes == 65536
    assert FullAttentionSpec(block_size=16, num_kv_heads=4, head_size=192, head_size_v=128,
                             dtype=torch.bfloat16).page_size_bytes == 16 * 4 * 320 * 2
    assert MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype=torch.uint8,
                            kv_quant_mode=KVQuantMode.FP8_PER_TENSOR, cache_dtype_str="fp8_ds_mla").page_size_bytes == 64 * 656
    nvfp4 = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.uint8,
                              kv_quant_mode=KVQuantMode.NVFP4)
    assert nvfp4.page_size_bytes == 16 * 8 * 2 * (64 + 8)
    scaled = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.int8,
                               kv_quant_mode=KVQuantMode.INT8_PER_TOKEN_HEAD)
    assert (scaled.data_page_size_bytes, scaled.real_page_size_bytes, scaled.page_size_bytes) == \
        (32768, 32768 + 2 * 16 * 8 * 4, 32768 + 2 * 16 * 8 * 4)  # vLLM 0.33.0: the real page holds the scales
    sliding = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=256, dtype=torch.bfloat16, sliding_window=4096)
    chunked = ChunkedLocalAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16,
                                        attention_chunk_size=8192)
    assert (sliding.page_size_bytes, chunked.page_size_bytes) == (131072, 65536)


def test_padded_page_replaces_the_page_and_may_not_be_smaller():
    assert dense(page_size_padded=20000).page_size_bytes == 20000
    assert dense(page_size_padded=20000).real_page_size_bytes == 16384
    assert dense(page_size_padded=16384).page_size_bytes == 16384
    with pytest.raises(ValueError, match="page_size_padded must be >= the real page size 16384, got 16383"):
        dense(page_size_padded=16383)
    with pytest.raises(ValueError, match="real page size 33792"):
        FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.int8,
                          kv_quant_mode=KVQuantMode.INT8_PER_TOKEN_HEAD, page_size_padded=33000)
    assert MambaSpec(block_size=16, shapes=((3, 1024),), dtypes=(torch.bfloat16,), page_size_padded=7000).page_size_bytes == 7000
    with pytest.raises(ValueError, match="6144, got 6000"):
        MambaSpec(block_size=16, shapes=((3, 1024),), dtypes=(torch.bfloat16,), page_size_padded=6000)


@pytest.mark.parametrize(("kwargs", "error", "pattern"), [
    ({"block_size": 0}, ValueError, r"FullAttentionSpec.block_size must be an int >= 1, got 0"),
    ({"block_size": True}, TypeError, r"block_size must be an int >= 1, got True \(bool\)"),
    ({"num_kv_heads": 2.0}, TypeError, r"num_kv_heads .* got 2.0 \(float\)"),
    ({"dtype": "float32"}, TypeError, r"dtype must be a torch.dtype, got 'float32'"),
    ({"kv_quant_mode": 2}, TypeError, r"kv_quant_mode must be a KVQuantMode"),
    ({"kv_quant_mode": KVQuantMode.FP8_PER_TENSOR}, ValueError, r"1-byte dtype"),
    ({"sliding_window": 8, "attention_chunk_size": 8}, ValueError, r"at most one"),
    ({"head_size_v": 0}, ValueError, r"head_size_v must be an int >= 1, got 0"),
])
def test_invalid_full_attention_fields_are_refused(kwargs, error, pattern):
    fields = {"block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": torch.float32, **kwargs}
    with pytest.raises(error, match=pattern):
        FullAttentionSpec(**fields)


def test_quantization_constraints():
    with pytest.raises(ValueError, match="head_size must be a multiple of 16 for NVFP4, got 100"):
        FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=100, dtype=torch.uint8, kv_quant_mode=KVQuantMode.NVFP4)
    with pytest.raises(ValueError, match="NVFP4 is only laid out for FullAttentionSpec"):
        SlidingWindowSpec(block_size=16, num_kv_heads=1, head_size=128, dtype=torch.uint8,
                          kv_quant_mode=KVQuantMode.NVFP4, sliding_window=8)
    with pytest.raises(ValueError, match="head_size must be 576"):
        MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=512, dtype=torch.uint8, cache_dtype_str="fp8_ds_mla")
    assert [kv_quant_mode_for(s) for s in ("auto", "fp8", "fp8_e5m2", "int8_per_token_head", "nvfp4")] == [
        KVQuantMode.NONE, KVQuantMode.FP8_PER_TENSOR, KVQuantMode.FP8_PER_TENSOR, KVQuantMode.INT8_PER_TOKEN_HEAD,
        KVQuantMode.NVFP4]


def test_max_memory_usage_per_spec():
    full = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16)
    assert full.max_memory_usage_bytes(8192) == 512 * 65536
    assert full.max_memory_usage_bytes(8193) == 513 * 65536
    sliding = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16, sliding_window=4096)
    # min(4095 + 2048, 8192) = 6143 tokens -> 384 pages, + 1 for a window starting mid-page
    assert sliding.max_memory_usage_bytes(8192, 2048) == 385 * 65536
    assert sliding.max_memory_usage_bytes(1000) == (63 + 1) * 65536  # T unset = L; capped at L
    chunked = ChunkedLocalAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16,
                                        attention_chunk_size=1024)
    assert chunked.max_memory_usage_bytes(8192, 512) == 96 * 65536
    assert gdn().max_memory_usage_bytes(8192) == gdn().page_size_bytes
    assert dataclasses.replace(gdn(), mamba_cache_mode="align", num_speculative_blocks=2).max_memory_usage_bytes(64) == \
        4 * gdn().page_size_bytes
    with pytest.raises(ValueError, match=r"mamba_cache_mode must be one of \['none', 'align'\]"):  # 0.33.0 has no "all"
        dataclasses.replace(gdn(), mamba_cache_mode="all").max_memory_usage_bytes(64)
    with pytest.raises(ValueError, match="max_model_len must be an int >= 1, got 0"):
        full.max_memory_usage_bytes(0)
    with pytest.raises(TypeError, match="max_num_batched_tokens"):
        sliding.max_memory_usage_bytes(8192, True)


def test_containers_validate_and_are_frozen():
    group = KVCacheGroupSpec(["a", "b"], dense())
    assert group.layer_names == ("a", "b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        group.layer_names = ("c",)  # type: ignore[misc]
    with pytest.raises(ValueError, match="must not repeat"):
        KVCacheGroupSpec(("a", "a"), dense())
    with pytest.raises(ValueError, match="non-empty"):
        KVCacheGroupSpec((), dense())
    with pytest.raises(TypeError, match="per_layer_attn_specs\\[0\\] must be an AttentionSpec or None"):
        config(per_layer=(gdn(),))
    with pytest.raises(ValueError, match="KVCacheTensor.size must be an int >= 0, got -1"):
        KVCacheTensor(-1, ("a",))
    with pytest.raises(TypeError, match="needs a KVCacheConfig"):
        kv_bytes_per_block([dense()])  # type: ignore[arg-type]


def test_all_null_per_layer_specs_give_zero():
    assert kv_bytes_per_block(config(KVCacheGroupSpec(("g",), gdn()), per_layer=(None, None))) == 0
