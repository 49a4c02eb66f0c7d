"""The C++ port's tp-model-greedy (issue 30 items 3 and 5): a synthetic Qwen3-style decoder on rank threads, against
an unsharded numpy forward written here (float64): logits close at every step and the same greedy tokens, at tp 1,
2, 4 and 8, tied and untied; a geometry with q/k/v and o_proj biases, q_size and ffn unlike hidden, at tp 1, 2, 3 and
6; and the refusals of bad input, the shard plan's among them."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.drivers.test_cpp_driver_tp_layers import _raised, _values
from tests.drivers.wire_v2 import Raw, Worker, tag

pytestmark = pytest.mark.cpu

# Issue 30's geometry: Hq 8 and Hkv 2, so tp 8 holds one query head a rank and each KV head 4 times; vocab 130 pads
# to 192, so at tp 8 the last two ranks hold padding only.
CONFIG = {"layers": 2, "hidden": 64, "num_heads": 8, "num_kv_heads": 2, "head_dim": 8, "ffn": 64, "vocab": 130,
          "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position": 64}


# q_size 48 and ffn 72 unlike hidden 40; Hq 12 and Hkv 6 (groups of 2) run at tp 2, 3 and 6 with 3, 2 and 1 KV heads a
# rank; with Hkv 3 (groups of 4), tp 6 holds each KV head on two ranks. Vocab 130 pads to 192: 32 ids a rank at tp 6,
# the last rank's 30 of them padding.
BIASED = {"layers": 2, "hidden": 40, "num_heads": 12, "num_kv_heads": 6, "head_dim": 4, "ffn": 72, "vocab": 130,
          "tie_word_embeddings": True, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position": 32,
          "qkv_bias": True, "o_proj_bias": True}


def _weights(config: dict[str, Any], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, q, kv, d, f = (config["hidden"], config["num_heads"] * config["head_dim"], config["num_kv_heads"] * config["head_dim"],
                      config["head_dim"], config["ffn"])

    def randn(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights = {"model.embed_tokens.weight": randn(config["vocab"], h, scale=1.0), "model.norm.weight": 1 + randn(h)}
    if not config["tie_word_embeddings"]:
        weights["lm_head.weight"] = randn(config["vocab"], h, scale=1.0)
    for i in range(config["layers"]):
        p = f"model.layers.{i}."
        weights |= {p + "input_layernorm.weight": 1 + randn(h), p + "post_attention_layernorm.weight": 1 + randn(h),
                    p + "self_attn.q_proj.weight": randn(q, h), p + "self_attn.k_proj.weight": randn(kv, h),
                    p + "self_attn.v_proj.weight": randn(kv, h), p + "self_attn.o_proj.weight": randn(h, q),
                    p + "self_attn.q_norm.weight": 1 + randn(d), p + "self_attn.k_norm.weight": 1 + randn(d),
                    p + "mlp.gate_proj.weight": randn(f, h), p + "mlp.up_proj.weight": randn(f, h),
                    p + "mlp.down_proj.weight": randn(h, f)}
        if config.get("qkv_bias"):
            weights |= {p + "self_attn.q_proj.bias": randn(q, scale=1.0), p + "self_attn.k_proj.bias": randn(kv, scale=1.0),
                        p + "self_attn.v_proj.bias": randn(kv, scale=1.0)}
        if config.get("o_proj_bias"):
            weights[p + "self_attn.o_proj.bias"] = randn(h, scale=1.0)
    return weights


def _rms(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _rope(x: np.ndarray, theta: float) -> np.ndarray:
    """x [tokens, heads, d] rotated, neox pairing, token t at position t."""
    d = x.shape[-1]
    angles = np.arange(x.shape[0])[:, None] * theta ** (-np.arange(0, d, 2) / d)[None, :]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def _reference_logits(config: dict[str, Any], w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """The last position's logits of the unsharded decoder, float64."""
    w = {name: value.astype(np.float64) for name, value in w.items()}
    eps, heads, kv_heads, d = config["rms_norm_eps"], config["num_heads"], config["num_kv_heads"], config["head_dim"]
    x = w["model.embed_tokens.weight"][ids]
    n = len(ids)

    def project(p: str, name: str, x: np.ndarray) -> np.ndarray:
        bias = w.get(f"{p}self_attn.{name}.bias")
        y = x @ w[f"{p}self_attn.{name}.weight"].T
        return y if bias is None else y + bias

    for i in range(config["layers"]):
        p = f"model.layers.{i}."
        h = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = _rope(_rms(project(p, "q_proj", h).reshape(n, heads, d), w[p + "self_attn.q_norm.weight"], eps),
                  config["rope_theta"])
        k = _rope(_rms(project(p, "k_proj", h).reshape(n, kv_heads, d), w[p + "self_attn.k_norm.weight"], eps),
                  config["rope_theta"])
        v = project(p, "v_proj", h).reshape(n, kv_heads, d)
        group = heads // kv_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("ihd,jhd->hij", q, k) / np.sqrt(d)
        scores = np.where(np.tril(np.ones((n, n), dtype=bool))[None], scores, -np.inf)
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        x = x + project(p, "o_proj", np.einsum("hij,jhd->ihd", probs, v).reshape(n, heads * d))
        h = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if config["tie_word_embeddings"] else w["lm_head.weight"]
    return _rms(x, w["model.norm.weight"], eps)[-1] @ head.T


