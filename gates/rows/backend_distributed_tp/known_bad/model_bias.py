"""Known-bad whole models for model-greedy-drawn (w2_model.yaml): the impl with one defect in how a rank holds the
attention biases (spec/tensor-parallel.md TP-4.2, TP-4.3; vLLM's RowParallelLinear adds its bias on rank 0 only,
QKVParallelLinear cuts the q/k/v biases with their weight rows). model-greedy-sharded, whose model has no bias, passes
each of them.

As in known_bad/model.py, each defect is patched into impl.model_executor.models.qwen3 inside the rank processes for
one call and undone after it, since the gloo world is reused by the next call.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from impl.model_executor.layers import linear
from impl.model_executor.models import qwen3

from .model import _replaced


class _OProjBiasOnEveryRank:
    """RowParallelLinear whose every rank holds o_proj's whole bias: the all-reduce counts it tp times."""

    @staticmethod
    def shard(weight: torch.Tensor, bias: torch.Tensor | None, rank: int, tp: int) -> Any:
        layer = linear.RowParallelLinear.shard(weight, bias, rank, tp)
        return dataclasses.replace(layer, bias=None if bias is None else bias.contiguous())


class _QKVBiasOfRankZero:
    """QKVParallelLinear whose every rank adds rank 0's q/k/v bias rows to its own weight rows."""

    @staticmethod
    def shard(q_weight: torch.Tensor, k_weight: torch.Tensor, v_weight: torch.Tensor, biases: Any, num_heads: int,
              num_kv_heads: int, head_dim: int, rank: int, tp: int) -> Any:
        layer = linear.QKVParallelLinear.shard(q_weight, k_weight, v_weight, biases, num_heads, num_kv_heads, head_dim,
                                               rank, tp)
        first = linear.QKVParallelLinear.shard(q_weight, k_weight, v_weight, biases, num_heads, num_kv_heads,
                                               head_dim, 0, tp)
        return dataclasses.replace(layer, bias=first.bias)


class _KVBiasByRank:
    """QKVParallelLinear whose k/v bias rows are those of KV shard ``rank`` (wrapped into the shards there are)
    instead of ``rank // replicas``, its weights right: with replicated KV heads rank 1 of tp 4 adds KV head 1's bias
    to KV head 0."""

    @staticmethod
    def shard(q_weight: torch.Tensor, k_weight: torch.Tensor, v_weight: torch.Tensor, biases: Any, num_heads: int,
              num_kv_heads: int, head_dim: int, rank: int, tp: int) -> Any:
        layer = linear.QKVParallelLinear.shard(q_weight, k_weight, v_weight, biases, num_heads, num_kv_heads, head_dim,
                                               rank, tp)
        if biases is None:
            return layer
        q, k, v = layer.weight_shard.parts
        size = k.rows[1] - k.rows[0]
        held = rank % (num_kv_heads * head_dim // size)
        rows = (held * size, (held + 1) * size)
        plan = dataclasses.replace(layer.weight_shard, parts=(q, dataclasses.replace(k, rows=rows),
                                                              dataclasses.replace(v, rows=rows)))
        bias = linear.cut_bias(plan, dict(zip((q.source, k.source, v.source), biases)))
        return dataclasses.replace(layer, bias=bias)


def _rank_o_proj_bias_on_every_rank(rank: int, tp: int, run: Any) -> Any:
    with _replaced("RowParallelLinear", _OProjBiasOnEveryRank):
        return qwen3.rank_greedy(rank, tp, run)


def _rank_qkv_bias_of_rank_zero(rank: int, tp: int, run: Any) -> Any:
    with _replaced("QKVParallelLinear", _QKVBiasOfRankZero):
        return qwen3.rank_greedy(rank, tp, run)


def _rank_kv_bias_by_rank(rank: int, tp: int, run: Any) -> Any:
    with _replaced("QKVParallelLinear", _KVBiasByRank):
        return qwen3.rank_greedy(rank, tp, run)


def o_proj_bias_on_every_rank(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_o_proj_bias_on_every_rank)


def qkv_bias_of_rank_zero(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_qkv_bias_of_rank_zero)


def kv_bias_by_rank(config: Any, weights: Any, prompt: Any, steps: int, tp: int) -> dict[str, torch.Tensor]:
    return qwen3.run_greedy(config, weights, prompt, steps, tp, _rank_kv_bias_by_rank)
