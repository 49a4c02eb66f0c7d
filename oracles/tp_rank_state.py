"""Oracle for the per-rank TP-W2 gates (spec/tensor-parallel.md TP-5.7, on the shards of TP-4.1 to TP-4.6): what
each rank of one layer holds, adds and computes before its collective, derived by slicing index arrays.

No shard formula and no collective: the units a layer cuts (output rows, input columns, query heads, ffn units,
padded vocabulary ids) are index arrays cut into tp equal consecutive pieces; a rank's KV heads are those its query
heads read under grouped-query attention (query head h reads KV head h // (Hq/Hkv)); the ranges a rank holds are
read off the indices it holds. The tensors a rank holds are the input's own elements at those indices; its partial
outputs are float64 products over them, rounded once to the input's dtype.

A call the layer operation refuses is refused here with the operation's message (the input checks of
gates/rows/backend_distributed_tp/operations.yaml, in its order).
"""
from __future__ import annotations

from typing import Any

import numpy as np

MAX_TP = 8
PADDING = 64
LAYERS = ("column", "row", "qkv", "mlp", "embedding", "lm_head")
INPUTS = {
    "column": ("x", "weight", "bias", "gather_output"),
    "row": ("x", "weight", "bias"),
    "qkv": ("x", "q_weight", "k_weight", "v_weight", "q_bias", "k_bias", "v_bias", "num_heads", "num_kv_heads",
            "head_dim"),
    "mlp": ("x", "gate_weight", "up_weight", "down_weight"),
    "embedding": ("ids", "weight"),
    "lm_head": ("hidden_states", "weight"),
}
OPERATIONS = {"column": "tp-column-linear", "row": "tp-row-linear", "qkv": "tp-qkv-linear", "mlp": "tp-mlp",
              "embedding": "tp-vocab-embedding", "lm_head": "tp-lm-head"}
FLOATS = ("float32", "bfloat16")

Rank = dict[str, Any]


# Refusals ----------------------------------------------------------------------------------------------------------


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(int(side)) for side in shape) + ("," if len(shape) == 1 else "") + ")"


def _tp(op: str, tp: Any) -> int:
    if isinstance(tp, bool) or not isinstance(tp, int):
        raise TypeError(f"{op}: tp must be an int in [1, {MAX_TP}], got {tp!r} ({type(tp).__name__})")
    if not 1 <= tp <= MAX_TP:
        raise ValueError(f"{op}: tp must be an int in [1, {MAX_TP}] (the largest gloo world this port starts), got {tp}")
    return tp


def _matrix(op: str, name: str, value: Any) -> np.ndarray:
    """A 2-d float32 or bfloat16 array."""
    if not isinstance(value, np.ndarray) or value.ndim != 2:
        got = _shape(value.shape) if isinstance(value, np.ndarray) else type(value).__name__
        raise ValueError(f"{op}: {name} must be a 2-d tensor, got {got}")
    if value.dtype.name not in FLOATS:
        raise TypeError(f"{op}: {name} has dtype {value.dtype.name}; accepted: float32, bfloat16")
    return value