def _input(config: dict[str, Any], weights: dict[str, Any], prompt: np.ndarray, steps: int, tp: int,
           buffers: list[bytes]) -> dict[str, Any]:
    wire_weights = {"$map": [[name, tag(value if isinstance(value, Raw) else Raw.of(value), buffers)]
                             for name, value in weights.items()]}
    return {"$map": [["config", {"$map": [[k, v] for k, v in config.items()]}], ["weights", wire_weights],
                     ["prompt", tag(Raw.of(prompt), buffers)], ["steps", steps], ["tp", tp]]}


def _decode(worker: Worker, config: dict[str, Any], weights: dict[str, Any], prompt: np.ndarray, steps: int,
            tp: int) -> dict[str, Raw]:
    buffers: list[bytes] = []
    return worker.value("tp-model-greedy", _input(config, weights, prompt, steps, tp, buffers), buffers)


def _check_decode(worker: Worker, config: dict[str, Any], weights: dict[str, np.ndarray], prompt: np.ndarray,
                  steps: int, tp: int) -> None:
    """The decode's logits close to the unsharded forward's at every step, its tokens the forward's (a near-tie
    excused)."""
    got = _decode(worker, config, weights, prompt, steps, tp)
    assert got["tokens"].dtype == "int64" and got["tokens"].shape == (steps,)
    assert got["logits"].dtype == "float32" and got["logits"].shape == (steps, config["vocab"])
    tokens, logits = got["tokens"].array().tolist(), _values(got["logits"])
    sequence = prompt.tolist()
    for step in range(steps):
        expected = _reference_logits(config, weights, sequence)
        np.testing.assert_allclose(logits[step], expected, rtol=1e-4, atol=1e-4, err_msg=f"step {step}")
        second, first = np.argsort(expected)[-2:]
        # the top-2 margin guard: within float32 noise of a tie either of the two is a right answer
        right = {int(first), int(second)} if expected[first] - expected[second] < 1e-3 else {int(first)}
        assert tokens[step] in right, f"step {step}: token {tokens[step]}, expected one of {right}"
        sequence.append(tokens[step])


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_greedy_decode_matches_the_unsharded_forward_at_every_step(v2_ready: Worker, tp: int, tied: bool) -> None:
    config = CONFIG | {"tie_word_embeddings": tied}
    _check_decode(v2_ready, config, _weights(config, seed=30 + tied), np.array([3, 129, 64, 17, 100], dtype=np.int64),
                  8, tp)


@pytest.mark.parametrize(("kv_heads", "tp"), [(6, 1), (6, 2), (6, 3), (6, 6), (3, 3), (3, 6)])
def test_biases_and_every_tp_the_plan_accepts_match_the_unsharded_forward(v2_ready: Worker, kv_heads: int,
                                                                          tp: int) -> None:
    config = BIASED | {"num_kv_heads": kv_heads}
    _check_decode(v2_ready, config, _weights(config, seed=37), np.array([5, 129, 96, 0, 33], dtype=np.int64), 6, tp)


@pytest.mark.parametrize("biases", [("q_proj", "k_proj", "v_proj"), ("o_proj",)])
@pytest.mark.parametrize("times", [0, 3])
def test_the_biases_are_large_enough_to_be_seen(biases: tuple[str, ...], times: int) -> None:
    """The comparison above sees a bias left out, or added by each of 3 ranks: either moves the reference's logits
    by far more than its tolerance."""
    weights = _weights(BIASED, seed=37)
    changed = {name: value * times if name.endswith(tuple(f"{bias}.bias" for bias in biases)) else value
               for name, value in weights.items()}
    ids = [5, 129, 96, 0, 33]
    assert np.abs(_reference_logits(BIASED, changed, ids) - _reference_logits(BIASED, weights, ids)).max() > 0.1


def _bad(worker: Worker, message: str, *, config: dict[str, Any] | None = None, weights: dict[str, Any] | None = None,
         prompt: np.ndarray | None = None, steps: int = 2, tp: int = 2) -> None:
    config = config or CONFIG
    buffers: list[bytes] = []
    wire = _input(config, _weights(CONFIG, 1) if weights is None else weights,
                  np.array([1, 2], dtype=np.int64) if prompt is None else prompt, steps, tp, buffers)
    reply = worker.call("tp-model-greedy", wire, buffers)
    raised = reply.body.get("result", {}).get("raised")
    assert raised and raised["type"] == "invalid-argument" and message in raised["message"], reply.body


