"""tp-model-greedy with attention biases and tp 3 and 6 (spec/tensor-parallel.md TP-4.2, TP-4.3, TP-4.8, TP-5.5):
q/k/v biases shard with their rows and o_proj's is added once (rank 0, before the all-reduce), so every tp the shard
plan accepts decodes alike; a bias without its flag, or a geometry the plan refuses, is refused before any rank
starts."""
from __future__ import annotations

import re

import pytest
import torch

from impl.model_executor.models import qwen3, qwen3_taps

pytestmark = [pytest.mark.cpu, pytest.mark.dist]

CONFIG = {"layers": 1, "hidden": 8, "num_heads": 6, "num_kv_heads": 1, "head_dim": 2, "ffn": 12, "vocab": 150,
          "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position": 16,
          "qkv_bias": True, "o_proj_bias": True}
"""MQA, q_size 12 != hidden 8, ffn 12: the plan accepts tp 1, 2, 3 and 6 (vocab 150 pads to 192)."""

PROMPT = torch.tensor([1, 149, 64, 100], dtype=torch.int64)


def _weights(config: dict, scale_biases: float = 1.0) -> dict[str, torch.Tensor]:
    shapes = qwen3.ModelConfig.from_mapping(config).weight_shapes()
    generator = torch.Generator().manual_seed(37)
    weights = {name: torch.randn(shape, generator=generator) for name, shape in shapes.items()}
    return {name: tensor * scale_biases if name.endswith(".bias") else tensor for name, tensor in weights.items()}


def _no_rank(rank: int, tp: int, run: object) -> None:
    raise AssertionError("a rank started")


def test_every_tp_the_plan_accepts_decodes_alike_with_biases():
    weights = _weights(CONFIG)
    reference = qwen3.tp_model_greedy(CONFIG, weights, PROMPT, 4, 1)
    for tp in (2, 3, 6):
        sharded = qwen3.tp_model_greedy(CONFIG, weights, PROMPT, 4, tp)
        assert torch.equal(sharded["tokens"], reference["tokens"]), tp
        torch.testing.assert_close(sharded["logits"], reference["logits"], rtol=1e-5, atol=1e-5)


def test_zero_biases_decode_as_no_biases_and_the_biases_move_the_logits():
    unbiased = {**CONFIG, "qkv_bias": False, "o_proj_bias": False}
    weights = _weights(CONFIG, scale_biases=0.0)
    plain = {name: tensor for name, tensor in weights.items() if not name.endswith(".bias")}
    without = qwen3.tp_model_greedy(unbiased, plain, PROMPT, 2, 2)
    zero = qwen3.tp_model_greedy(CONFIG, weights, PROMPT, 2, 2)
    torch.testing.assert_close(zero["logits"], without["logits"])
    biased = qwen3.tp_model_greedy(CONFIG, _weights(CONFIG), PROMPT, 2, 2)
    assert not torch.allclose(biased["logits"], without["logits"], atol=1e-2)


@pytest.mark.parametrize("tp", [2, 3])
def test_o_proj_bias_is_added_once_over_the_ranks(tp: int):
    """Layer 0's attention output (the tap attn.out, after o_proj's all-reduce) moves by exactly the o_proj bias."""
    config = {**CONFIG, "qkv_bias": False}
    weights = _weights(config)
    zeroed = {**weights, "model.layers.0.self_attn.o_proj.bias": torch.zeros(8)}
    with_bias = qwen3_taps.decoder_taps(config, weights, PROMPT, tp)["layers.0.attn.out"]
    without = qwen3_taps.decoder_taps(config, zeroed, PROMPT, tp)["layers.0.attn.out"]
    bias = weights["model.layers.0.self_attn.o_proj.bias"]
    torch.testing.assert_close(with_bias - without, bias.expand_as(without), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("change", "error", "message"), [
    ({"qkv_bias": False}, ValueError, "weights has an unknown tensor 'model.layers.0.self_attn.q_proj.bias'"),
    ({"o_proj_bias": False}, ValueError, "weights has an unknown tensor 'model.layers.0.self_attn.o_proj.bias'"),
    ({"qkv_bias": 1}, TypeError, "config.qkv_bias must be a bool, got 1 (int)"),
    ({"o_proj_bias": None}, TypeError, "config.o_proj_bias must be a bool, got None (NoneType)"),
])
def test_a_bias_needs_its_flag(change: dict, error: type, message: str):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        qwen3.run_greedy({**CONFIG, **change}, _weights(CONFIG), PROMPT, 1, 2, _no_rank)


def test_a_flag_needs_its_bias_of_its_shape():
    weights = _weights(CONFIG)
    missing = {name: tensor for name, tensor in weights.items() if name != "model.layers.0.self_attn.k_proj.bias"}
    with pytest.raises(ValueError, match=r"^weights is missing 'model\.layers\.0\.self_attn\.k_proj\.bias' \(shape \[2\]\)$"):
        qwen3.run_greedy(CONFIG, missing, PROMPT, 1, 1, _no_rank)
    wrong = {**weights, "model.layers.0.self_attn.q_proj.bias": torch.zeros(8)}
    with pytest.raises(ValueError, match=r"^weights\['model\.layers\.0\.self_attn\.q_proj\.bias'\] has shape \[8\], "
                                         r"expected \[12\]$"):
        qwen3.run_greedy(CONFIG, wrong, PROMPT, 1, 1, _no_rank)


@pytest.mark.parametrize(("change", "tp", "message"), [
    ({}, 4, r"num_heads=6 is not divisible by tp=4"),
    ({"num_heads": 12, "num_kv_heads": 3}, 4, r"num_kv_heads=3 does not divide tp=4 \(tp >= num_kv_heads"),
    ({"num_heads": 12, "num_kv_heads": 3}, 2, r"num_kv_heads=3 is not divisible by tp=2"),
    ({"ffn": 10}, 3, r"ffn=10 is not divisible by tp=3"),
    ({"num_heads": 5, "ffn": 10, "vocab": 130}, 5, r"the padded vocab 192 \(vocab=130 padded to a multiple of 64\) is not "
                                        r"divisible by tp=5"),
])
def test_a_geometry_the_plan_refuses_is_refused_before_any_rank_starts(change: dict, tp: int, message: str):
    config = {**CONFIG, **change}
    with pytest.raises(ValueError, match=f"^{message}"):
        qwen3.run_greedy(config, _weights(config), PROMPT[:1], 1, tp, _no_rank)
