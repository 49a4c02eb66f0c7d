"""The tp-layer-ranks operation (spec/tensor-parallel.md TP-5.7; gates/rows/backend_distributed_tp/operations.yaml):
one tensor-parallel layer run on every rank of a gloo world, and what each rank held and computed: the blocks of the
checkpoint tensors it loaded (its layer's WeightShard, impl/distributed/shard_plan.py), the bias it adds, its outputs
before its collective, and its vocabulary mask.

The inputs are the matching layer operation's without tp, checked by that operation's own checks (tp_operations'
``*_payload``); every rank then builds the layer, computes its partials and runs the collective as the layer
operation does.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from impl.distributed.gloo_world import run_on_ranks
from impl.distributed.shard_plan import WeightShard
from impl.model_executor.layers import tp_operations as ops
from impl.model_executor.layers.linear import (ColumnParallelLinear, ParallelMLP, QKVParallelLinear,
                                               RowParallelLinear, silu_and_mul)
from impl.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

OPERATION = "tp-layer-ranks"

LAYER_INPUTS: dict[str, tuple[str, ...]] = {
    "column": ("x", "weight", "bias", "gather_output"),
    "row": ("x", "weight", "bias"),
    "qkv": ("x", "q_weight", "k_weight", "v_weight", "q_bias", "k_bias", "v_bias", "num_heads", "num_kv_heads",
            "head_dim"),
    "mlp": ("x", "gate_weight", "up_weight", "down_weight"),
    "embedding": ("ids", "weight"),
    "lm_head": ("hidden_states", "weight"),
}
"""Each layer's inputs: its layer operation's (tp-column-linear ... tp-lm-head) without tp."""

_PAYLOADS: dict[str, Callable[..., ops.Payload]] = {
    "column": ops.column_payload, "row": ops.row_payload, "qkv": ops.qkv_payload, "mlp": ops.mlp_payload,
    "embedding": ops.embedding_payload, "lm_head": ops.lm_head_payload,
}

_BIAS_OF = {"weight": "bias", "q_weight": "q_bias", "k_weight": "k_bias", "v_weight": "v_bias"}
"""A column-parallel weight input -> the bias input whose rows follow it (TP-4.1, TP-4.3)."""

RankState = dict[str, Any]


def _held(weight: torch.Tensor, shard: WeightShard) -> dict[str, Any]:
    """A held weight: the shard's parts (unsharded coordinates), its padding rows, the rank's tensor."""
    parts = [{"source": part.source, "rows": list(part.rows), "cols": list(part.cols)} for part in shard.parts]
    return {"parts": parts, "padding_rows": shard.padding_rows, "tensor": weight}


def _bias(bias: torch.Tensor | None, shard: WeightShard) -> dict[str, Any] | None:
    """The bias a rank adds: a row-parallel layer's plan range (rank 0 only), else the rows of each weight part."""
    if bias is None:
        return None
    if shard.bias is not None:
        parts = [{"source": "bias", "rows": list(shard.bias)}]
    else:
        parts = [{"source": _BIAS_OF[part.source], "rows": list(part.rows)} for part in shard.parts]
    return {"parts": parts, "tensor": bias}


def _state(held: dict[str, dict[str, Any]], bias: dict[str, Any] | None, partials: dict[str, torch.Tensor],
           mask: torch.Tensor | None = None) -> RankState:
    return {"held": held, "bias": bias, "partials": {name: value.contiguous() for name, value in partials.items()},
            "mask": mask}


def _column_rank(rank: int, tp: int, p: ops.Payload) -> RankState:
    layer = ColumnParallelLinear.shard(p["weight"], p["bias"], rank, tp, p["gather_output"])
    out = layer.partial(p["x"])
    layer.collective(out.clone())  # in place on the ranks: the partial is kept as computed
    return _state({"weight": _held(layer.weight, layer.weight_shard)}, _bias(layer.bias, layer.weight_shard),
                  {"out": out})


