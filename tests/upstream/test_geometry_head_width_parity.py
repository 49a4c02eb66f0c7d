"""The head-width refusals of the model geometry against vLLM 0.33.0 itself (MEM-2.10), which the gates'
raises-cases cannot check against the oracle: where transformers' config classes refuse a config while vLLM reads
it (an odd head width RoPE rotates whole, transformers/modeling_rope_utils.py ``validate_rope``; a null head_dim
where the class types it int), the port refuses it too, naming the same width; where vLLM accepts an odd width
(up to 4, or partly rotated) the port sizes the same head. Skipped where vLLM is not installed."""
from __future__ import annotations

from typing import Any

import pytest

from tests.upstream import pinned  # noqa: F401  (skips this module unless the pinned vLLM is installed)

pytestmark = pytest.mark.upstream

from impl.entrypoints.model_geometry import head_size  # noqa: E402
from upstream import model_geometry  # noqa: E402

_BASE = {"num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 1024,
         "torch_dtype": "bfloat16"}


def _vllm_head(cfg: dict[str, Any]) -> int | str:
    """vLLM's head size, or the text of transformers' refusal (which is not a ValueError)."""
    try:
        return model_geometry.geometry(cfg, 1, 16, "auto")["head_size"]
    except Exception as exc:  # noqa: BLE001
        refused = model_geometry.config_refusal(exc)
        if refused is None:
            raise
        return refused


@pytest.mark.parametrize("cfg", [
    {**_BASE, "model_type": "llama", "head_dim": 125},
    {**_BASE, "model_type": "mistral", "hidden_size": 1000},
    {**_BASE, "model_type": "gemma2", "head_dim": 127, "sliding_window": 512},
])
def test_an_odd_head_rotated_whole_is_refused_by_both(cfg: dict[str, Any]) -> None:
    got = _vllm_head(cfg)
    width = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    assert isinstance(got, str) and f"`head_dim`={width}" in got, got
    with pytest.raises(ValueError, match=rf"\({width}\) is odd"):
        head_size(cfg)


@pytest.mark.parametrize("cfg", [
    {**_BASE, "model_type": "llama", "head_dim": 3},
    {**_BASE, "model_type": "llama", "head_dim": 125, "partial_rotary_factor": 0.5},
    {**_BASE, "model_type": "qwen3_next", "head_dim": 125, "full_attention_interval": 1, "linear_num_key_heads": 2,
     "linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4},
])
def test_an_odd_head_vllm_accepts_is_sized_alike(cfg: dict[str, Any]) -> None:
    assert _vllm_head(cfg) == head_size(cfg) == cfg["head_dim"]


def test_a_null_head_dim_is_refused_where_the_class_types_it_int() -> None:
    gemma = {**_BASE, "model_type": "gemma2", "head_dim": None, "sliding_window": 512}
    got = _vllm_head(gemma)
    assert isinstance(got, str) and "head_dim" in got and "NoneType" in got, got
    with pytest.raises(ValueError, match="head_dim is null"):
        head_size(gemma)
    llama = {**_BASE, "model_type": "llama", "head_dim": None}
    assert _vllm_head(llama) == head_size(llama) == 128
