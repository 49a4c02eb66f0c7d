"""Oracle for the TP-W2 shard plan (spec/tensor-parallel.md TP-4.1 to TP-4.8), derived by slicing index arrays.

It never restates the shard formulas. The checkpoint tensors are index arrays (row i holds i); the heads a rank
computes are the rank's equal share of the query heads, and the KV heads it needs are those its query heads read
(grouped-query attention: query head h reads KV head h // (Hq/Hkv)); the vocabulary is the token ids followed by
-1 padding ids up to the next multiple of 64, cut into tp equal pieces. Each rank's ranges are then read off the
indices it holds, and a split that cannot be made equal or that leaves ranks sharing part of a KV head is refused.
"""
from __future__ import annotations

from typing import Any

import numpy as np

PADDING_MULTIPLE = 64  # vLLM's DEFAULT_VOCAB_PADDING_SIZE (vllm/model_executor/layers/vocab_parallel_embedding.py)


def _equal_pieces(indices: np.ndarray, tp: int, what: str) -> list[np.ndarray]:
    """``indices`` cut into ``tp`` equal consecutive pieces; ValueError when they cannot be equal."""
    if len(indices) % tp:
        raise ValueError(f"{what} ({len(indices)}) cannot be cut into {tp} equal pieces")
    return np.split(indices, tp)


def _span(held: np.ndarray, empty_at: int) -> list[int]:
    """The half-open range of the consecutive indices ``held``; an empty hold sits at ``empty_at``."""
    if held.size == 0:
        return [empty_at, empty_at]
    if not np.array_equal(held, np.arange(held[0], held[0] + held.size)):
        raise AssertionError(f"the indices {held.tolist()} are not one consecutive range")
    return [int(held[0]), int(held[-1]) + 1]


def _kv_heads_needed(query_heads: list[np.ndarray], num_heads: int, num_kv_heads: int) -> list[np.ndarray]:
    """For each rank, the KV heads its query heads read; ValueError when ranks would share part of a KV head's
    readers (the replicated or partitioned layouts are the only ones vLLM builds)."""
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} query heads do not form groups over {num_kv_heads} KV heads")
    reader_of = np.arange(num_heads) // (num_heads // num_kv_heads)
    needed = [np.unique(reader_of[heads]) for heads in query_heads]
    sets = [frozenset(n.tolist()) for n in needed]
    for a in sets:
        for b in sets:
            if a != b and a & b:
                raise ValueError(f"ranks would share KV heads {sorted(a & b)} while holding different ones")
    if len({len(s) for s in sets}) != 1:
        raise ValueError("ranks would hold different numbers of KV heads")
    return needed


def _weight(shape: list[int], parts: list[tuple[str, list[int], list[int]]], bias: list[int] | None = None,
            padding_rows: int = 0) -> dict[str, Any]:
    return {"shape": shape, "parts": [{"source": s, "rows": r, "cols": c} for s, r, c in parts], "bias": bias,
            "padding_rows": padding_rows}


def vllm_shard_plan(geometry: dict[str, Any], tp: int) -> dict[str, Any]:
    """The plan of the tp-shard-plan operation (operations.yaml), read off sliced index arrays."""
    hidden, hq, hkv = geometry["hidden"], geometry["num_heads"], geometry["num_kv_heads"]
    head_dim, ffn, vocab = geometry["head_dim"], geometry["ffn"], geometry["vocab"]
    tied = geometry.get("tie_word_embeddings", False)
    query_heads = _equal_pieces(np.arange(hq), tp, "the query heads")
    kv_heads = _kv_heads_needed(query_heads, hq, hkv)
    ffn_pieces = _equal_pieces(np.arange(ffn), tp, "the ffn rows")
    padded_ids = np.arange(vocab)
    while padded_ids.size % PADDING_MULTIPLE:
        padded_ids = np.append(padded_ids, -1)
    vocab_pieces = _equal_pieces(padded_ids, tp, "the padded vocabulary")
    positions = _equal_pieces(np.arange(padded_ids.size), tp, "the padded vocabulary")
    every_column = [0, hidden]
    holders = {}
    for rank, needed in enumerate(kv_heads):
        holders.setdefault(tuple(needed.tolist()), []).append(rank)
    shards = sorted(holders)  # KV shards in checkpoint order
    ranks = []
    for rank in range(tp):
        q_rows = (query_heads[rank][:, None] * head_dim + np.arange(head_dim)).reshape(-1)
        kv_rows = (kv_heads[rank][:, None] * head_dim + np.arange(head_dim)).reshape(-1)
        ffn_rows = ffn_pieces[rank]
        ids = vocab_pieces[rank]
        held_ids = ids[ids >= 0]
        weights = {
            "qkv_proj": _weight([q_rows.size + 2 * kv_rows.size, hidden], [
                ("q_proj", _span(q_rows, 0), every_column), ("k_proj", _span(kv_rows, 0), every_column),
                ("v_proj", _span(kv_rows, 0), every_column)]),
            "o_proj": _weight([hidden, q_rows.size], [("o_proj", every_column, _span(q_rows, 0))],
                              every_column if rank == 0 else None),
            "gate_up_proj": _weight([2 * ffn_rows.size, hidden], [
                ("gate_proj", _span(ffn_rows, 0), every_column), ("up_proj", _span(ffn_rows, 0), every_column)]),
            "down_proj": _weight([hidden, ffn_rows.size], [("down_proj", every_column, _span(ffn_rows, 0))],
                                 every_column if rank == 0 else None),
            "embed_tokens": _weight([ids.size, hidden], [("embed_tokens", _span(held_ids, vocab), every_column)],
                                    None, int((ids < 0).sum())),
            "lm_head": _weight([ids.size, hidden], [("embed_tokens" if tied else "lm_head", _span(held_ids, vocab),
                                                     every_column)], None, int((ids < 0).sum())),
        }
        ranks.append({"rank": rank, "kv_shard": shards.index(tuple(kv_heads[rank].tolist())),
                      "vocab_range": _span(positions[rank], 0), "vocab_loaded": _span(held_ids, vocab),
                      "weights": weights})
    return {"tp": tp, "padded_vocab": int(padded_ids.size), "heads_per_rank": int(query_heads[0].size),
            "kv_heads_per_rank": int(kv_heads[0].size), "kv_replicas": len(holders[shards[0]]), "ranks": ranks}
