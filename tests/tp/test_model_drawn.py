"""model-greedy-drawn (gates/rows/backend_distributed_tp/w2_model.yaml): its strategy (strategies_model.py) draws what
spec/tensor-parallel.md section 5 asks of it and refuses what TP-4.8 refuses, in the shard plan's words; the float64
oracle's attention biases (oracles/qwen3_reference.py) against HF transformers' Qwen3 with attention_bias, in float64;
the bias known-bads (known_bad/model_bias.py) move a biased model's logits and are the port itself on a model without
biases (model-greedy-sharded's), which therefore cannot tell them."""
from __future__ import annotations

import ast
import inspect
import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from gates.rows.backend_distributed_tp import strategies_model
from gates.rows.backend_distributed_tp.known_bad import model_bias
from gates.rows.backend_distributed_tp.strategies_model import REFUSALS, TPS, refusal, weight_shapes, weights
from impl.distributed.shard_plan import ModelGeometry, shard_plan
from oracles import qwen3_reference as oracle
from oracles.shard_plan import vllm_shard_plan
from upstream import hf_qwen3

DRAWS = 400


def _examples(strategy, count=DRAWS):
    """``count`` derandomized draws of ``strategy``."""
    drawn = []

    @settings(max_examples=count, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example):
        drawn.append(example)

    collect()
    return drawn


@pytest.fixture(scope="module")
def accepted():
    return _examples(strategies_model.accepted_model())


@pytest.fixture(scope="module")
def refused():
    return _examples(strategies_model.refused_model(), 200)


def _plan_refusal(config, tp):
    """The port's shard plan's refusal (what the named cases match), None where it cuts the geometry."""
    geometry = ModelGeometry(**{name: config[name] for name in ("hidden", "num_heads", "num_kv_heads", "head_dim",
                                                                  "ffn", "vocab")})
    try:
        shard_plan(geometry, tp)
    except ValueError as error:
        return str(error)
    return None


def test_the_strategy_imports_neither_the_port_nor_the_oracles():
    tree = ast.parse(inspect.getsource(strategies_model))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {name for name in imported if name.split(".")[0] in ("impl", "oracles", "upstream")}, imported


def test_refusal_restates_the_shard_plan_and_agrees_with_the_index_array_oracle():
    """Every small geometry at tp 1..8: the strategy's rule refuses exactly where the port's plan does, in its words,
    and where the oracle's index arrays cannot be cut."""
    checked = Counter()
    for heads, kv_heads, ffn, vocab, tp in itertools.product(range(1, 13), range(1, 9), (1, 4, 6, 9, 12), (1, 64, 65, 130,
                                                                                                           192, 320), range(1, 9)):
        config = {"hidden": 4, "num_heads": heads, "num_kv_heads": kv_heads, "head_dim": 2, "ffn": ffn, "vocab": vocab,
                  "tie_word_embeddings": False}
        reason = refusal(config, tp)
        assert reason == _plan_refusal(config, tp), (config, tp)
        try:
            vllm_shard_plan(config, tp)
            oracle_refuses = False
        except ValueError:
            oracle_refuses = True
        assert oracle_refuses == (reason is not None), (config, tp, reason)
        checked[reason is None] += 1
    assert checked[True] > 500 and checked[False] > 5000, checked


def test_accepted_draws_cover_section_5(accepted):
    seen = Counter()
    for example in accepted:
        config, tp = example["config"], example["tp"]
        assert refusal(config, tp) is None
        heads, kv_heads, head_dim = config["num_heads"], config["num_kv_heads"], config["head_dim"]
        seen[f"tp {tp}"] += 1
        seen["q_size != hidden"] += heads * head_dim != config["hidden"]
        seen["ffn != hidden"] += config["ffn"] != config["hidden"]
        if tp > 1:
            seen[f"{max(1, kv_heads // tp)} KV heads a rank"] += kv_heads >= tp
            seen["KV heads replicated"] += kv_heads < tp
            seen["MQA"] += kv_heads == 1
        seen["GQA groups > 1"] += heads > kv_heads
        seen["groups of 1"] += heads == kv_heads
        for flag in ("qkv_bias", "o_proj_bias"):
            seen[f"{flag} {config.get(flag)}"] += 1
        seen[f"tied {config['tie_word_embeddings']}"] += 1
        seen[f"vocab % 64 == 0: {config['vocab'] % 64 == 0}"] += 1
        seen[f"{config['layers']} layers"] += 1
    wanted = [*(f"tp {tp}" for tp in TPS), "q_size != hidden", "ffn != hidden",
              *(f"{n} KV heads a rank" for n in (1, 2, 3, 4)), "KV heads replicated", "MQA", "GQA groups > 1",
              "groups of 1", "qkv_bias True", "qkv_bias False", "qkv_bias None", "o_proj_bias True",
              "o_proj_bias False", "o_proj_bias None", "tied True", "tied False", "vocab % 64 == 0: True",
              "vocab % 64 == 0: False", "1 layers", "2 layers"]
    assert not [name for name in wanted if seen[name] < 5], seen


