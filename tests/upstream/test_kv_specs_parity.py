"""Parity of the port's KV specs with vLLM 0.33.0 (MEM-2.4 to MEM-2.9) through upstream/gates_kv_specs.py: the
disagreements found while gating page sizes (real page with scales, MLA head_size_v, NVFP4 widths, Mamba cache
modes), each fixed or declared, checked directly against the pinned release.

Skipped as a whole where vLLM is not installed (bash ci/install-upstream.sh installs the pin).
"""
from __future__ import annotations

import pytest

from tests.upstream import pinned  # noqa: F401  (skips this module unless the pinned vLLM is installed)

import upstream  # noqa: E402

pytestmark = pytest.mark.upstream

from gates.rows.road_v1_mem.build import impl_spec  # noqa: E402
from gates.rows.road_v1_mem.subjects import max_memory_usage_bytes as ours_usage  # noqa: E402
from upstream import gates_kv_specs, kv_specs  # noqa: E402

PER_TOKEN_HEAD = {"kind": "full", "block_size": 16, "num_kv_heads": 8, "head_size": 128, "dtype": "int8",
                  "kv_quant_mode": "INT8_PER_TOKEN_HEAD"}
MLA = {"kind": "mla", "block_size": 16, "num_kv_heads": 1, "head_size": 576, "dtype": "bfloat16"}
MAMBA = {"kind": "mamba", "block_size": 16, "shapes": [[4, 8]], "dtypes": ["float32"]}


@pytest.mark.parametrize("spec", [PER_TOKEN_HEAD, {**PER_TOKEN_HEAD, "kind": "sliding_window", "sliding_window": 64},
                                  {**MLA, "dtype": "uint8", "kv_quant_mode": "FP8_PER_TOKEN_HEAD"}])
def test_real_page_includes_the_per_token_head_scales(spec):
    assert impl_spec(spec).real_page_size_bytes == kv_specs.real_page_size_bytes(spec)
    assert kv_specs.real_page_size_bytes(spec) > kv_specs.real_page_size_bytes(spec, layout="raw")


def test_mla_head_size_v_is_vllms_default_and_other_widths_are_declared():
    assert impl_spec(MLA).head_size_v == kv_specs.spec_sizes(MLA)["head_size_v"] == 0
    wide = {**MLA, "head_size": 192, "head_size_v": 128}
    with pytest.raises(ValueError, match="head_size_v must be 0"):
        impl_spec(wide)
    with pytest.raises(ValueError, match="declared: kv-spec-mla-head-size-v"):
        gates_kv_specs.page_size_as_declared(wide)  # vLLM still builds 16 * (192 + 128) * 2 bytes


def test_nvfp4_unequal_widths_are_refused_by_both():
    spec = {"kind": "full", "block_size": 4, "num_kv_heads": 1, "head_size": 64, "head_size_v": 256,
            "dtype": "uint8", "kv_quant_mode": "NVFP4"}
    with pytest.raises(ValueError, match="equal head slots"):
        impl_spec(spec)
    with pytest.raises(ValueError, match="vLLM 0.33.0 refuses"):
        gates_kv_specs.page_size_bytes(spec)


def test_fp8_ds_mla_entry_comes_from_the_layer_not_the_raw_spec():
    spec = {**MLA, "dtype": "uint8", "cache_dtype_str": "fp8_ds_mla"}
    assert impl_spec(spec).page_size_bytes == gates_kv_specs.page_size_as_declared(spec) == 16 * 656
    assert kv_specs.page_size_bytes(spec, layout="raw") == 16 * 576


@pytest.mark.parametrize(("fields", "max_model_len"), [({}, 4096), ({"num_speculative_blocks": 2}, 64),
                                                       ({"mamba_cache_mode": "align"}, 64),
                                                       ({"mamba_cache_mode": "align", "num_speculative_blocks": 1,
                                                         "num_prefill_checkpoint_blocks": 2}, 4096)])
def test_mamba_max_memory_usage_in_every_vllm_cache_mode(fields, max_model_len):
    spec = {**MAMBA, **fields}
    assert ours_usage(spec, max_model_len) == gates_kv_specs.max_memory_usage_bytes(spec, max_model_len)


def test_mamba_cache_mode_all_is_refused_like_vllm():
    spec = {**MAMBA, "mamba_cache_mode": "all"}
    with pytest.raises(ValueError, match="mamba_cache_mode"):
        ours_usage(spec, 4096)
    with pytest.raises(ValueError, match="mamba_cache_mode"):
        gates_kv_specs.max_memory_usage_bytes(spec, 4096)


def test_a_declaration_vllm_no_longer_meets_is_stale(monkeypatch):
    """The checking view fails with the deviation's name when vLLM's page differs from the declared one."""
    monkeypatch.setattr(kv_specs, "page_size_bytes", lambda spec, layout="backend": 1)
    with pytest.raises(AssertionError, match="kv-spec-fp8-ds-mla-fields no longer holds"):
        gates_kv_specs.page_size_as_declared({**MLA, "head_size": 512, "dtype": "uint8",
                                              "cache_dtype_str": "fp8_ds_mla"})
