"""Oracle for the whole-model TP-W2 gate (spec/tensor-parallel.md TP-5.5; issue 30 item 3): a Qwen3-style decoder
run unsharded in float64 with numpy, greedy, recomputing the whole sequence each step.

Written from the model's definition (vLLM 0.33.0 vllm/model_executor/models/qwen3.py: Qwen3Attention, Qwen3DecoderLayer;
qwen2.py's MLP and model loop), not from the port: every weight is used whole, each query head attends with its own
loop over the KV head its group reads, RoPE is written as complex multiplication, RMSNorm as x / sqrt(mean(x²) + eps).
Nothing is rounded until the logits, which are returned as float32 beside the top-2 margins the `tokens` policy reads.
The config's optional `qkv_bias` and `o_proj_bias` (default false) add the attention biases of Qwen2 (q/k/v) and of
Llama's `attention_bias` (q/k/v and o_proj): each projection's bias added to its whole output, q and k before their
RMSNorm (Qwen3Attention applies q_norm/k_norm to q_proj's output, bias included).
decoder_taps (spec/model-taps.md) returns the same forward's named intermediates, float64 throughout; asked for the
ranks' partials at tp ranks, it derives each rank's share of o_proj and down_proj by slicing index arrays, as
oracles/tp_rank_state.py derives a row-parallel layer's ranks: the contraction's units (query heads, ffn units) cut
into tp equal consecutive pieces, a rank's partial the float64 product over its piece (o_proj's bias on rank 0).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from oracles.shard_plan import vllm_shard_plan

Array = np.ndarray

SOLE_ID_MARGIN = float(np.finfo(np.float64).max)
"""The top-2 margin of a one-id vocabulary, which has no runner-up: no near-tie (margins are finite numbers)."""


def _wide(value: Any) -> Array:
    return np.asarray(value, dtype=np.float64)


def _rms_norm(x: Array, weight: Array, eps: float) -> Array:
    """x / sqrt(mean of squares over the last axis + eps) * weight."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _rope(x: Array, positions: Array, theta: float) -> Array:
    """x [tokens, heads, head_dim] with the neox pairs (j, j + head_dim/2) multiplied by e^{i·p·theta^(-2j/head_dim)}."""
    half = x.shape[-1] // 2
    frequencies = theta ** (-np.arange(half, dtype=np.float64) * 2.0 / x.shape[-1])
    turn = np.exp(1j * positions.astype(np.float64)[:, None] * frequencies[None, :])[:, None, :]
    z = (x[..., :half] + 1j * x[..., half:]) * turn
    return np.concatenate((z.real, z.imag), axis=-1)


