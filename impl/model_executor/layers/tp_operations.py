"""The TP-W2 layer operations of gates/rows/backend_distributed_tp/operations.yaml (tp-column-linear, tp-row-linear,
tp-qkv-linear, tp-mlp, tp-vocab-embedding, tp-lm-head): the inputs checked here, then every rank's forward run on a
real gloo world of tp processes, the per-rank results returned in rank order (spec/tensor-parallel.md TP-5.1 to
TP-5.4; issue 30 item 3).

A refusal names the operation, the input and the numbers: a tensor of another shape or dtype (both named), a
geometry the layers cannot shard (TP-4.8), an id outside the vocabulary, a tp outside [1, MAX_TP].
"""
from __future__ import annotations

from typing import Any

import torch

from impl.distributed.gloo_world import MAX_TP, run_on_ranks
from impl.distributed.shard_plan import divide, kv_layout
from impl.model_executor.layers.linear import (ColumnParallelLinear, ParallelMLP, QKVParallelLinear,
                                               RowParallelLinear)
from impl.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding, VocabShard

FLOAT_DTYPES = (torch.float32, torch.bfloat16)
"""The float dtypes the layer operations take (all float inputs of one call share one)."""

TIMEOUT_S = 60.0
"""How long one call may take on the world before its ranks are named and torn down."""

Payload = dict[str, Any]


# Input checks ------------------------------------------------------------------------------------------------------


def check_tp(operation: str, tp: Any) -> int:
    """``tp`` as an int in [1, MAX_TP], or a TypeError/ValueError naming the operation and the value."""
    if isinstance(tp, bool) or not isinstance(tp, int):
        raise TypeError(f"{operation}: tp must be an int in [1, {MAX_TP}], got {tp!r} ({type(tp).__name__})")
    if not 1 <= tp <= MAX_TP:
        raise ValueError(f"{operation}: tp must be an int in [1, {MAX_TP}] (the largest gloo world this port starts), "
                         f"got {tp}")
    return tp


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(int(side)) for side in shape) + ("," if len(shape) == 1 else "") + ")"


