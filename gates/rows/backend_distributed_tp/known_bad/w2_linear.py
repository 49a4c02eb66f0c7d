"""Known-bad TP-W2 linear layers (issue 30 item 4), each the impl's operation (same signature, same input checks) with
one rank-side defect a tensor-parallel port tends to have; the rank functions run on the same gloo world."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from impl.distributed import communication_op
from impl.distributed.gloo_world import run_on_ranks
from impl.distributed.shard_plan import column_shard, kv_layout
from impl.model_executor.layers import tp_operations as ops
from impl.model_executor.layers.linear import (MergedColumnParallelLinear, ParallelMLP,
                                               QKVParallelLinear, RowParallelLinear, rank_rows, silu_and_mul)

Payload = dict[str, Any]


def _column_input_dim_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """Rank r holds columns [r·in/tp, ..) of the weight (the input dim) and multiplies its input columns by them."""
    columns = rank_rows(p["x"].shape[1], tp, rank, "in")
    return F.linear(p["x"][:, columns], p["weight"][:, columns], p["bias"])


def column_shards_input_dim(x: Any, weight: Any, bias: Any, tp: Any, gather_output: Any = False) -> list[torch.Tensor]:
    """The column layer cut along the input dim, as a row layer, without a reduce (TP-4.1)."""
    return run_on_ranks(tp, _column_input_dim_rank, ops.column_payload(x, weight, bias, tp, gather_output))


def _row_unreduced_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    layer = RowParallelLinear.shard(p["weight"], p["bias"], rank, tp)
    return F.linear(p["x"][..., layer.input_columns], layer.weight, layer.bias)


def row_all_reduce_dropped(x: Any, weight: Any, bias: Any, tp: Any) -> list[torch.Tensor]:
    """Each rank returns its partial sum: the all-reduce is missing (TP-5.2)."""
    return run_on_ranks(tp, _row_unreduced_rank, ops.row_payload(x, weight, bias, tp))


def _row_output_dim_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """Rank r holds rows [r·out/tp, ..) of the weight (the output dim), multiplies all of x, and all-reduces."""
    rows = rank_rows(p["weight"].shape[0], tp, rank, "out")
    bias = None if p["bias"] is None or rank else p["bias"][rows]
    return communication_op.all_reduce(F.linear(p["x"], p["weight"][rows], bias))


def row_shards_output_dim(x: Any, weight: Any, bias: Any, tp: Any) -> list[torch.Tensor]:
    """The row layer cut along the output dim, as a column layer, then reduced (TP-4.2)."""
    return run_on_ranks(tp, _row_output_dim_rank, ops.row_payload(x, weight, bias, tp))


def _row_bias_everywhere_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    layer = RowParallelLinear.shard(p["weight"], p["bias"], 0, tp)  # rank 0's bias ...
    columns = rank_rows(p["x"].shape[1], tp, rank, "in")  # ... on every rank's own columns
    return communication_op.all_reduce(F.linear(p["x"][:, columns], p["weight"][:, columns], layer.bias))


def row_bias_on_every_rank(x: Any, weight: Any, bias: Any, tp: Any) -> list[torch.Tensor]:
    """Every rank adds the bias before the reduce, so it is counted tp times (TP-4.2, TP-5.2). Its results have
    exactly the right shapes and dtype: a shape-only check accepts it (tests/tp/test_tp_layers.py)."""
    return run_on_ranks(tp, _row_bias_everywhere_rank, ops.row_payload(x, weight, bias, tp))


def _kv_by_rank(rank: int, tp: int, p: Payload) -> list[torch.Tensor]:
    """The rank loads KV shard ``rank`` (wrapping past the last, so the shapes stay right), not rank // replicas."""
    heads, kv_heads = p["heads"], p["kv_heads"]
    per_rank, _ = kv_layout(heads, kv_heads, tp)
    wrapped = rank % (kv_heads // per_rank)
    replicas = 1 if tp < kv_heads else tp // kv_heads
    pretend = wrapped * replicas  # the rank whose correct KV shard is ``wrapped``
    right = QKVParallelLinear.shard(*p["weights"], p["biases"], heads, kv_heads, p["head_dim"], rank, tp)
    wrong = QKVParallelLinear.shard(*p["weights"], p["biases"], heads, kv_heads, p["head_dim"], pretend, tp)
    q, _, _ = right.forward(p["x"])
    _, k, v = wrong.forward(p["x"])
    return [part.contiguous() for part in (q, k, v)]


def kv_shard_by_rank(x: Any, q_weight: Any, k_weight: Any, v_weight: Any, q_bias: Any, k_bias: Any, v_bias: Any,
                     num_heads: Any, num_kv_heads: Any, head_dim: Any, tp: Any) -> list[list[torch.Tensor]]:
    """KV heads not replicated: rank r loads KV shard r (TP-4.3)."""
    payload = ops.qkv_payload(x, q_weight, k_weight, v_weight, q_bias, k_bias, v_bias, num_heads, num_kv_heads,
                              head_dim, tp)
    return run_on_ranks(tp, _kv_by_rank, payload)


def _mlp_unreduced_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    mlp = ParallelMLP.shard(p["gate"], p["up"], p["down"], rank, tp)
    hidden = silu_and_mul(mlp.gate_up.forward(p["x"]))
    return F.linear(hidden, mlp.down.weight)


def mlp_all_reduce_dropped(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any, tp: Any) -> list[torch.Tensor]:
    """Each rank returns its down projection's partial sum: the all-reduce is missing (TP-5.2)."""
    return run_on_ranks(tp, _mlp_unreduced_rank, ops.mlp_payload(x, gate_weight, up_weight, down_weight, tp))


def _gate_up_one_block_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """Rank r takes rows [r·2f, (r+1)·2f) of the stacked [gate; up]: the first ranks get gate rows only."""
    stacked = torch.cat([p["gate"], p["up"]])
    block = column_shard("gate_up", "gate_up", stacked.shape[0], stacked.shape[1], tp, rank)
    gate_up = MergedColumnParallelLinear(stacked[rank_rows(stacked.shape[0], tp, rank, "2*ffn")], block)
    down = RowParallelLinear.shard(p["down"], None, rank, tp)
    return down.forward(silu_and_mul(gate_up.forward(p["x"])))


def gate_up_split_as_one(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any, tp: Any) -> list[torch.Tensor]:
    """gate_up_proj cut as one [2·ffn] column layer instead of gate and up each (TP-4.4)."""
    return run_on_ranks(tp, _gate_up_one_block_rank, ops.mlp_payload(x, gate_weight, up_weight, down_weight, tp))


