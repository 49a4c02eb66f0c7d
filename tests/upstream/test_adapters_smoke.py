"""Smoke tests of the upstream adapters (upstream/): a few direct calls each, against figures of vLLM 0.33.0.

Skipped as a whole where vLLM is not installed (bash ci/install-upstream.sh installs the pin).
"""
from __future__ import annotations

import pytest

from tests.upstream import pinned  # noqa: F401  (skips this module unless the pinned vLLM is installed)

import upstream  # noqa: E402

pytestmark = pytest.mark.upstream

from upstream import kv_fit, kv_quant, kv_specs, memory, parallel, sizes  # noqa: E402

FULL_FP32 = {"kind": "full", "block_size": 16, "num_kv_heads": 2, "head_size": 64, "dtype": "float32"}
FIT_MODEL = {"num_layers": 32, "block_size": 16, "num_kv_heads": 32, "head_size": 128, "dtype": "float16"}


def test_check_install_imports_every_module():
    info = upstream.check_install()
    assert info["vllm"] == upstream.PINNED_VERSION
    assert info["modules"] == list(upstream.MODULES)
    assert upstream.unavailable_reason() is None


# ---------------------------------------------------------------- kv_specs
@pytest.mark.parametrize(("spec", "page"), [
    (FULL_FP32, 16384),
    ({"kind": "mla", "block_size": 16, "num_kv_heads": 1, "head_size": 576, "dtype": "bfloat16"}, 18432),
    ({"kind": "sliding_window", "block_size": 16, "num_kv_heads": 8, "head_size": 256, "dtype": "bfloat16",
      "sliding_window": 4096}, 131072),
    ({"kind": "chunked_local", "block_size": 16, "num_kv_heads": 8, "head_size": 128, "dtype": "bfloat16",
      "attention_chunk_size": 8192}, 65536),
    ({"kind": "mamba", "block_size": 16, "shapes": [[3, 1024], [16, 64, 64]], "dtypes": ["float32", "float32"]},
     274432),
    ({**FULL_FP32, "page_size_padded": 20000}, 20000),
])
def test_page_sizes_of_plain_specs(spec, page):
    assert kv_specs.page_size_bytes(spec) == page
    assert kv_specs.page_size_bytes(spec, layout="raw") == page


def test_quantized_pages_come_from_the_backend_packing():
    nvfp4 = {"kind": "full", "block_size": 16, "num_kv_heads": 8, "head_size": 128, "dtype": "uint8",
             "kv_quant_mode": "NVFP4"}
    assert kv_specs.page_size_bytes(nvfp4) == 18432            # FlashInfer: 2*8 head slots of 64 + 8 bytes
    assert kv_specs.page_size_bytes(nvfp4, layout="raw") == 32768  # the raw dataclass ignores the mode
    per_token_head = {**nvfp4, "kv_quant_mode": "FP8_PER_TOKEN_HEAD"}
    sizes_ = kv_specs.spec_sizes(per_token_head)
    assert sizes_["page_size_bytes"] == sizes_["real_page_size_bytes"] == 33792   # scales are in the real page
    ds_mla = {"kind": "mla", "block_size": 16, "num_kv_heads": 1, "head_size": 576, "dtype": "uint8",
              "kv_quant_mode": "FP8_PER_TENSOR", "cache_dtype_str": "fp8_ds_mla"}
    assert kv_specs.page_size_bytes(ds_mla) == 16 * 656
    assert kv_specs.page_size_bytes(ds_mla, layout="raw") == 16 * 576