def check_tensor(operation: str, name: str, value: Any, shape: tuple[int, ...], dtype: torch.dtype | None) -> torch.Tensor:
    """``value`` as a tensor of ``shape`` and ``dtype`` (None: any float dtype the operations take)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{operation}: {name} must be a tensor of shape {_shape(shape)}, got {type(value).__name__}")
    if dtype is None and value.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{operation}: {name} has dtype {str(value.dtype).removeprefix('torch.')}; accepted: float32, "
                        f"bfloat16")
    if dtype is not None and value.dtype != dtype:
        raise TypeError(f"{operation}: {name} has dtype {str(value.dtype).removeprefix('torch.')}, expected "
                        f"{str(dtype).removeprefix('torch.')}")
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{operation}: {name} has shape {_shape(value.shape)}, expected {_shape(shape)}")
    return value


def _matrix(operation: str, name: str, value: Any) -> torch.Tensor:
    """A 2-d float tensor (its sizes then fix the others' shapes)."""
    if not isinstance(value, torch.Tensor) or value.dim() != 2:
        got = _shape(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(f"{operation}: {name} must be a 2-d tensor, got {got}")
    return check_tensor(operation, name, value, tuple(value.shape), None)


def _in_matching(operation: str, name: str, weight: Any, x: torch.Tensor) -> torch.Tensor:
    """A 2-d weight [out, in] whose in and dtype are x's."""
    weight = _matrix(operation, name, weight)
    return check_tensor(operation, name, weight, (weight.shape[0], x.shape[1]), x.dtype)


def check_positive(operation: str, name: str, value: Any) -> int:
    """``value`` as an int >= 1 (a bool refused), naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{operation}: {name} must be an int >= 1, got {value!r}")
    return value


def _run(tp: int, rank_fn: Any, payload: Payload) -> list[Any]:
    return run_on_ranks(tp, rank_fn, payload, timeout_s=TIMEOUT_S)


# tp-column-linear --------------------------------------------------------------------------------------------------


def _linear_payload(op: str, x: Any, weight: Any, bias: Any, tp: Any) -> Payload:
    """x [tokens, in], weight [out, in] and bias [out] or None, one float dtype; tp in range."""
    x = _matrix(op, "x", x)
    check_tp(op, tp)
    weight = _in_matching(op, "weight", weight, x)
    if bias is not None:
        check_tensor(op, "bias", bias, (weight.shape[0],), x.dtype)
    return {"x": x, "weight": weight, "bias": bias}


def column_payload(x: Any, weight: Any, bias: Any, tp: Any, gather_output: Any) -> Payload:
    """The checked inputs of tp-column-linear (TP-4.1, TP-4.8)."""
    op = "tp-column-linear"
    payload = _linear_payload(op, x, weight, bias, tp)
    if not isinstance(gather_output, bool):
        raise TypeError(f"{op}: gather_output must be a bool, got {gather_output!r}")
    out = payload["weight"].shape[0]
    divide(out, tp, f"{op}: out={out}")
    return {**payload, "gather_output": gather_output}


def column_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """One rank of tp-column-linear."""
    return ColumnParallelLinear.shard(p["weight"], p["bias"], rank, tp, p["gather_output"]).forward(p["x"])


def tp_column_linear(x: Any, weight: Any, bias: Any, tp: Any, gather_output: Any) -> list[torch.Tensor]:
    """tp-column-linear: each rank's output columns [tokens, out/tp], or with gather_output the gathered [tokens, out]."""
    return _run(tp, column_rank, column_payload(x, weight, bias, tp, gather_output))


# tp-row-linear -----------------------------------------------------------------------------------------------------


def row_payload(x: Any, weight: Any, bias: Any, tp: Any) -> Payload:
    """The checked inputs of tp-row-linear (TP-4.2, TP-4.8)."""
    op = "tp-row-linear"
    payload = _linear_payload(op, x, weight, bias, tp)
    columns = payload["x"].shape[1]
    divide(columns, tp, f"{op}: in={columns}")
    return payload


def row_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """One rank of tp-row-linear."""
    return RowParallelLinear.shard(p["weight"], p["bias"], rank, tp).forward_unsplit(p["x"])


def tp_row_linear(x: Any, weight: Any, bias: Any, tp: Any) -> list[torch.Tensor]:
    """tp-row-linear: every rank's all-reduced [tokens, out], the bias counted once (TP-5.2)."""
    return _run(tp, row_rank, row_payload(x, weight, bias, tp))


# tp-qkv-linear -----------------------------------------------------------------------------------------------------


def qkv_payload(x: Any, q_weight: Any, k_weight: Any, v_weight: Any, q_bias: Any, k_bias: Any, v_bias: Any,
                num_heads: Any, num_kv_heads: Any, head_dim: Any, tp: Any) -> Payload:
    """The checked inputs of tp-qkv-linear (TP-4.3, TP-4.8)."""
    op = "tp-qkv-linear"
    x = _matrix(op, "x", x)
    heads, kv_heads, dim = (check_positive(op, name, value) for name, value in
                            (("num_heads", num_heads), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)))
    check_tp(op, tp)
    hidden = x.shape[1]
    sizes = {"q": heads * dim, "k": kv_heads * dim, "v": kv_heads * dim}
    weights = [check_tensor(op, f"{name}_weight", value, (sizes[name], hidden), x.dtype)
               for name, value in (("q", q_weight), ("k", k_weight), ("v", v_weight))]
    given = [bias is not None for bias in (q_bias, k_bias, v_bias)]
    if any(given) and not all(given):
        raise ValueError(f"{op}: q_bias, k_bias and v_bias come all three or none; got "
                         + ", ".join(f"{name}_bias {'given' if g else 'null'}" for name, g in zip("qkv", given)))
    biases = None
    if all(given):
        biases = tuple(check_tensor(op, f"{name}_bias", value, (sizes[name],), x.dtype)
                       for name, value in (("q", q_bias), ("k", k_bias), ("v", v_bias)))
    divide(heads, tp, f"{op}: num_heads={heads}")
    kv_layout(heads, kv_heads, tp)
    return {"x": x, "weights": weights, "biases": biases, "heads": heads, "kv_heads": kv_heads, "head_dim": dim}


def qkv_rank(rank: int, tp: int, p: Payload) -> list[torch.Tensor]:
    """One rank of tp-qkv-linear: [q, k, v]."""
    layer = QKVParallelLinear.shard(*p["weights"], p["biases"], p["heads"], p["kv_heads"], p["head_dim"], rank, tp)
    return [part.contiguous() for part in layer.forward(p["x"])]


def tp_qkv_linear(x: Any, q_weight: Any, k_weight: Any, v_weight: Any, q_bias: Any, k_bias: Any, v_bias: Any,
                  num_heads: Any, num_kv_heads: Any, head_dim: Any, tp: Any) -> list[list[torch.Tensor]]:
    """tp-qkv-linear: each rank's [q, k, v] from its query heads and KV shard rank // replicas (TP-4.3, TP-5.1)."""
    payload = qkv_payload(x, q_weight, k_weight, v_weight, q_bias, k_bias, v_bias, num_heads, num_kv_heads,
                          head_dim, tp)
    return _run(tp, qkv_rank, payload)


# tp-mlp ------------------------------------------------------------------------------------------------------------


def mlp_payload(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any, tp: Any) -> Payload:
    """The checked inputs of tp-mlp (TP-4.4, TP-4.2, TP-4.8)."""
    op = "tp-mlp"
    x = _matrix(op, "x", x)
    check_tp(op, tp)
    hidden = x.shape[1]
    gate = _in_matching(op, "gate_weight", gate_weight, x)
    ffn = gate.shape[0]
    up = check_tensor(op, "up_weight", up_weight, (ffn, hidden), x.dtype)
    down = check_tensor(op, "down_weight", down_weight, (hidden, ffn), x.dtype)
    divide(ffn, tp, f"{op}: ffn={ffn}")
    return {"x": x, "gate": gate, "up": up, "down": down}


def mlp_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """One rank of tp-mlp."""
    return ParallelMLP.shard(p["gate"], p["up"], p["down"], rank, tp).forward(p["x"])


def tp_mlp(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any, tp: Any) -> list[torch.Tensor]:
    """tp-mlp: every rank's all-reduced down(silu(gate) · up) [tokens, hidden] (TP-5.1, TP-5.2)."""
    return _run(tp, mlp_rank, mlp_payload(x, gate_weight, up_weight, down_weight, tp))


# tp-vocab-embedding and tp-lm-head ---------------------------------------------------------------------------------


def _vocab_weight(operation: str, weight: Any, tp: int) -> torch.Tensor:
    """A [vocab, hidden] float weight whose padded vocabulary tp divides (TP-4.5, TP-4.8)."""
    weight = _matrix(operation, "weight", weight)
    VocabShard.of(weight.shape[0], tp, 0)
    return weight


def embedding_payload(ids: Any, weight: Any, tp: Any) -> Payload:
    """The checked inputs of tp-vocab-embedding: int64 ids inside [0, vocab) (TP-4.5)."""
    op = "tp-vocab-embedding"
    check_tp(op, tp)
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1:
        got = _shape(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"{op}: ids must be a 1-d int64 tensor [tokens], got {got}")
    check_tensor(op, "ids", ids, tuple(ids.shape), torch.int64)
    weight = _vocab_weight(op, weight, tp)
    vocab = weight.shape[0]
    outside = ((ids < 0) | (ids >= vocab)).nonzero()
    if len(outside):
        at = int(outside[0, 0])
        raise ValueError(f"{op}: ids[{at}]={int(ids[at])} is outside the vocabulary [0, {vocab})")
    return {"ids": ids, "weight": weight}


def embedding_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """One rank of tp-vocab-embedding."""
    return VocabParallelEmbedding.shard(p["weight"], rank, tp).forward(p["ids"])


def tp_vocab_embedding(ids: Any, weight: Any, tp: Any) -> list[torch.Tensor]:
    """tp-vocab-embedding: every rank's all-reduced [tokens, hidden] rows (TP-5.3)."""
    return _run(tp, embedding_rank, embedding_payload(ids, weight, tp))


def lm_head_payload(hidden_states: Any, weight: Any, tp: Any) -> Payload:
    """The checked inputs of tp-lm-head (TP-4.6)."""
    op = "tp-lm-head"
    hidden_states = _matrix(op, "hidden_states", hidden_states)
    check_tp(op, tp)
    weight = _in_matching(op, "weight", weight, hidden_states)
    return {"hidden_states": hidden_states, "weight": _vocab_weight(op, weight, tp)}


def lm_head_rank(rank: int, tp: int, p: Payload) -> torch.Tensor:
    """One rank of tp-lm-head."""
    return ParallelLMHead.shard(p["weight"], rank, tp).logits(p["hidden_states"])


def tp_lm_head(hidden_states: Any, weight: Any, tp: Any) -> list[torch.Tensor]:
    """tp-lm-head: every rank's gathered logits [tokens, vocab], padding trimmed (TP-5.4)."""
    return _run(tp, lm_head_rank, lm_head_payload(hidden_states, weight, tp))
