"""EngineParams and the block-count precedence (MEM-1.1 to MEM-1.8)."""
from __future__ import annotations

import dataclasses
import math
import warnings
from types import SimpleNamespace

import pytest
import torch

from impl.entrypoints.model_loader import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    FALLBACK_NUM_BLOCKS,
    NO_CACHE_MEMORY,
    EngineParams,
    UtilizationNotAppliedWarning,
    resolve_kv_pool,
    resolve_num_blocks,
)
from impl.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, MambaSpec

pytestmark = pytest.mark.cpu

C_FIELDS = ["model_path", "tokenizer_config_path", "block_size", "num_blocks", "max_model_len", "max_num_seqs",
            "tool_parser", "reasoning_parser", "speculative_config", "enable_prefix_caching",
            "max_num_batched_tokens", "scheduling_policy", "kv_transfer_config", "enable_jump_forward", "device",
            "gpu_memory_utilization", "kv_cache_memory_bytes"]


def probe(layers: int = 1) -> KVCacheConfig:
    spec = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64, dtype=torch.float32)  # 16384 B
    return KVCacheConfig(0, (), (KVCacheGroupSpec(tuple(f"l{i}" for i in range(layers)), spec),))


STATE_ONLY = KVCacheConfig(0, (), (KVCacheGroupSpec(("g",), MambaSpec(block_size=16, shapes=((4,),),
                                                                       dtypes=(torch.float32,))),))


def test_fields_mirror_the_v16_struct_in_order_with_cpp_defaults():
    assert [f.name for f in dataclasses.fields(EngineParams)] == C_FIELDS
    p = EngineParams()
    assert (p.block_size, p.num_blocks, p.max_model_len, p.max_num_seqs) == (32, 0, 0, 32)
    assert (p.gpu_memory_utilization, p.kv_cache_memory_bytes, p.device) == (0.92, 0, 0)
    assert p.model_path is None and p.kv_transfer_config is None


def test_explicit_utilization_is_told_from_the_default():
    assert not EngineParams().gpu_memory_utilization_is_explicit
    assert EngineParams(gpu_memory_utilization=0.92).gpu_memory_utilization_is_explicit
    assert not EngineParams(gpu_memory_utilization=DEFAULT_GPU_MEMORY_UTILIZATION).gpu_memory_utilization_is_explicit
    assert not dataclasses.replace(EngineParams(), num_blocks=4).gpu_memory_utilization_is_explicit
    explicit = EngineParams(gpu_memory_utilization=1)
    assert type(explicit.gpu_memory_utilization) is float and explicit.gpu_memory_utilization == 1.0


@pytest.mark.parametrize(("field", "value", "error", "pattern"), [
    ("gpu_memory_utilization", 0.0, ValueError, r"EngineParams.gpu_memory_utilization must be a finite float in \(0, 1\], got 0.0"),
    ("gpu_memory_utilization", 1.0000001, ValueError, r"got 1.0000001"),
    ("gpu_memory_utilization", math.nan, ValueError, r"got nan"),
    ("gpu_memory_utilization", math.inf, ValueError, r"got inf"),
    ("gpu_memory_utilization", True, TypeError, r"got True \(bool\)"),
    ("gpu_memory_utilization", "0.9", TypeError, r"got '0.9' \(str\)"),
    ("kv_cache_memory_bytes", -1, ValueError, r"kv_cache_memory_bytes must be an int >= 0, got -1"),
    ("kv_cache_memory_bytes", 4.0e9, TypeError, r"kv_cache_memory_bytes .* \(float\)"),
    ("num_blocks", -3, ValueError, r"num_blocks must be an int >= 0, got -3"),
    ("num_blocks", True, TypeError, r"num_blocks .* True \(bool\)"),
    ("block_size", 0, ValueError, r"block_size must be an int >= 1, got 0"),
    ("enable_prefix_caching", 3, ValueError, r"enable_prefix_caching must be one of \[0, 1, 2\], got 3"),
    ("device", True, ValueError, r"device must be one of \[0, 1, 2\], got True"),
    ("scheduling_policy", 1, TypeError, r"scheduling_policy must be a str or None"),
])
def test_validation_names_field_value_and_range(field, value, error, pattern):
    with pytest.raises(error, match=pattern):
        EngineParams(**{field: value})