def test_bad_model_input_is_invalid_argument_naming_it(v2_ready: Worker) -> None:
    weights = _weights(CONFIG, 1)
    _bad(v2_ready, "num_heads=8 is not divisible by tp=3", tp=3)
    _bad(v2_ready, "prompt[1] = 130 is outside [0, vocab=130)", prompt=np.array([1, 130], dtype=np.int64))
    _bad(v2_ready, "feed positions up to 64, beyond config.max_position=64", steps=64)
    _bad(v2_ready, "weights is missing 'model.norm.weight' (shape [64])",
         weights={k: v for k, v in weights.items() if k != "model.norm.weight"})
    _bad(v2_ready, "weights has an unknown tensor 'lm_head.weight' (tie_word_embeddings is true",
         config=CONFIG | {"tie_word_embeddings": True})
    _bad(v2_ready, "weights['model.layers.1.mlp.down_proj.weight'] has shape [64, 63], expected [64, 64]",
         weights=weights | {"model.layers.1.mlp.down_proj.weight": np.zeros((64, 63), dtype=np.float32)})
    _bad(v2_ready, "config.head_dim=7 must be even", config=CONFIG | {"head_dim": 7})
    _bad(v2_ready, "config has an unknown field 'rope_scaling'", config=CONFIG | {"rope_scaling": None})
    _bad(v2_ready, "tp must be an int >= 1, got 0", tp=0)
    _bad(v2_ready, "tp=16 is more than the 8 ranks a world here may have", tp=16)
    _bad(v2_ready, "config.rope_theta must be > 1, got 1.0", config=CONFIG | {"rope_theta": 1.0})


def test_bad_biases_are_invalid_argument_naming_them(v2_ready: Worker) -> None:
    weights = _weights(BIASED, 1)
    _bad(v2_ready, "config.qkv_bias must be a bool, got 1 (int)", config=BIASED | {"qkv_bias": 1}, weights=weights)
    _bad(v2_ready, "config has an unknown field 'attention_bias'; fields: layers, hidden, num_heads, num_kv_heads, "
         "head_dim, ffn, vocab, max_position, tie_word_embeddings, rms_norm_eps, rope_theta, qkv_bias, o_proj_bias",
         config=BIASED | {"attention_bias": True}, weights=weights)
    _bad(v2_ready, "weights has an unknown tensor 'model.layers.0.self_attn.o_proj.bias'",
         config=BIASED | {"o_proj_bias": False}, weights=weights)
    _bad(v2_ready, "weights has an unknown tensor 'model.layers.0.self_attn.q_proj.bias'",
         config={k: v for k, v in BIASED.items() if k != "qkv_bias"}, weights=weights)
    _bad(v2_ready, "weights is missing 'model.layers.1.self_attn.v_proj.bias' (shape [24])", config=BIASED,
         weights={k: v for k, v in weights.items() if k != "model.layers.1.self_attn.v_proj.bias"})
    _bad(v2_ready, "weights['model.layers.0.self_attn.k_proj.bias'] has shape [4], expected [24]", config=BIASED,
         weights=weights | {"model.layers.0.self_attn.k_proj.bias": np.zeros(4, dtype=np.float32)})
    _bad(v2_ready, "weights['model.layers.0.self_attn.o_proj.bias'] has dtype float64; accepted: float32", config=BIASED,
         weights=weights | {"model.layers.0.self_attn.o_proj.bias": np.zeros(40)})


@pytest.mark.parametrize(("geometry", "tp", "message"), [
    ({}, 5, "num_heads=12 is not divisible by tp=5"),
    ({}, 4, "num_kv_heads=6 is not divisible by tp=4"),
    ({"num_kv_heads": 3}, 4, "num_kv_heads=3 does not divide tp=4 (tp >= num_kv_heads replicates each KV head"),
    ({"num_heads": 8, "num_kv_heads": 8, "hidden": 32, "ffn": 36}, 8, "ffn=36 is not divisible by tp=8"),
    ({"num_heads": 5, "num_kv_heads": 5, "hidden": 20, "ffn": 10}, 5,
     "the padded vocab 192 (vocab=130 padded to a multiple of 64) is not divisible by tp=5"),
])
def test_a_geometry_the_plan_refuses_is_refused_with_its_message(v2_ready: Worker, geometry: dict[str, int], tp: int,
                                                                 message: str) -> None:
    config = BIASED | geometry
    _bad(v2_ready, message, config=config, weights=_weights(config, 1), tp=tp)
