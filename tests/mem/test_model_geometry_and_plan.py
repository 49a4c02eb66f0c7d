"""Probe geometry from config.json and the kv-plan command (MEM-2.10 to MEM-2.12)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from impl.entrypoints import kv_plan
from impl.entrypoints.model_geometry import (
    ProbeRequest,
    head_size,
    kv_heads_per_rank,
    layer_types,
    load_model_config,
    probe_kv_cache_config,
)
from impl.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, MLAAttentionSpec, SlidingWindowSpec, kv_bytes_per_block

pytestmark = pytest.mark.cpu

FIXTURES = Path(__file__).resolve().parents[2] / "gates" / "rows" / "road_v1_mem" / "fixtures" / "models"
MODELS = sorted(p.stem for p in FIXTURES.glob("*.json"))


def cfg(name: str) -> dict:
    return load_model_config(FIXTURES / f"{name}.json")


def bpb(name: str, tp: int = 1, bs: int = 16, **kw) -> int:
    return kv_bytes_per_block(probe_kv_cache_config(cfg(name), ProbeRequest(tensor_parallel_size=tp, block_size=bs, **kw)))


def test_four_fixtures_are_shipped():
    assert MODELS == ["deepseek-v2-lite", "gemma-2-9b-it", "llama-3.1-8b", "qwen3-next-80b-a3b"]


def test_llama_dense_gqa():
    probe = probe_kv_cache_config(cfg("llama-3.1-8b"), ProbeRequest(block_size=16))
    (group,) = probe.kv_cache_groups
    assert isinstance(group.kv_cache_spec, FullAttentionSpec) and len(group.layer_names) == 32
    assert (group.kv_cache_spec.num_kv_heads, group.kv_cache_spec.head_size, group.kv_cache_spec.dtype) == \
        (8, 128, torch.bfloat16)
    assert group.kv_cache_spec.page_size_bytes == 64 * 1024  # 128 KiB per token over 32 layers
    assert [bpb("llama-3.1-8b", tp) for tp in (1, 2, 4, 8)] == [2097152, 1048576, 524288, 262144]
    assert bpb("llama-3.1-8b", 16) == 32 * 16 * 1 * 256 * 2  # 16 ranks share 8 KV heads: one replica each


def test_deepseek_mla_latent_is_one_head_on_every_rank():
    config = cfg("deepseek-v2-lite")
    assert head_size(config) == 576 and kv_heads_per_rank(config, 8) == 1
    probe = probe_kv_cache_config(config, ProbeRequest(block_size=16))
    assert isinstance(probe.kv_cache_groups[0].kv_cache_spec, MLAAttentionSpec)
    assert bpb("deepseek-v2-lite") == bpb("deepseek-v2-lite", 8) == 27 * 18432
    assert bpb("deepseek-v2-lite", kv_cache_dtype="fp8_ds_mla") == 27 * 16 * 656


def test_qwen3_next_hybrid_excludes_gdn_state():
    config = cfg("qwen3-next-80b-a3b")
    kinds = layer_types(config)
    assert kinds.count("full_attention") == 12 and kinds[3] == "full_attention" and kinds[0] == "linear_attention"
    probe = probe_kv_cache_config(config, ProbeRequest(block_size=16))
    by_kind = {type(g.kv_cache_spec): g for g in probe.kv_cache_groups}
    assert len(by_kind[MambaSpec].layer_names) == 36 and len(by_kind[FullAttentionSpec].layer_names) == 12
    assert by_kind[MambaSpec].kv_cache_spec.shapes == ((3, 8192), (32, 128, 128))
    assert bpb("qwen3-next-80b-a3b") == 12 * 16 * 2 * 512 * 2
    assert bpb("qwen3-next-80b-a3b", 2) == bpb("qwen3-next-80b-a3b", 4) == bpb("qwen3-next-80b-a3b", 8)  # replicated


def test_gemma2_interleaved_sliding_window_and_head_dim():
    config = cfg("gemma-2-9b-it")
    assert head_size(config) == 256  # head_dim, not 3584 / 16 = 224
    kinds = layer_types(config)
    assert kinds[0] == "sliding_attention" and kinds[1] == "full_attention" and kinds.count("sliding_attention") == 21
    probe = probe_kv_cache_config(config, ProbeRequest(block_size=16))
    sliding = [g for g in probe.kv_cache_groups if isinstance(g.kv_cache_spec, SlidingWindowSpec)]
    assert sliding[0].kv_cache_spec.sliding_window == 4096 and len(sliding[0].layer_names) == 21
    assert bpb("gemma-2-9b-it") == 42 * 16 * 8 * 512 * 2


def test_other_layer_type_sources():
    base = {"num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
            "torch_dtype": "float16", "sliding_window": 512}
    gemma3 = layer_types({**base, "model_type": "gemma3_text", "sliding_window_pattern": 6})
    assert [i for i, k in enumerate(gemma3) if k == "full_attention"] == [5, 11]
    assert layer_types({**base, "use_sliding_window": False}) == ("full_attention",) * 12
    assert layer_types({**base, "layer_types": ["full_attention", "sliding_attention"] * 6})[1] == "sliding_attention"
    with pytest.raises(ValueError, match="layer_types must list 12 entries"):
        layer_types({**base, "layer_types": ["full_attention"]})


@pytest.mark.parametrize(("config", "tp", "pattern"), [
    ({"num_attention_heads": 32, "num_key_value_heads": 8}, 3,
     r"Total number of attention heads \(32\) must be divisible by tensor parallel size \(3\)"),
    ({"num_attention_heads": 12, "num_key_value_heads": 4}, 6, r"tensor parallel size \(6\) must be a multiple of num_key_value_heads \(4\)"),
    ({"num_attention_heads": 6, "num_key_value_heads": 4}, 1, r"must be a multiple of num_key_value_heads"),
    ({"num_attention_heads": 8}, 0, r"tensor_parallel_size must be an int >= 1, got 0"),
])
def test_sharding_errors(config, tp, pattern):
    with pytest.raises(ValueError, match=pattern):
        kv_heads_per_rank(config, tp)


def test_missing_or_bad_fields():
    with pytest.raises(ValueError, match="no 'num_hidden_layers'"):
        layer_types({})
    with pytest.raises(ValueError, match="torch_dtype must be one of"):
        probe_kv_cache_config({"num_hidden_layers": 1, "num_attention_heads": 1, "head_dim": 8, "torch_dtype": "int4"},
                              ProbeRequest())
    with pytest.raises(ValueError, match="kv_cache_dtype must be one of"):
        ProbeRequest(kv_cache_dtype="fp4")
    with pytest.raises(ValueError, match="needs an MLA model"):
        bpb("llama-3.1-8b", kv_cache_dtype="fp8_ds_mla")


def test_multimodal_text_config_is_unwrapped(tmp_path):
    inner = json.loads((FIXTURES / "llama-3.1-8b.json").read_text())
    inner.pop("torch_dtype")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "wrapper", "torch_dtype": "float16", "text_config": inner}))
    probe = probe_kv_cache_config(load_model_config(path), ProbeRequest(block_size=16))
    assert probe.kv_cache_groups[0].kv_cache_spec.dtype == torch.float16


@pytest.mark.parametrize("model", MODELS)
def test_kv_plan_answers_for_each_fixture(model, capsys):
    argv = ["--model-config", str(FIXTURES / f"{model}.json"), "--block-size", "16", "--kv-cache-memory", "4GiB",
            "--max-model-len", "8192"]
    assert kv_plan.main(argv) == 0
    text = capsys.readouterr().out
    assert "GPU KV cache size: " in text and "Maximum concurrency for 8,192 tokens per request: " in text
    assert "decided by --kv-cache-memory" in text
    assert kv_plan.main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["num_blocks"] == 4 * 2**30 // result["bytes_per_block"]
    assert result["kv_cache_tokens"] == 16 * result["num_blocks"]
    assert result["bytes_per_block"] == sum(g["bytes_per_block"] for g in result["groups"]) == bpb(model)


def test_kv_plan_fallback_warns_and_bad_input_exits_2(capsys):
    llama = str(FIXTURES / "llama-3.1-8b.json")
    assert kv_plan.main(["--model-config", llama, "--gpu-memory-utilization", "0.9"]) == 0
    captured = capsys.readouterr()
    assert "WARNING: --gpu-memory-utilization 0.9 was accepted but did not size the KV cache" in captured.err
    assert "num_blocks: 256 (decided by fallback" in captured.out
    assert kv_plan.main(["--model-config", llama, "--kv-cache-memory", "100"]) == 2
    assert "smaller than a single KV block" in capsys.readouterr().err
    assert kv_plan.main(["--model-config", llama, "--tensor-parallel-size", "3"]) == 2
    assert kv_plan.main(["--model-config", str(FIXTURES / "missing.json")]) == 2
    with pytest.raises(SystemExit):
        kv_plan.main(["--model-config", llama, "--kv-cache-memory", "4.5G"])
    assert "'4.5G'" in capsys.readouterr().err


def test_kv_plan_console_entry_point_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "impl.entrypoints.kv_plan", "--model-config",
                          str(FIXTURES / "deepseek-v2-lite.json"), "--num-blocks", "10", "--json"],
                         check=True, capture_output=True, text=True).stdout
    assert json.loads(out)["decided_by"] == "num_blocks"