def _row_rank(rank: int, tp: int, p: ops.Payload) -> RankState:
    layer = RowParallelLinear.shard(p["weight"], p["bias"], rank, tp)
    out = layer.partial_unsplit(p["x"])
    layer.collective(out.clone())  # in place on the ranks: the partial is kept as computed
    return _state({"weight": _held(layer.weight, layer.weight_shard)}, _bias(layer.bias, layer.weight_shard),
                  {"out": out})


def _qkv_rank(rank: int, tp: int, p: ops.Payload) -> RankState:
    layer = QKVParallelLinear.shard(*p["weights"], p["biases"], p["heads"], p["kv_heads"], p["head_dim"], rank, tp)
    q, k, v = layer.partial(p["x"])
    return _state({"qkv": _held(layer.weight, layer.weight_shard)}, _bias(layer.bias, layer.weight_shard),
                  {"q": q, "k": k, "v": v})


def _mlp_rank(rank: int, tp: int, p: ops.Payload) -> RankState:
    mlp = ParallelMLP.shard(p["gate"], p["up"], p["down"], rank, tp)
    gate_up = mlp.gate_up.partial(p["x"])
    down = mlp.down.partial(silu_and_mul(gate_up))
    mlp.down.collective(down.clone())
    held = {"gate_up": _held(mlp.gate_up.weight, mlp.gate_up.weight_shard),
            "down": _held(mlp.down.weight, mlp.down.weight_shard)}
    return _state(held, None, {"gate_up": gate_up, "down": down})


def _embedding_rank(rank: int, tp: int, p: ops.Payload) -> RankState:
    layer = VocabParallelEmbedding.shard(p["weight"], rank, tp)
    rows = layer.partial(p["ids"])
    layer.collective(rows.clone())
    return _state({"weight": _held(layer.weight, layer.weight_shard)}, None, {"rows": rows}, layer.mask(p["ids"]))


def _lm_head_rank(rank: int, tp: int, p: ops.Payload) -> RankState:
    layer = ParallelLMHead.shard(p["weight"], rank, tp)
    logits = layer.partial(p["hidden_states"])
    layer.collective(logits.clone())
    return _state({"weight": _held(layer.weight, layer.weight_shard)}, None, {"logits": logits})


_RANKS: dict[str, Callable[[int, int, ops.Payload], RankState]] = {
    "column": _column_rank, "row": _row_rank, "qkv": _qkv_rank, "mlp": _mlp_rank, "embedding": _embedding_rank,
    "lm_head": _lm_head_rank,
}


def checked_layer_inputs(layer: Any, inputs: Any) -> dict[str, Any]:
    """``inputs`` as keyword arguments of ``layer``'s payload check, once ``layer`` is a known layer and ``inputs``
    has exactly its keys (an unknown key is named first, then a missing one)."""
    if not isinstance(layer, str) or layer not in LAYER_INPUTS:
        raise ValueError(f"{OPERATION}: layer must be one of {', '.join(LAYER_INPUTS)}, got {layer!r}")
    if not isinstance(inputs, Mapping):
        raise TypeError(f"{OPERATION}: inputs of layer {layer} must be a map of {', '.join(LAYER_INPUTS[layer])}, "
                        f"got {type(inputs).__name__}")
    keys = LAYER_INPUTS[layer]
    unknown = [name for name in inputs if name not in keys]
    if unknown:
        raise ValueError(f"{OPERATION}: inputs of layer {layer}: unknown key {unknown[0]!r}")
    missing = [name for name in keys if name not in inputs]
    if missing:
        raise ValueError(f"{OPERATION}: inputs of layer {layer}: missing key {missing[0]!r}")
    return dict(inputs)


def tp_layer_ranks(layer: Any, inputs: Any, tp: Any) -> list[RankState]:
    """tp-layer-ranks: for each rank 0..tp-1, {held, bias, partials, mask} of ``layer`` run on the gloo world of
    ``tp`` ranks with ``inputs`` (TP-5.7); the layer operation's refusals otherwise."""
    kwargs = checked_layer_inputs(layer, inputs)
    payload = _PAYLOADS[layer](**kwargs, tp=tp)
    return run_on_ranks(tp, _RANKS[layer], payload, timeout_s=ops.TIMEOUT_S)
