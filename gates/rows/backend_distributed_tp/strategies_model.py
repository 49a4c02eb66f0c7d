"""Judge-side strategy of model-greedy-drawn (w2_model.yaml; spec/tensor-parallel.md TP-4.8, TP-5.5): whole Qwen3-style
decoders of drawn geometries, decoded greedily at a drawn tp, and geometries vLLM refuses to shard at theirs.

An accepted draw is built for its tp from vLLM's rules (TP-4.8), which ``refusal`` restates here without the port's
shard plan: query heads in equal shares; KV heads either partitioned (1 to 4 a rank) or each replicated on tp/Hkv
ranks (MQA and GQA groups > 1 among them); q_size, ffn and hidden drawn apart; a vocabulary padded to a multiple of
64 that tp divides, itself a multiple of 64 or not; tied or untied; q/k/v and o_proj biases each drawn. A refused
draw is any small geometry whose tp ``refusal`` rejects (the oracle, which reads the shard-plan oracle's index arrays,
raises there too). Weights are drawn judge-side with make_checkpoint's scales (MODEL-TAPS: projections N(0, 1/fan_in),
the residual branches' at BRANCH_GAIN times that, norms near 1, vocabulary matrices at std 0.5), seeded by name, so
the Python and the C++ port receive the same tensors. One or two layers, short prompts, few steps: each example is a
call on a gloo world.
"""
from __future__ import annotations

import math
import zlib
from typing import Any, Mapping

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from gates.rows.backend_distributed_tp.strategies_w2 import _range_ends
from gates.rows.model_taps.make_checkpoint import draw as checkpoint_tensor

TPS = (1, 2, 3, 4, 6, 8)
"""The tp values drawn for accepted geometries (issue 37: every tp vLLM accepts, 3 and 6 included)."""
VOCAB_PADDING = 64  # vLLM's DEFAULT_VOCAB_PADDING_SIZE
BIAS_SCALE = 0.5
"""Std of the drawn biases: of the order of the outputs they are added to (q, k, v of std ~1, the residual stream)."""

Example = dict[str, Any]