def test_override_wins_unchecked_against_every_other_knob():
    params = EngineParams(num_blocks=7, kv_cache_memory_bytes=100, gpu_memory_utilization=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_num_blocks(params, probe(), SimpleNamespace(available_kv_cache_memory=-1)) == 7
        assert resolve_num_blocks(EngineParams(num_blocks=10**9, kv_cache_memory_bytes=16384), probe()) == 10**9
        assert resolve_num_blocks(EngineParams(num_blocks=5), STATE_ONLY) == 5


def test_budget_is_floor_divided_and_ignores_utilization():
    assert resolve_num_blocks(EngineParams(kv_cache_memory_bytes=16384 * 100 + 1), probe()) == 100
    assert resolve_num_blocks(EngineParams(kv_cache_memory_bytes=16384 * 100 + 1, gpu_memory_utilization=0.1),
                              probe()) == 100
    assert resolve_num_blocks(EngineParams(kv_cache_memory_bytes=16384 * 100), probe(layers=2)) == 50
    sizing = resolve_kv_pool(EngineParams(kv_cache_memory_bytes=2**30), probe())
    assert (sizing.num_blocks, sizing.decided_by, sizing.bytes_per_block) == (65536, "kv_cache_memory_bytes", 16384)


def test_sub_block_budget_is_an_error_naming_both_numbers_and_knobs():
    with pytest.raises(ValueError) as err:
        resolve_num_blocks(EngineParams(kv_cache_memory_bytes=16383), probe())
    message = str(err.value)
    assert "16383" in message and "16384" in message
    assert "--kv-cache-memory" in message and "--num-blocks" in message


def test_zero_bytes_per_block_cannot_be_divided():
    with pytest.raises(ValueError, match="0 KV bytes per block"):
        resolve_num_blocks(EngineParams(kv_cache_memory_bytes=10**6), STATE_ONLY)
    with pytest.raises(ValueError, match="0 KV bytes per block"):
        resolve_num_blocks(EngineParams(), STATE_ONLY, SimpleNamespace(available_kv_cache_memory=10**6))


def test_profile_path():
    assert resolve_num_blocks(EngineParams(), probe(), SimpleNamespace(available_kv_cache_memory=16384 * 9 + 5)) == 9
    assert resolve_kv_pool(EngineParams(), probe(), SimpleNamespace(available_kv_cache_memory=16384)).decided_by == \
        "gpu_memory_utilization"
    for avail in (0, -1):
        with pytest.raises(ValueError, match="^No available memory for the cache blocks") as err:
            resolve_num_blocks(EngineParams(), probe(), SimpleNamespace(available_kv_cache_memory=avail))
        assert str(err.value).startswith(NO_CACHE_MEMORY) and f"left {avail} bytes" in str(err.value)
    with pytest.raises(ValueError, match="smaller than a single KV block"):
        resolve_num_blocks(EngineParams(), probe(), SimpleNamespace(available_kv_cache_memory=100))
    with pytest.raises(TypeError, match="available_kv_cache_memory must be an int"):
        resolve_num_blocks(EngineParams(), probe(), SimpleNamespace(available_kv_cache_memory=1.5e9))
    with pytest.raises(TypeError, match="available_kv_cache_memory must be an int"):
        resolve_num_blocks(EngineParams(), probe(), object())
    # the budget outranks the profile
    assert resolve_num_blocks(EngineParams(kv_cache_memory_bytes=16384 * 3), probe(),
                              SimpleNamespace(available_kv_cache_memory=10**9)) == 3


def test_fallback_warns_only_for_an_explicit_utilization():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_num_blocks(EngineParams(), probe()) == FALLBACK_NUM_BLOCKS == 256
    with pytest.warns(UtilizationNotAppliedWarning, match=r"0\.92 was accepted but did not size the KV cache.*256 blocks.*--kv-cache-memory.*--num-blocks"):
        assert resolve_num_blocks(EngineParams(gpu_memory_utilization=0.92), probe()) == 256
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_num_blocks(EngineParams(gpu_memory_utilization=0.5, kv_cache_memory_bytes=16384), probe()) == 1


def test_resolve_refuses_non_params():
    with pytest.raises(TypeError, match="needs EngineParams"):
        resolve_num_blocks({"num_blocks": 3}, probe())  # type: ignore[arg-type]