def test_max_memory_usage():
    assert kv_specs.max_memory_usage_bytes(FULL_FP32, max_model_len=100) == 7 * 16384
    window = {**FULL_FP32, "kind": "sliding_window", "sliding_window": 32}
    assert kv_specs.max_memory_usage_bytes(window, max_model_len=1000, max_num_batched_tokens=16) == \
        ((32 - 1 + 16 + 15) // 16 + 1) * 16384
    mamba = {"kind": "mamba", "block_size": 16, "shapes": [[4, 8]], "dtypes": ["float32"]}
    assert kv_specs.max_memory_usage_bytes(mamba, max_model_len=4096) == 128
    assert kv_specs.max_memory_usage_bytes(mamba, max_model_len=4096, mamba_cache_mode="align") == 256
    with pytest.raises(ValueError, match="mamba_cache_mode"):  # 0.33.0 knows only "none" and "align"
        kv_specs.max_memory_usage_bytes(mamba, max_model_len=4096, mamba_cache_mode="all")


# ---------------------------------------------------------------- kv_quant
def test_quant_modes_and_cache_dtypes():
    modes = kv_quant.quant_modes()
    assert modes["NONE"] == 0 and modes["FP8_PER_TENSOR"] == 1 and modes["NVFP4"] == 5
    assert kv_quant.quant_mode_aliases() == {"CUSTOM": "OCTAVE_K3V4"}
    mapping = kv_quant.cache_dtype_modes()
    assert mapping["fp8_ds_mla"] == "FP8_PER_TENSOR"
    assert mapping["nvfp4"] == "NVFP4" and mapping["nvfp4_4over6"] == "NVFP4"
    assert mapping["int8_per_token_head"] == "INT8_PER_TOKEN_HEAD"
    assert kv_quant.quant_mode_of("auto") == "NONE"
    assert kv_quant.storage_dtypes()["fp8"] == "uint8"


# ---------------------------------------------------------------- sizes
def test_human_readable_int():
    assert sizes.parse("25.6k") == 25600
    assert sizes.parse("4G") == 4 * 2**30
    assert sizes.parse(" 16M ") == 16 * 2**20
    assert sizes.outcome("4.5G")["error"] == "ArgumentTypeError"
    assert sizes.outcome("4GiB")["error"] == "ValueError"
    assert sizes.parse("1_000") == 1000   # int() rules for plain numbers
    assert sizes.parse_or_auto("auto") == -1


# ---------------------------------------------------------------- parallel
def test_group_tables():
    tables = parallel.group_tables({"external_dp": 2, "dp": 2, "pp": 2, "tp": 2})
    assert list(tables) == ["tp", "dcp", "pcp", "pp", "dp", "ep"]
    assert tables["dp"] == [[0, 4], [2, 6], [1, 5], [3, 7], [8, 12], [10, 14], [9, 13], [11, 15]]
    assert tables["ep"] == [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]
    assert parallel.group_ranks({"tp": 2, "pcp": 2, "dcp": 2}, "dcp") == [[0, 2], [1, 3]]   # spans PCP first
    assert parallel.rank_groups({"tp": 2}, "tp") == [[[0, 1], 0], [[0, 1], 1]]


def test_parallel_config_validation():
    assert parallel.accepts({"tp": 1, "pcp": 2, "dcp": 2})
    refused = parallel.parallel_config_outcome({"tp": 2, "pcp": 3, "dcp": 2})
    assert not refused["accepted"] and "valid DCP sizes are [1, 3, 6]" in refused["message"]
    assert "tp_size=4 must be divisible by dcp_size=3" in parallel.parallel_config_outcome({"tp": 4, "dcp": 3})["message"]


# ---------------------------------------------------------------- kv_fit
def test_fit_check_holds_back_the_null_block():
    assert kv_fit.estimate_max_model_len(**FIT_MODEL, available_memory=8 * 2**30, max_model_len=16385) == 16384
    assert kv_fit.estimate_max_model_len(**FIT_MODEL, available_memory=8 * 2**30 - 1, max_model_len=16385) == 16368
    block = kv_fit.pool_bytes_per_block(**FIT_MODEL)
    assert block == 32 * 16 * 32 * 128 * 2 * 2
    with pytest.raises(ValueError, match=r"^To serve at least one request with the model's max seq len \(16384\)"):
        kv_fit.check_enough_kv_cache_memory(**FIT_MODEL, available_memory=8 * 2**30, max_model_len=16384)
    assert kv_fit.check_enough_kv_cache_memory(**FIT_MODEL, available_memory=8 * 2**30 + block,
                                               max_model_len=16384) is None
    with pytest.raises(ValueError, match="^No available memory for the cache blocks"):
        kv_fit.check_enough_kv_cache_memory(**FIT_MODEL, available_memory=block, max_model_len=16)


# ---------------------------------------------------------------- memory
def test_memory_profile_with_faked_readings():
    gib = 2**30
    case = {"device": "cuda:0", "gpu_memory_utilization": 0.9, "weights_memory": 2 * gib, "snapshots": {
        "before_create": {"torch_peak": 0, "free_memory": 79 * gib, "total_memory": 80 * gib, "torch_memory": 0,
                          "timestamp": 0.0},
        "before_profile": {"torch_peak": 2 * gib, "free_memory": 76 * gib + gib // 2, "total_memory": 80 * gib,
                           "torch_memory": 2 * gib, "timestamp": 1.0},
        "after_profile": {"torch_peak": 4 * gib, "free_memory": 75 * gib, "total_memory": 80 * gib,
                          "torch_memory": 3 * gib, "timestamp": 2.0}}}
    result = memory.profile(case)
    assert result["requested_memory"] == 72 * gib
    assert result["total_consumed"] == 4 * gib and result["transient_peak_headroom"] == gib
    assert result["non_kv_cache_memory"] == 5 * gib
    assert memory.available_kv_cache_memory(case) == 67 * gib
    with pytest.raises(ValueError, match=r"^Free memory on device cuda:0 \(79\.0/80\.0 GiB\) on startup"):
        memory.requested_memory("cuda:0", 80 * gib, 79 * gib, 0.99)
    assert memory.snapshot("cuda:0", case["snapshots"]["after_profile"])["non_torch_memory"] == 2 * gib