def test_drawn_weights_are_the_configs_float32_tensors_and_the_prompt_fits(accepted):
    for example in accepted[:100]:
        config, drawn = example["config"], example["weights"]
        assert {name: tensor.shape for name, tensor in drawn.items()} == weight_shapes(config)
        assert all(tensor.dtype == np.float32 for tensor in drawn.values())
        biases = [name for name in drawn if name.endswith(".bias")]
        assert bool(biases) == bool(config.get("qkv_bias") or config.get("o_proj_bias"))
        prompt = example["prompt"]
        assert prompt.dtype == np.int64 and 1 <= prompt.size and prompt.min() >= 0 and prompt.max() < config["vocab"]
        assert prompt.size + example["steps"] - 1 <= config["max_position"]


def test_weights_are_seeded_by_name():
    config = {"layers": 2, "hidden": 6, "num_heads": 4, "num_kv_heads": 2, "head_dim": 2, "ffn": 4, "vocab": 10,
              "tie_word_embeddings": False, "qkv_bias": True, "o_proj_bias": True}
    first, again, other = weights(config, 7), weights(config, 7), weights(config, 8)
    assert all(np.array_equal(first[name], again[name]) for name in first)
    assert not any(np.array_equal(first[name], other[name]) for name in first)
    one_layer = weights({**config, "layers": 1}, 7)
    assert all(np.array_equal(one_layer[name], first[name]) for name in one_layer)
    assert abs(float(np.std(np.concatenate([first[n] for n in first if n.endswith(".bias")]))) - 0.5) < 0.15


def test_each_refusal_kind_is_drawn_for_its_own_reason(refused):
    words = {"heads": "is not divisible by tp", "kv-replicated": "does not divide tp",
             "kv-partitioned": "is not divisible by tp", "groups": "(grouped-query attention)",
             "ffn": "is not divisible by tp", "vocab": "the padded vocab"}
    firsts = {"heads": "num_heads=", "kv-replicated": "num_kv_heads=", "kv-partitioned": "num_kv_heads=",
              "groups": "num_heads=", "ffn": "ffn=", "vocab": "the padded vocab"}
    found = Counter()
    for example in refused:
        reason = refusal(example["config"], example["tp"])
        assert reason is not None
        for kind in REFUSALS:
            if reason.startswith(firsts[kind]) and words[kind] in reason:
                found[kind] += 1
    assert all(found[kind] >= 5 for kind in REFUSALS), found