def _like(op: str, name: str, value: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` (the dtype checked first, as the operations check it)."""
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{op}: {name} must be a tensor of shape {_shape(shape)}, got {type(value).__name__}")
    if value.dtype != dtype:
        raise TypeError(f"{op}: {name} has dtype {value.dtype.name}, expected {np.dtype(dtype).name}")
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{op}: {name} has shape {_shape(value.shape)}, expected {_shape(shape)}")
    return value


def _weight(op: str, name: str, value: Any, x: np.ndarray) -> np.ndarray:
    """A 2-d weight [out, in] with x's in and dtype."""
    value = _matrix(op, name, value)
    return _like(op, name, value, (value.shape[0], x.shape[1]), x.dtype)


def _positive(op: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{op}: {name} must be an int >= 1, got {value!r}")
    return value


def _pieces(units: int, tp: int, what: str) -> list[np.ndarray]:
    """The indices 0..units-1 cut into tp equal consecutive pieces; ValueError naming ``what`` where they cannot be."""
    if units % tp:
        raise ValueError(f"{what} is not divisible by tp={tp}")
    return np.split(np.arange(units), tp)


def _checked_inputs(layer: Any, inputs: Any) -> dict[str, Any]:
    if layer not in LAYERS:
        raise ValueError(f"tp-layer-ranks: layer must be one of {', '.join(LAYERS)}, got {layer!r}")
    if not isinstance(inputs, dict):
        raise TypeError(f"tp-layer-ranks: inputs of layer {layer} must be a map, got {type(inputs).__name__}")
    for key in inputs:
        if key not in INPUTS[layer]:
            raise ValueError(f"tp-layer-ranks: inputs of layer {layer}: unknown key {key!r}")
    for key in INPUTS[layer]:
        if key not in inputs:
            raise ValueError(f"tp-layer-ranks: inputs of layer {layer}: missing key {key!r}")
    return inputs


# What a rank holds ---------------------------------------------------------------------------------------------------


def _wide(array: np.ndarray) -> np.ndarray:
    return np.asarray(array).astype(np.float64)


def _span(held: np.ndarray, empty_at: int = 0) -> list[int]:
    """The half-open range of the consecutive indices ``held``; an empty hold sits at ``empty_at``."""
    if held.size == 0:
        return [empty_at, empty_at]
    if not np.array_equal(held, np.arange(held[0], held[0] + held.size)):
        raise AssertionError(f"the indices {held.tolist()} are not one consecutive range")
    return [int(held[0]), int(held[-1]) + 1]


def _rows_part(source: str, rows: np.ndarray, columns: int) -> dict[str, Any]:
    return {"source": source, "rows": _span(rows), "cols": [0, columns]}


def _held(parts: list[dict[str, Any]], tensor: np.ndarray, padding_rows: int = 0) -> dict[str, Any]:
    return {"parts": parts, "padding_rows": padding_rows, "tensor": np.ascontiguousarray(tensor)}


def _bias(sources: list[tuple[str, np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """The bias a rank adds: (source, its rows, the source's elements there) stacked."""
    return {"parts": [{"source": source, "rows": _span(rows)} for source, rows, _ in sources],
            "tensor": np.concatenate([values[rows] for _, rows, values in sources])}


def _rank(held: dict[str, Any], bias: dict[str, Any] | None, partials: dict[str, np.ndarray],
          mask: np.ndarray | None = None) -> Rank:
    return {"held": held, "bias": bias, "partials": partials, "mask": mask}


# The layers --------------------------------------------------------------------------------------------------------


def _linear(op: str, inputs: dict[str, Any], tp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """x, weight and bias (or None) of a column or row layer, checked in the operations' order (x, tp, weight, bias)."""
    x = _matrix(op, "x", inputs["x"])
    _tp(op, tp)
    weight = _weight(op, "weight", inputs["weight"], x)
    bias = inputs["bias"]
    if bias is not None:
        _like(op, "bias", bias, (weight.shape[0],), x.dtype)
    return x, weight, bias


def _column(inputs: dict[str, Any], tp: int) -> list[Rank]:
    op = "tp-column-linear"
    x, weight, bias = _linear(op, inputs, tp)
    if not isinstance(inputs["gather_output"], bool):
        raise TypeError(f"{op}: gather_output must be a bool, got {inputs['gather_output']!r}")
    out, columns = weight.shape
    full = _wide(x) @ _wide(weight).T + (0.0 if bias is None else _wide(bias))
    ranks = []
    for rows in _pieces(out, tp, f"{op}: out={out}"):
        held = {"weight": _held([_rows_part("weight", rows, columns)], weight[rows])}
        ranks.append(_rank(held, None if bias is None else _bias([("bias", rows, bias)]),
                           {"out": full[:, rows].astype(x.dtype)}))
    return ranks


def _row(inputs: dict[str, Any], tp: int) -> list[Rank]:
    op = "tp-row-linear"
    x, weight, bias = _linear(op, inputs, tp)
    out, columns = weight.shape
    ranks = []
    for rank, held_columns in enumerate(_pieces(columns, tp, f"{op}: in={columns}")):
        adds = bias is not None and rank == 0  # the first rank's bias is the layer's
        partial = _wide(x[:, held_columns]) @ _wide(weight[:, held_columns]).T + (_wide(bias) if adds else 0.0)
        part = {"source": "weight", "rows": [0, out], "cols": _span(held_columns)}
        ranks.append(_rank({"weight": _held([part], weight[:, held_columns])},
                           _bias([("bias", np.arange(out), bias)]) if adds else None,
                           {"out": partial.astype(x.dtype)}))
    return ranks


def _qkv(inputs: dict[str, Any], tp: int) -> list[Rank]:
    op = "tp-qkv-linear"
    x = _matrix(op, "x", inputs["x"])
    heads, kv_heads, dim = (_positive(op, name, inputs[name]) for name in ("num_heads", "num_kv_heads", "head_dim"))
    _tp(op, tp)
    hidden = x.shape[1]
    sizes = {"q": heads * dim, "k": kv_heads * dim, "v": kv_heads * dim}
    weights = {n: _like(op, f"{n}_weight", inputs[f"{n}_weight"], (sizes[n], hidden), x.dtype) for n in "qkv"}
    given = [inputs[f"{n}_bias"] is not None for n in "qkv"]
    if any(given) and not all(given):
        raise ValueError(f"{op}: q_bias, k_bias and v_bias come all three or none; got "
                         + ", ".join(f"{n}_bias {'given' if g else 'null'}" for n, g in zip("qkv", given)))
    biases = {n: _like(op, f"{n}_bias", inputs[f"{n}_bias"], (sizes[n],), x.dtype) for n in "qkv"} if all(given) else None
    query_heads = _pieces(heads, tp, f"{op}: num_heads={heads}")
    read = _kv_heads_read(query_heads, heads, kv_heads, tp)
    ranks = []
    for queries, kv in zip(query_heads, read):
        rows = {"q": _head_rows(queries, dim), "k": _head_rows(kv, dim), "v": _head_rows(kv, dim)}
        parts = [_rows_part(f"{n}_weight", rows[n], hidden) for n in "qkv"]
        tensor = np.concatenate([weights[n][rows[n]] for n in "qkv"])
        partials = {}
        for n in "qkv":
            product = _wide(x) @ _wide(weights[n][rows[n]]).T
            partials[n] = (product if biases is None else product + _wide(biases[n][rows[n]])).astype(x.dtype)
        bias = None if biases is None else _bias([(f"{n}_bias", rows[n], biases[n]) for n in "qkv"])
        ranks.append(_rank({"qkv": _held(parts, tensor)}, bias, partials))
    return ranks


def _kv_heads_read(query_heads: list[np.ndarray], heads: int, kv_heads: int, tp: int) -> list[np.ndarray]:
    """Each rank's KV heads: those its query heads read; refused as the operation refuses a split vLLM cannot make."""
    if tp >= kv_heads and tp % kv_heads:
        raise ValueError(f"num_kv_heads={kv_heads} does not divide tp={tp} (tp >= num_kv_heads replicates each KV head "
                         f"tp/num_kv_heads times)")
    if tp < kv_heads and kv_heads % tp:
        raise ValueError(f"num_kv_heads={kv_heads} is not divisible by tp={tp}")
    if heads % kv_heads:
        raise ValueError(f"num_heads={heads} is not divisible by num_kv_heads={kv_heads} (grouped-query attention)")
    reader_of = np.arange(heads) // (heads // kv_heads)
    return [np.unique(reader_of[queries]) for queries in query_heads]


def _head_rows(heads: np.ndarray, dim: int) -> np.ndarray:
    return (heads[:, None] * dim + np.arange(dim)).reshape(-1)


def _mlp(inputs: dict[str, Any], tp: int) -> list[Rank]:
    op = "tp-mlp"
    x = _matrix(op, "x", inputs["x"])
    _tp(op, tp)
    hidden = x.shape[1]
    gate = _weight(op, "gate_weight", inputs["gate_weight"], x)
    ffn = gate.shape[0]
    up = _like(op, "up_weight", inputs["up_weight"], (ffn, hidden), x.dtype)
    down = _like(op, "down_weight", inputs["down_weight"], (hidden, ffn), x.dtype)
    gate_out, up_out = _wide(x) @ _wide(gate).T, _wide(x) @ _wide(up).T
    units = gate_out / (1.0 + np.exp(-gate_out)) * up_out  # silu(gate) · up of every ffn unit
    ranks = []
    for rows in _pieces(ffn, tp, f"{op}: ffn={ffn}"):
        gate_up = _held([_rows_part("gate_weight", rows, hidden), _rows_part("up_weight", rows, hidden)],
                        np.concatenate([gate[rows], up[rows]]))
        down_held = _held([{"source": "down_weight", "rows": [0, hidden], "cols": _span(rows)}], down[:, rows])
        partials = {"gate_up": np.concatenate([gate_out[:, rows], up_out[:, rows]], axis=1).astype(x.dtype),
                    "down": (units[:, rows] @ _wide(down[:, rows]).T).astype(x.dtype)}
        ranks.append(_rank({"gate_up": gate_up, "down": down_held}, None, partials))
    return ranks


def _vocab_pieces(weight: np.ndarray, tp: int) -> list[np.ndarray]:
    """Each rank's ids of the padded vocabulary (ids >= vocab are padding), refused where tp does not divide it."""
    vocab = weight.shape[0]
    padded = -(-vocab // PADDING) * PADDING
    return _pieces(padded, tp, f"the padded vocab {padded} (vocab={vocab} padded to a multiple of {PADDING})")


def _vocab_held(weight: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """The ids a rank loads and its weight: their rows, then a zero row per padding id."""
    vocab = weight.shape[0]
    loaded = ids[ids < vocab]
    tensor = np.zeros((ids.size, weight.shape[1]), weight.dtype)
    tensor[:loaded.size] = weight[loaded]
    part = {"source": "weight", "rows": _span(loaded, vocab), "cols": [0, weight.shape[1]]}
    return loaded, {"weight": _held([part], tensor, int(ids.size - loaded.size))}


def _embedding(inputs: dict[str, Any], tp: int) -> list[Rank]:
    op = "tp-vocab-embedding"
    _tp(op, tp)
    ids = inputs["ids"]
    if not isinstance(ids, np.ndarray) or ids.ndim != 1:
        got = _shape(ids.shape) if isinstance(ids, np.ndarray) else type(ids).__name__
        raise ValueError(f"{op}: ids must be a 1-d int64 tensor [tokens], got {got}")
    _like(op, "ids", ids, ids.shape, np.int64)
    weight = _matrix(op, "weight", inputs["weight"])
    pieces = _vocab_pieces(weight, tp)
    vocab = weight.shape[0]
    outside = np.flatnonzero((ids < 0) | (ids >= vocab))
    if outside.size:
        raise ValueError(f"{op}: ids[{outside[0]}]={int(ids[outside[0]])} is outside the vocabulary [0, {vocab})")
    ranks = []
    for piece in pieces:
        loaded, held = _vocab_held(weight, piece)
        mask = np.isin(ids, loaded)
        rows = np.where(mask[:, None], weight[ids], np.zeros((), weight.dtype)).astype(weight.dtype)
        ranks.append(_rank(held, None, {"rows": rows}, mask))
    return ranks


def _lm_head(inputs: dict[str, Any], tp: int) -> list[Rank]:
    op = "tp-lm-head"
    hidden_states = _matrix(op, "hidden_states", inputs["hidden_states"])
    _tp(op, tp)
    weight = _weight(op, "weight", inputs["weight"], hidden_states)
    ranks = []
    for piece in _vocab_pieces(weight, tp):
        loaded, held = _vocab_held(weight, piece)
        logits = np.zeros((hidden_states.shape[0], piece.size))
        logits[:, :loaded.size] = _wide(hidden_states) @ _wide(weight[loaded]).T
        ranks.append(_rank(held, None, {"logits": logits.astype(hidden_states.dtype)}))
    return ranks


_LAYER = {"column": _column, "row": _row, "qkv": _qkv, "mlp": _mlp, "embedding": _embedding, "lm_head": _lm_head}


def layer_ranks(layer: Any, inputs: Any, tp: Any) -> list[Rank]:
    """The tp-layer-ranks operation (operations.yaml): every rank's held blocks, bias, partial outputs before its
    collective and vocabulary mask, in rank order."""
    checked = _checked_inputs(layer, inputs)
    return _LAYER[layer](checked, tp)
