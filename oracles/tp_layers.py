"""Oracle for the TP-W2 layer gates (spec/tensor-parallel.md TP-5.1 to TP-5.4; issue 30 item 3): every layer run
unsharded, in float64 numpy over the whole weight, then what each rank must hold read off the full result.

A different derivation from the port's: no shard plan and no collectives. The column layer's rank r gets the r-th of
tp equal column blocks of the full product; the row layer, the MLP, the embedding and the LM head give every rank the
full result; for q/k/v a rank's query heads are the r-th block of the heads and its KV heads are those its query
heads read under grouped-query attention (query head h reads KV head h // (Hq/Hkv)), never the replica formula.
Every result is rounded to the input's dtype once, at the end.
"""
from __future__ import annotations

from typing import Any

import numpy as np

PADDING = 64
"""Only for refusing a padded vocabulary tp does not divide, as the layers do (TP-4.8)."""


def _wide(array: Any) -> np.ndarray:
    return np.asarray(array).astype(np.float64)


def _linear(x: Any, weight: Any, bias: Any) -> np.ndarray:
    """x · weightᵀ (+ bias) in float64."""
    out = _wide(x) @ _wide(weight).T
    return out if bias is None else out + _wide(bias)


def _same_for_every_rank(result: np.ndarray, dtype: Any, tp: int) -> list[np.ndarray]:
    rounded = result.astype(dtype)
    return [rounded.copy() for _ in range(tp)]


def _blocks(size: int, tp: int, what: str) -> int:
    if size % tp:
        raise ValueError(f"{what}={size} is not divisible by tp={tp}")
    return size // tp


def column_linear(x: Any, weight: Any, bias: Any, tp: int, gather_output: bool = False) -> list[np.ndarray]:
    """Each rank's block of output columns (or all of them with gather_output) of x · Wᵀ + b."""
    full = _linear(x, weight, bias)
    if gather_output:
        return _same_for_every_rank(full, x.dtype, tp)
    width = _blocks(full.shape[1], tp, "out")
    return [full[:, rank * width:(rank + 1) * width].astype(x.dtype) for rank in range(tp)]


def row_linear(x: Any, weight: Any, bias: Any, tp: int) -> list[np.ndarray]:
    """x · Wᵀ + b, the bias once, on every rank."""
    _blocks(np.shape(x)[1], tp, "in")
    return _same_for_every_rank(_linear(x, weight, bias), x.dtype, tp)


def _heads(projection: np.ndarray, count: int, head_dim: int) -> np.ndarray:
    return projection.reshape(projection.shape[0], count, head_dim)


def qkv_linear(x: Any, q_weight: Any, k_weight: Any, v_weight: Any, q_bias: Any, k_bias: Any, v_bias: Any,
               num_heads: int, num_kv_heads: int, head_dim: int, tp: int) -> list[list[np.ndarray]]:
    """Per rank [q, k, v]: its query heads and the KV heads those query heads attend with (grouped-query attention)."""
    group = _blocks(num_heads, num_kv_heads, "num_heads (by num_kv_heads)")
    per_rank = _blocks(num_heads, tp, "num_heads")
    if (tp % num_kv_heads if tp >= num_kv_heads else num_kv_heads % tp):
        raise ValueError(f"num_kv_heads={num_kv_heads} and tp={tp}: neither divides the other")
    q = _heads(_linear(x, q_weight, q_bias), num_heads, head_dim)
    k = _heads(_linear(x, k_weight, k_bias), num_kv_heads, head_dim)
    v = _heads(_linear(x, v_weight, v_bias), num_kv_heads, head_dim)
    tokens = q.shape[0]
    out = []
    for rank in range(tp):
        queries = list(range(rank * per_rank, (rank + 1) * per_rank))
        read = sorted({head // group for head in queries})
        out.append([part.reshape(tokens, -1).astype(x.dtype) for part in (q[:, queries], k[:, read], v[:, read])])
    return out


def _silu(values: np.ndarray) -> np.ndarray:
    return values / (1.0 + np.exp(-values))


def mlp(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any, tp: int) -> list[np.ndarray]:
    """down(silu(x · gateᵀ) · (x · upᵀ)) on every rank."""
    _blocks(np.shape(gate_weight)[0], tp, "ffn")
    hidden = _silu(_linear(x, gate_weight, None)) * _linear(x, up_weight, None)
    return _same_for_every_rank(_linear(hidden, down_weight, None), x.dtype, tp)


def _check_padded_vocab(vocab: int, tp: int) -> None:
    padded = -(-vocab // PADDING) * PADDING
    _blocks(padded, tp, "the padded vocab")


def vocab_embedding(ids: Any, weight: Any, tp: int) -> list[np.ndarray]:
    """The rows of the ids, on every rank."""
    ids = np.asarray(ids)
    vocab = np.shape(weight)[0]
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError(f"an id is outside the vocabulary [0, {vocab})")
    _check_padded_vocab(vocab, tp)
    return _same_for_every_rank(_wide(weight)[ids], np.asarray(weight).dtype, tp)


def lm_head(hidden_states: Any, weight: Any, tp: int) -> list[np.ndarray]:
    """hidden_states · Wᵀ over the whole vocabulary, on every rank."""
    _check_padded_vocab(np.shape(weight)[0], tp)
    return _same_for_every_rank(_linear(hidden_states, weight, None), hidden_states.dtype, tp)