def test_the_oracle_refuses_what_the_plan_refuses_and_decodes_a_one_id_vocabulary():
    config = {"layers": 1, "hidden": 4, "num_heads": 6, "num_kv_heads": 1, "head_dim": 2, "ffn": 4, "vocab": 1,
              "tie_word_embeddings": True, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position": 8}
    drawn = weights(config, 3)
    with pytest.raises(ValueError):
        oracle.greedy_reference(config, drawn, np.array([0]), 1, tp=4)
    decoded = oracle.greedy_reference(config, drawn, np.array([0]), 3, tp=2)
    assert decoded["tokens"].tolist() == [0, 0, 0] and decoded["logits"].shape == (3, 1)
    assert np.all(np.isfinite(decoded["top2_margin"]))


BIASED = {"layers": 2, "hidden": 12, "num_heads": 6, "num_kv_heads": 2, "head_dim": 4, "ffn": 10, "vocab": 70,
          "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position": 16}
IDS = np.array([3, 69, 0, 41, 12, 7], dtype=np.int64)
HF_ATOL = 5e-6
"""HF's Qwen3RMSNorm and rotary embedding compute in float32 inside a float64 model: its logits (of size ~3 here) are
off the float64 oracle by up to 8.9e-7 with no bias and alike with every bias; a misplaced or missing bias moves them
by more than 0.1 (test_zero_biases_change_nothing_and_a_bias_reaches_the_logits)."""


def test_zero_biases_change_nothing_and_a_bias_reaches_the_logits():
    plain = weights(BIASED, 5)
    both = {**BIASED, "qkv_bias": True, "o_proj_bias": True}
    zeroed = {name: np.zeros_like(t) if name.endswith(".bias") else t for name, t in weights(both, 5).items()}
    assert np.array_equal(oracle.decoder_taps(both, zeroed, IDS)["logits"], oracle.decoder_taps(BIASED, plain, IDS)["logits"])
    for flag in ("qkv_bias", "o_proj_bias"):
        biased = {**BIASED, flag: True}
        moved = oracle.decoder_taps(biased, weights(biased, 5), IDS)["logits"] - oracle.decoder_taps(BIASED, plain, IDS)["logits"]
        assert np.abs(moved).max() > 0.1, flag


def _hf_logits(config, drawn, ids):
    """HF transformers' Qwen3ForCausalLM in float64 with attention_bias (q/k/v and o_proj biases, zero where the
    config has none), eager attention, over ``ids`` at positions 0..T-1: the logits [T, vocab]."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    hf_config = Qwen3Config(num_hidden_layers=config["layers"], hidden_size=config["hidden"],
                            num_attention_heads=config["num_heads"], num_key_value_heads=config["num_kv_heads"],
                            head_dim=config["head_dim"], intermediate_size=config["ffn"], vocab_size=config["vocab"],
                            tie_word_embeddings=config["tie_word_embeddings"], rms_norm_eps=config["rms_norm_eps"],
                            rope_parameters={"rope_type": "default", "rope_theta": config["rope_theta"]},
                            max_position_embeddings=config["max_position"], hidden_act="silu", attention_bias=True,
                            use_sliding_window=False)
    model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float64, attn_implementation="eager").eval()
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, parameter in parameters.items():
            given_tensor = drawn.get(name)
            if given_tensor is None:
                assert name.endswith(".bias"), name
                parameter.zero_()
            else:
                parameter.copy_(torch.from_numpy(np.array(given_tensor, dtype=np.float64)))
        unused = set(drawn) - set(parameters)
        assert not unused, unused
        count = len(ids)
        return model(input_ids=torch.from_numpy(ids).reshape(1, count),
                     position_ids=torch.arange(count).reshape(1, count)).logits[0].numpy()


@pytest.mark.skipif(hf_qwen3.unavailable_reason() is not None, reason=hf_qwen3.unavailable_reason() or "")
@pytest.mark.parametrize("flags", [{"qkv_bias": True}, {"o_proj_bias": True}, {"qkv_bias": True, "o_proj_bias": True},
                                   {"qkv_bias": True, "o_proj_bias": True, "tie_word_embeddings": True,
                                    "num_kv_heads": 1}])
def test_the_oracles_biases_match_hf_qwen3_with_attention_bias_in_float64(flags):
    config = {**BIASED, **flags}
    drawn = weights(config, 11)
    expected = _hf_logits(config, drawn, IDS)
    taps = oracle.decoder_taps(config, drawn, IDS)
    np.testing.assert_allclose(taps["logits"], expected, rtol=0, atol=HF_ATOL)
    decoded = oracle.greedy_reference(config, drawn, IDS[:3], 3)
    sequence = np.concatenate([IDS[:3], decoded["tokens"][:-1]])
    reference = _hf_logits(config, drawn, sequence)[2:]
    assert decoded["tokens"].tolist() == reference.argmax(axis=-1).tolist()
    np.testing.assert_allclose(decoded["logits"], reference, rtol=0, atol=HF_ATOL)


BIAS_DEFECTS = [model_bias.o_proj_bias_on_every_rank, model_bias.qkv_bias_of_rank_zero, model_bias.kv_bias_by_rank]
REPLICATED = {**BIASED, "layers": 1, "num_heads": 8, "num_kv_heads": 2, "ffn": 8, "vocab": 64}
"""At tp 4 each KV head sits on 2 ranks: every bias defect shows."""


@pytest.mark.dist
@pytest.mark.parametrize("defect", BIAS_DEFECTS, ids=lambda defect: defect.__name__)
def test_a_bias_known_bad_moves_a_biased_model_and_is_the_port_without_biases(defect):
    from impl.model_executor.models import qwen3

    biased = {**REPLICATED, "qkv_bias": True, "o_proj_bias": True}
    run = {"config": biased, "weights": weights(biased, 2), "prompt": np.array([5, 63, 0]), "steps": 2, "tp": 4}
    moved = defect(**run)["logits"] - qwen3.tp_model_greedy(**run)["logits"]
    assert float(moved.abs().max()) > 1.0  # measured 2.9 to 4.1 nats
    plain = {**run, "config": REPLICATED, "weights": weights(REPLICATED, 2)}
    wrong, right = defect(**plain), qwen3.tp_model_greedy(**plain)
    assert all(np.array_equal(wrong[key].numpy(), right[key].numpy()) for key in ("tokens", "logits"))
