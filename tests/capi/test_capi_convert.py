"""Reading vllm_model_params into EngineParams and back (CAPI-5, CAPI-9)."""
from __future__ import annotations

import gc
import math

import pytest
import torch

from gates.rows.capi_abi.build import DEFAULT_PROBE, probe_config, struct_of
from impl.capi import (InvalidArgument, ModelParams, VllmStatus, engine_load, engine_params_from_c,
                       model_params_default, model_params_from_engine)
from impl.entrypoints.model_loader import EngineParams
from impl.v1 import kv_cache_interface as kv

pytestmark = pytest.mark.cpu


def test_zero_struct_reads_as_the_engine_defaults():
    params = engine_params_from_c(ModelParams())
    assert params == EngineParams()
    assert not params.gpu_memory_utilization_is_explicit
    assert (params.block_size, params.num_blocks, params.max_num_seqs, params.kv_cache_memory_bytes) == (32, 0, 32, 0)


def test_default_struct_counts_its_utilization_as_chosen():
    params = engine_params_from_c(model_params_default())
    assert params.gpu_memory_utilization == 0.92 and params.gpu_memory_utilization_is_explicit


@pytest.mark.parametrize(("member", "raw", "field", "read"), [
    ("block_size", -7, "block_size", 32), ("block_size", 16, "block_size", 16),
    ("num_blocks", -1, "num_blocks", 0), ("num_blocks", 9, "num_blocks", 9),
    ("max_num_seqs", 0, "max_num_seqs", 32), ("max_model_len", -3, "max_model_len", 0),
    ("kv_cache_memory_bytes", 2**40, "kv_cache_memory_bytes", 2**40),
    ("gpu_memory_utilization", 1.0, "gpu_memory_utilization", 1.0),
])
def test_member_meanings(member, raw, field, read):
    assert getattr(engine_params_from_c(struct_of({member: raw})), field) == read


@pytest.mark.parametrize(("members", "named"), [
    ({"gpu_memory_utilization": math.nan}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": -0.5}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": math.inf}, "gpu_memory_utilization"),
    ({"kv_cache_memory_bytes": -1}, "kv_cache_memory_bytes"),
    ({"device": 3}, "device"),
    ({"enable_jump_forward": -1}, "enable_jump_forward"),
    ({"model_path": [0xC0, 0xAF]}, "model_path"),
    ({"device": 5, "gpu_memory_utilization": math.nan}, "device"),
])
def test_bad_members_are_invalid_argument_naming_the_first(members, named):
    with pytest.raises(InvalidArgument) as caught:
        engine_params_from_c(struct_of(members))
    assert caught.value.field == named and caught.value.status is VllmStatus.VLLM_ERR_INVALID_ARGUMENT
    assert f"vllm_model_params.{named} must be" in str(caught.value)


def test_inverse_refuses_values_without_a_c_spelling():
    with pytest.raises(InvalidArgument, match="num_blocks=2147483648 has no int32_t spelling"):
        model_params_from_engine(EngineParams(num_blocks=2**31))
    with pytest.raises(InvalidArgument, match="NUL"):
        model_params_from_engine(EngineParams(scheduling_policy="fc\0fs"))


def test_struct_keeps_its_strings_alive():
    struct = model_params_from_engine(EngineParams(model_path="".join(["模型", "/", "é" * 50])))
    gc.collect()
    assert struct.model_path.decode("utf-8") == "模型/" + "é" * 50
    assert engine_params_from_c(struct).model_path == "模型/" + "é" * 50


def test_load_statuses():
    probe = probe_config(DEFAULT_PROBE)  # 32768 bytes per block
    ok = engine_load(struct_of({"kv_cache_memory_bytes": 2**32}), probe)
    assert (ok.status, ok.num_blocks, ok.error) == (VllmStatus.VLLM_OK, 2**32 // 32768, None)
    small = engine_load(struct_of({"kv_cache_memory_bytes": 32767}), probe)
    assert small.status is VllmStatus.VLLM_ERR_INVALID_ARGUMENT
    assert small.error.startswith("vllm_model_params.kv_cache_memory_bytes: ") and "32768" in small.error
    bad = engine_load(struct_of({"gpu_memory_utilization": 2.0}), probe)
    assert bad.status is VllmStatus.VLLM_ERR_INVALID_ARGUMENT and "gpu_memory_utilization" in bad.error


def test_budget_for_a_model_without_attention_kv_is_a_model_load_error():
    """The arguments are valid; the model cannot be sized by bytes (the port's runtime_error -> MODEL_LOAD)."""
    mamba = kv.MambaSpec(block_size=16, shapes=((4, 8),), dtypes=(torch.float16,))
    probe = kv.KVCacheConfig(num_blocks=0, kv_cache_tensors=(), kv_cache_groups=(kv.KVCacheGroupSpec(("m0",), mamba),))
    result = engine_load(struct_of({"kv_cache_memory_bytes": 2**20}), probe)
    assert result.status is VllmStatus.VLLM_ERR_MODEL_LOAD
    assert "0 KV bytes per block" in result.error