def _attention(q: Array, k: Array, v: Array, num_kv_heads: int) -> Array:
    """Causal grouped-query attention: query head h reads KV head h // (Hq/Hkv), scale head_dim^-0.5."""
    tokens, num_heads, head_dim = q.shape
    group = num_heads // num_kv_heads
    out = np.empty_like(q)
    allowed = np.tril(np.ones((tokens, tokens), dtype=bool))
    for head in range(num_heads):
        kv = head // group
        scores = np.where(allowed, (q[:, head, :] @ k[:, kv, :].T) / np.sqrt(head_dim), -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out[:, head, :] = (weights / weights.sum(axis=-1, keepdims=True)) @ v[:, kv, :]
    return out


def _silu(x: Array) -> Array:
    return x / (1.0 + np.exp(-x))


Taps = dict[str, Array]


def _fed(taps: Taps, feed: Mapping[str, Array], name: str, stream: Array) -> Array:
    """The stream at a feed point, or the array fed there (spec/model-taps.md MT-2.1); recorded under ``name``."""
    if name in feed:
        stream = feed[name]
    taps[name] = stream
    return stream


def _rank_pieces(units: int, tp: int) -> list[Array]:
    """The indices 0..units-1 cut into tp equal consecutive pieces: the units each rank contracts over."""
    if units % tp:
        raise ValueError(f"{units} units are not divisible by tp={tp}")
    return np.split(np.arange(units), tp)


def _rank_partials(taps: Taps, name: str, x: Array, weight: Array, bias: Array | None, units: Array | None) -> None:
    """``name.rank{r}`` for each rank's piece of ``units`` (columns of x, ``weight``'s input columns); the bias
    added on the first rank alone (spec/model-taps.md MT-1.6). ``units`` None: no partials asked for."""
    if units is None:
        return
    for rank, held in enumerate(units):
        partial = x[:, held] @ weight[:, held].T
        taps[f"{name}.rank{rank}"] = partial + bias if bias is not None and rank == 0 else partial


def _projection(x: Array, w: Mapping[str, Array], name: str, with_bias: bool) -> Array:
    """x @ ``name``.weight^T, plus ``name``.bias where the config gives the projection one."""
    out = x @ w[name + ".weight"].T
    return out + w[name + ".bias"] if with_bias else out


def _decoder(config: Mapping[str, Any], w: Mapping[str, Array], ids: Array, feed: Mapping[str, Array],
             taps: Taps, tp: int | None = None) -> Array:
    """The float64 residual stream [tokens, hidden] entering the final norm; every tap of the way in ``taps``, the
    ranks' partials of o_proj and down_proj at ``tp`` ranks too (None: none)."""
    heads, kv_heads, head_dim = config["num_heads"], config["num_kv_heads"], config["head_dim"]
    eps, theta = float(config["rms_norm_eps"]), float(config["rope_theta"])
    qkv_bias, o_proj_bias = bool(config.get("qkv_bias", False)), bool(config.get("o_proj_bias", False))
    tokens = len(ids)
    positions = np.arange(tokens)
    head_units = None if tp is None else [
        (piece[:, None] * head_dim + np.arange(head_dim)).reshape(-1) for piece in _rank_pieces(heads, tp)]
    ffn_units = None if tp is None else _rank_pieces(config["ffn"], tp)
    hidden = taps["embed"] = w["model.embed_tokens.weight"][ids]
    for layer in range(config["layers"]):
        p, t = f"model.layers.{layer}.", f"layers.{layer}."
        hidden = _fed(taps, feed, t + "attn.in", hidden)
        x = _rms_norm(hidden, w[p + "input_layernorm.weight"], eps)
        q = _projection(x, w, p + "self_attn.q_proj", qkv_bias).reshape(tokens, heads, head_dim)
        k = _projection(x, w, p + "self_attn.k_proj", qkv_bias).reshape(tokens, kv_heads, head_dim)
        v = _projection(x, w, p + "self_attn.v_proj", qkv_bias).reshape(tokens, kv_heads, head_dim)
        q = _rope(_rms_norm(q, w[p + "self_attn.q_norm.weight"], eps), positions, theta)
        k = _rope(_rms_norm(k, w[p + "self_attn.k_norm.weight"], eps), positions, theta)
        taps[t + "attn.k"], taps[t + "attn.v"] = k.reshape(tokens, -1), v.reshape(tokens, -1)
        attended = _attention(q, k, v, kv_heads).reshape(tokens, heads * head_dim)
        _rank_partials(taps, t + "attn.out", attended, w[p + "self_attn.o_proj.weight"],
                       w[p + "self_attn.o_proj.bias"] if o_proj_bias else None, head_units)
        taps[t + "attn.out"] = _projection(attended, w, p + "self_attn.o_proj", o_proj_bias)
        hidden = _fed(taps, feed, t + "mlp.in", hidden + taps[t + "attn.out"])
        x = _rms_norm(hidden, w[p + "post_attention_layernorm.weight"], eps)
        gated = _silu(x @ w[p + "mlp.gate_proj.weight"].T) * (x @ w[p + "mlp.up_proj.weight"].T)
        _rank_partials(taps, t + "mlp.out", gated, w[p + "mlp.down_proj.weight"], None, ffn_units)
        taps[t + "mlp.out"] = gated @ w[p + "mlp.down_proj.weight"].T
        hidden = taps[t + "out"] = hidden + taps[t + "mlp.out"]
    return _fed(taps, feed, "norm.in", hidden)


def _lm_head(config: Mapping[str, Any], w: Mapping[str, Array]) -> Array:
    return w["model.embed_tokens.weight"] if config["tie_word_embeddings"] else w["lm_head.weight"]


def _last_logits(config: Mapping[str, Any], w: Mapping[str, Array], ids: Array) -> Array:
    """The float64 logits [vocab] of the last position of ``ids``."""
    hidden = _decoder(config, w, ids, {}, {})
    last = _rms_norm(hidden[-1], w["model.norm.weight"], float(config["rms_norm_eps"]))
    return _lm_head(config, w) @ last


def decoder_taps(config: Mapping[str, Any], weights: Mapping[str, Any], ids: Any,
                 feed: Mapping[str, Any] | None = None, dtype: str | None = None, tp: int = 1,
                 rank_partials: bool = False) -> Taps:
    """The oracle of decoder-taps (spec/model-taps.md): every tap of one float64 forward over ``ids`` in forward order,
    float64 arrays, logits [tokens, vocab] included; ``feed`` (feed point -> [tokens, hidden]) read as float64 at its
    feed points. ``dtype`` is accepted and ignored: the exact unsharded model is computed in float64 for every port
    dtype; ``tp`` only says how many ranks' partials ``rank_partials`` derives (MT-1.6). Inputs are not checked (the
    port's refusals are judged against the case's `raises`)."""
    del dtype
    w = {name: _wide(value) for name, value in weights.items()}
    fed = {name: _wide(value) for name, value in (feed or {}).items()}
    taps: Taps = {}
    hidden = _decoder(config, w, np.asarray(ids, dtype=np.int64).reshape(-1), fed, taps, tp if rank_partials else None)
    taps["norm.out"] = _rms_norm(hidden, w["model.norm.weight"], float(config["rms_norm_eps"]))
    taps["logits"] = taps["norm.out"] @ _lm_head(config, w).T
    return taps


def greedy_reference(config: Mapping[str, Any], weights: Mapping[str, Any], prompt: Any, steps: int,
                     tp: int = 1, dtype: str | None = None) -> dict[str, Array]:
    """The oracle of tp-model-greedy and model-greedy-on-device: {tokens int64 [steps], logits float32 [steps, vocab],
    top2_margin float64 [steps]} of the exact unsharded model (neither ``tp`` nor the port's ``dtype`` changes the
    answer). Ties go to the lowest id. A geometry vLLM cannot shard over ``tp`` ranks is a ValueError, as the
    shard-plan oracle finds it (TP-4.8: its index arrays cannot be cut into equal pieces)."""
    del dtype
    vllm_shard_plan(config, tp)
    w = {name: _wide(value) for name, value in weights.items()}
    ids = [int(i) for i in np.asarray(prompt).reshape(-1)]
    tokens, logits, margins = [], [], []
    for _ in range(steps):
        step = _last_logits(config, w, np.asarray(ids, dtype=np.int64))
        best = int(np.argmax(step))  # the first maximum: the lowest id on an exact tie
        top2 = np.sort(step)[-2:]
        tokens.append(best)
        logits.append(step)
        margins.append(float(top2[1] - top2[0]) if step.size > 1 else SOLE_ID_MARGIN)
        ids.append(best)
    return {"tokens": np.asarray(tokens, dtype=np.int64), "logits": np.asarray(logits).astype(np.float32),
            "top2_margin": np.asarray(margins, dtype=np.float64)}
