"""kv-plan's --dtype reaches the model geometry as vLLM 0.33.0 gets it (MEM-2.11, issue 13): ``auto`` is the
checkpoint's dtype as vLLM runs it (a float16 Gemma-2/3 checkpoint in bfloat16), an explicit dtype is explicit, so
an explicit float16 for Gemma-2/3 is refused even on a float16 checkpoint (vllm/config/model.py _check_valid_dtype)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from impl.entrypoints import kv_plan

pytestmark = pytest.mark.cpu

_GEMMA2 = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "num_hidden_layers": 2,
           "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 1024, "head_dim": 128,
           "sliding_window": 512, "max_position_embeddings": 8192}


def _plan(tmp_path: Path, cfg: dict[str, Any], *argv: str) -> dict[str, Any]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    args = kv_plan.build_parser().parse_args(["--model-config", str(path), "--block-size", "16",
                                              "--num-blocks", "10", *argv])
    return kv_plan.plan(args)


def _bytes(layers: int, width: int) -> int:
    """K and V of ``layers`` layers, 16 tokens, 2 KV heads of 128 at ``width`` bytes an element."""
    return layers * 2 * 16 * 2 * 128 * width


def test_auto_runs_a_float16_gemma_checkpoint_in_bfloat16(tmp_path: Path) -> None:
    result = _plan(tmp_path, {**_GEMMA2, "torch_dtype": "float16"})
    assert result["dtype"] == "bfloat16" and result["bytes_per_block"] == _bytes(2, 2)


def test_explicit_float16_is_refused_for_a_float16_gemma_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'gemma2' does not support float16"):
        _plan(tmp_path, {**_GEMMA2, "torch_dtype": "float16"}, "--dtype", "float16")


@pytest.mark.parametrize("checkpoint", ["float16", "bfloat16", "float32"])
def test_explicit_float16_is_refused_for_gemma_whatever_the_checkpoint(tmp_path: Path, checkpoint: str) -> None:
    with pytest.raises(ValueError, match="does not support float16"):
        _plan(tmp_path, {**_GEMMA2, "torch_dtype": checkpoint}, "--dtype", "float16")


@pytest.mark.parametrize(("flag", "dtype", "width"), [("bfloat16", "bfloat16", 2), ("float32", "float32", 4)])
def test_other_explicit_dtypes_run_as_given(tmp_path: Path, flag: str, dtype: str, width: int) -> None:
    result = _plan(tmp_path, {**_GEMMA2, "torch_dtype": "float16"}, "--dtype", flag)
    assert result["dtype"] == dtype and result["bytes_per_block"] == _bytes(2, width)


def test_explicit_float16_of_a_llama_float16_checkpoint_stays_float16(tmp_path: Path) -> None:
    llama = {**_GEMMA2, "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float16"}
    llama.pop("sliding_window")
    for argv in ((), ("--dtype", "float16")):
        assert _plan(tmp_path, llama, *argv)["dtype"] == "float16"