def refusal(config: Mapping[str, Any], tp: int) -> str | None:
    """Why vLLM refuses to shard ``config``'s geometry over ``tp`` ranks (TP-4.8), in tp-shard-plan's words and
    order; None where it accepts. vLLM: ``divide(num_heads, tp)``; QKVParallelLinear replicates each KV head
    tp/Hkv times where tp >= Hkv (which must divide tp) and partitions them otherwise (tp must divide Hkv);
    Attention asserts Hq % Hkv == 0; MergedColumnParallelLinear divides ffn; the padded vocabulary is divided."""
    heads, kv_heads, ffn, vocab = config["num_heads"], config["num_kv_heads"], config["ffn"], config["vocab"]
    if heads % tp:
        return f"num_heads={heads} is not divisible by tp={tp}"
    if tp >= kv_heads and tp % kv_heads:
        return (f"num_kv_heads={kv_heads} does not divide tp={tp} (tp >= num_kv_heads replicates each KV head "
                f"tp/num_kv_heads times)")
    if tp < kv_heads and kv_heads % tp:
        return f"num_kv_heads={kv_heads} is not divisible by tp={tp}"
    if heads % kv_heads:
        return f"num_heads={heads} is not divisible by num_kv_heads={kv_heads} (grouped-query attention)"
    if ffn % tp:
        return f"ffn={ffn} is not divisible by tp={tp}"
    padded = -(-vocab // VOCAB_PADDING) * VOCAB_PADDING
    if padded % tp:
        return f"the padded vocab {padded} (vocab={vocab} padded to a multiple of {VOCAB_PADDING}) is not divisible by tp={tp}"
    return None


def weight_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every HF tensor tp-model-greedy takes for ``config`` (operations.yaml), in checkpoint order: the biases where
    ``qkv_bias`` / ``o_proj_bias`` ask for them, lm_head.weight only when untied."""
    hidden, head_dim = config["hidden"], config["head_dim"]
    q, kv = config["num_heads"] * head_dim, config["num_kv_heads"] * head_dim
    qkv_bias, o_proj_bias = config.get("qkv_bias", False), config.get("o_proj_bias", False)
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (config["vocab"], hidden)}
    for layer in range(config["layers"]):
        p = f"model.layers.{layer}."
        shapes[p + "input_layernorm.weight"] = (hidden,)
        for name, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
            shapes[f"{p}self_attn.{name}.weight"] = (rows, hidden)
            if qkv_bias:
                shapes[f"{p}self_attn.{name}.bias"] = (rows,)
        shapes[p + "self_attn.o_proj.weight"] = (hidden, q)
        if o_proj_bias:
            shapes[p + "self_attn.o_proj.bias"] = (hidden,)
        shapes.update({p + "self_attn.q_norm.weight": (head_dim,), p + "self_attn.k_norm.weight": (head_dim,),
                       p + "post_attention_layernorm.weight": (hidden,), p + "mlp.gate_proj.weight": (config["ffn"], hidden),
                       p + "mlp.up_proj.weight": (config["ffn"], hidden), p + "mlp.down_proj.weight": (hidden, config["ffn"])})
    shapes["model.norm.weight"] = (hidden,)
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (config["vocab"], hidden)
    return shapes


def weights(config: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
    """The float32 checkpoint of ``config`` drawn from ``seed``: each weight as make_checkpoint draws it, each bias
    N(0, BIAS_SCALE²) from PCG64(seed, crc32 of its name)."""
    tensors = {}
    for name, shape in weight_shapes(config).items():
        if name.endswith(".bias"):
            normal = np.random.Generator(np.random.PCG64([seed, zlib.crc32(name.encode())])).standard_normal(shape)
            tensors[name] = (BIAS_SCALE * normal).astype(np.float32)
        else:
            tensors[name] = checkpoint_tensor(seed, name, shape)
    return tensors


def _kv_layout(draw: Any, tp: int) -> tuple[int, int]:
    """(Hq, Hkv) vLLM accepts at ``tp``: KV heads partitioned, 1 to 4 a rank, or (tp > 1) each replicated on tp/Hkv
    ranks, Hkv a proper divisor of tp (1: MQA); Hq a multiple of both tp and Hkv."""
    replicated = [d for d in range(1, tp) if tp % d == 0]
    if replicated and draw(st.booleans()):
        return tp * draw(st.integers(1, 3)), draw(st.sampled_from(replicated))
    kv_heads = tp * draw(st.integers(1, 4))
    return kv_heads * draw(st.integers(1, 3 if kv_heads <= 8 else 2)), kv_heads


def _vocab(draw: Any, tp: int) -> int:
    """A vocabulary whose padding to 64 tp divides: a multiple of 64, or 1 to 63 short of one."""
    blocks = draw(st.sampled_from([b for b in (1, 2, 3) if b * VOCAB_PADDING % tp == 0]))
    short = draw(st.sampled_from([0, 1, 63]) | st.integers(1, VOCAB_PADDING - 1))
    return blocks * VOCAB_PADDING - short


def _flags(draw: Any) -> dict[str, bool]:
    """qkv_bias and o_proj_bias each drawn; a false one sometimes left out (both are optional, default false)."""
    flags = {}
    for name in ("qkv_bias", "o_proj_bias"):
        value = draw(st.booleans())
        if value or draw(st.booleans()):
            flags[name] = value
    return flags


def _run(draw: Any, config: dict[str, Any], tp: int, vocab: int) -> Example:
    """The example: ``config`` completed with a prompt, the step count and max_position, and its drawn weights."""
    prompt = draw(st.lists(st.sampled_from(_range_ends(vocab, tp)) | st.integers(0, vocab - 1), min_size=1, max_size=5))
    steps = draw(st.integers(1, 4))
    config["max_position"] = len(prompt) + steps - 1 + draw(st.sampled_from([0, 1, 16]))
    return {"config": config, "weights": weights(config, draw(st.integers(0, 2**32 - 1))),
            "prompt": np.array(prompt, dtype=np.int64), "steps": steps, "tp": tp}


def _config(draw: Any, layers: int, heads: int, kv_heads: int, ffn: int, vocab: int) -> dict[str, Any]:
    return {"layers": layers, "hidden": draw(st.integers(4, 48)), "num_heads": heads, "num_kv_heads": kv_heads,
            "head_dim": draw(st.sampled_from([2, 4, 6, 8])), "ffn": ffn, "vocab": vocab,
            "tie_word_embeddings": draw(st.booleans()), "rms_norm_eps": draw(st.sampled_from([1e-6, 1e-5])),
            "rope_theta": draw(st.sampled_from([10000.0, 1000000.0])), **_flags(draw)}


@st.composite
def accepted_model(draw: Any) -> Example:
    """A geometry vLLM shards at the drawn tp, with its weights, a prompt and a step count."""
    tp = draw(st.sampled_from(TPS))
    heads, kv_heads = _kv_layout(draw, tp)
    vocab = _vocab(draw, tp)
    config = _config(draw, draw(st.integers(1, 2)), heads, kv_heads, tp * draw(st.integers(1, 8)), vocab)
    reason = refusal(config, tp)
    if reason is not None:
        raise AssertionError(f"strategies_model drew a geometry vLLM refuses at tp={tp}: {reason}")
    return _run(draw, config, tp, vocab)


def _refused_heads(draw: Any, tp: int) -> tuple[int, int, int, int]:
    """Hq not a multiple of tp (one KV head: MQA)."""
    return tp * draw(st.integers(0, 2)) + draw(st.integers(1, tp - 1)), 1, tp, VOCAB_PADDING * tp


def _refused_kv_replicated(draw: Any, tp: int) -> tuple[int, int, int, int]:
    """tp >= Hkv and Hkv not dividing tp (tp 2 has no such Hkv: the draw is discarded)."""
    kv_heads = draw(st.sampled_from([d for d in range(2, tp + 1) if tp % d] or [0]))
    assume(kv_heads)
    return math.lcm(tp, kv_heads), kv_heads, tp, VOCAB_PADDING * tp


def _refused_kv_partitioned(draw: Any, tp: int) -> tuple[int, int, int, int]:
    """tp < Hkv and tp not dividing Hkv."""
    kv_heads = draw(st.sampled_from([k for k in range(tp + 1, tp + 5) if k % tp]))
    return math.lcm(tp, kv_heads), kv_heads, tp, VOCAB_PADDING * tp


def _refused_groups(draw: Any, tp: int) -> tuple[int, int, int, int]:
    """Hq and Hkv each sharded alike, Hq not a multiple of Hkv (grouped-query attention)."""
    kv_heads = tp * draw(st.integers(2, 3))
    heads = tp * draw(st.integers(1, 5).filter(lambda m: (tp * m) % kv_heads))
    return heads, kv_heads, tp, VOCAB_PADDING * tp


def _refused_ffn(draw: Any, tp: int) -> tuple[int, int, int, int]:
    """ffn not a multiple of tp."""
    heads, kv_heads = _kv_layout(draw, tp)
    return heads, kv_heads, tp * draw(st.integers(0, 2)) + draw(st.integers(1, tp - 1)), VOCAB_PADDING * tp


def _refused_vocab(draw: Any, tp: int) -> tuple[int, int, int, int]:
    """The vocabulary padded to a multiple of 64 not a multiple of tp (tp 3, 5, 6, 7; vocab 1 to 192)."""
    heads, kv_heads = _kv_layout(draw, tp)
    blocks = draw(st.sampled_from([b for b in (1, 2, 3) if b * VOCAB_PADDING % tp]))
    return heads, kv_heads, tp, blocks * VOCAB_PADDING - draw(st.integers(0, VOCAB_PADDING - 1))


REFUSALS = {"heads": (_refused_heads, (2, 3, 4, 6, 8)), "kv-replicated": (_refused_kv_replicated, (3, 4, 5, 6, 8)),
            "kv-partitioned": (_refused_kv_partitioned, (2, 3, 4, 6, 8)),
            "groups": (_refused_groups, (1, 2, 3, 4)), "ffn": (_refused_ffn, (2, 3, 4, 6, 8)),
            "vocab": (_refused_vocab, (3, 5, 6, 7))}
"""Each refusal of TP-4.8 -> (a drawer of (Hq, Hkv, ffn, vocab) refused for it alone, the tp values it is drawn at)."""


@st.composite
def refused_model(draw: Any) -> Example:
    """A geometry vLLM refuses at the drawn tp for one drawn reason of TP-4.8 (every earlier rule passing), valid
    otherwise: tp-model-greedy must refuse it before any rank starts."""
    drawer, tps = REFUSALS[draw(st.sampled_from(sorted(REFUSALS)))]
    tp = draw(st.sampled_from(tps))
    heads, kv_heads, ffn, vocab = drawer(draw, tp)
    config = _config(draw, 1, heads, kv_heads, ffn, vocab)
    if refusal(config, tp) is None:
        raise AssertionError(f"strategies_model drew a geometry vLLM accepts at tp={tp} as a refusal: {config}")
    return _run(draw, config, tp, vocab)


REFUSED_SHARE = 10
"""One draw in about REFUSED_SHARE is a refused geometry (hypothesis leans toward the range's ends, so somewhat more)."""


def drawn_models() -> st.SearchStrategy[Example]:
    """The properties of model-greedy-drawn: accepted geometries, and about one draw in REFUSED_SHARE a refused one."""
    return st.integers(1, REFUSED_SHARE).flatmap(lambda pick: refused_model() if pick == REFUSED_SHARE else accepted_model())
