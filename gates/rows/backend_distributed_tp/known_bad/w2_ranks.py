"""Known-bad TP-W2 ports that only a per-rank gate catches (spec/tensor-parallel.md TP-5.7): each rank holds a
right-shaped wrong block (or adds the bias on another rank) and the port undoes it before or through its collective,
so every reduced output is right.

One self-contained port on the gloo world (impl.distributed.gloo_world.run_on_ranks and the collectives of
impl.distributed.communication_op; the inputs checked by tp-layer-ranks' key check and tp_operations' payload
checkers), not the layer classes: which units each rank holds is a layout of LAYOUTS (named in a ``Port``, so that it
pickles), the correct one being the contiguous blocks of TP-4.x. Each defect is exposed twice: with the reduced layer operation's signature (tp-row-linear, tp-mlp, ...),
which the reduced gates pass (tests/tp/test_tp_ranks.py), and with tp-layer-ranks' signature, which the per-rank
gates of w2_ranks.yaml reject.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import torch
import torch.nn.functional as F

from impl.distributed import communication_op
from impl.distributed.gloo_world import run_on_ranks
from impl.model_executor.layers import tp_operations as ops
from impl.model_executor.layers.tp_rank_state import checked_layer_inputs

VOCAB_PADDING = 64
CHECKERS: dict[str, Callable[..., Any]] = {"column": ops.column_payload, "row": ops.row_payload,
                                           "qkv": ops.qkv_payload, "mlp": ops.mlp_payload,
                                           "embedding": ops.embedding_payload, "lm_head": ops.lm_head_payload}


# Layouts: which of ``units`` rows or columns rank ``rank`` of ``tp`` holds -----------------------------------------


def _block(units: int, tp: int, rank: int) -> torch.Tensor:
    size = units // tp
    return torch.arange(rank * size, (rank + 1) * size)


LAYOUTS: dict[str, Callable[[int, int, int], torch.Tensor]] = {
    "blocks": _block,  # TP-4.x: block r
    "reversed": lambda units, tp, rank: _block(units, tp, tp - 1 - rank),
    "rotated": lambda units, tp, rank: _block(units, tp, (rank + 1) % tp),
    "strided": lambda units, tp, rank: torch.arange(rank, units, tp),
}


@dataclass(frozen=True)
class Port:
    """How the port cuts each layer: the layout of each cut dimension (a LAYOUTS name), the rank that adds the row
    layer's bias, and the order of the fused q, k, v weight. ``Port()`` is the correct port."""

    column_gathered: str = "blocks"  # the column layer's output rows, with gather_output (without: always blocks)
    row_columns: str = "blocks"
    row_bias_on_last: bool = False
    ffn: str = "blocks"  # the MLP's ffn units: gate and up rows, down columns alike
    vocab: str = "blocks"  # the padded vocabulary's ids, embedding and lm_head alike
    fused_qkv: str = "qkv"  # the order q, k, v are stacked in the fused weight (and bias)


def _order(port_layout: str, units: int, tp: int) -> torch.Tensor:
    """Every rank's units concatenated in rank order: where a gather puts each unit."""
    return torch.cat([LAYOUTS[port_layout](units, tp, rank) for rank in range(tp)])


def _unpermuted(gathered: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """The gathered last dim put back in unit order (a port that holds other blocks re-orders after its gather)."""
    out = torch.empty_like(gathered)
    out[..., order] = gathered
    return out


def _runs(units: torch.Tensor, empty_at: int = 0) -> list[list[int]]:
    """The held units as half-open ranges of consecutive units, in the order held."""
    values = units.tolist()
    if not values:
        return [[empty_at, empty_at]]
    runs = [[values[0], values[0] + 1]]
    for unit in values[1:]:
        if unit == runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([unit, unit + 1])
    return runs


def _row_parts(source: str, units: torch.Tensor, columns: int, empty_at: int = 0) -> list[dict[str, Any]]:
    return [{"source": source, "rows": run, "cols": [0, columns]} for run in _runs(units, empty_at)]


def _held(parts: list[dict[str, Any]], tensor: torch.Tensor, padding_rows: int = 0) -> dict[str, Any]:
    return {"parts": parts, "padding_rows": padding_rows, "tensor": tensor.contiguous()}


def _state(held: dict[str, Any], bias: Any, partials: dict[str, torch.Tensor], mask: Any = None) -> dict[str, Any]:
    return {"held": held, "bias": bias, "partials": partials, "mask": mask}


# One rank of each layer: (its tp-layer-ranks state, its reduced output). The all-reduce sums in place: it is given a
# copy, so that the partial stays the rank's own ------------------------------------------------------------------


def _column(rank: int, tp: int, p: dict[str, Any], port: Port) -> tuple[dict[str, Any], torch.Tensor]:
    weight, bias, gather = p["weight"], p["bias"], p["gather_output"]
    layout = port.column_gathered if gather else "blocks"
    rows = LAYOUTS[layout](weight.shape[0], tp, rank)
    out = F.linear(p["x"], weight[rows], None if bias is None else bias[rows])
    held = {"weight": _held(_row_parts("weight", rows, weight.shape[1]), weight[rows])}
    bias_held = None if bias is None else {"parts": [{"source": "bias", "rows": run} for run in _runs(rows)],
                                           "tensor": bias[rows].contiguous()}
    reduced = _unpermuted(communication_op.all_gather(out, dim=-1), _order(layout, weight.shape[0], tp)) if gather else out
    return _state(held, bias_held, {"out": out}), reduced


def _row(rank: int, tp: int, p: dict[str, Any], port: Port) -> tuple[dict[str, Any], torch.Tensor]:
    x, weight, bias = p["x"], p["weight"], p["bias"]
    out_size, in_size = weight.shape
    columns = LAYOUTS[port.row_columns](in_size, tp, rank)
    adds = bias is not None and rank == (tp - 1 if port.row_bias_on_last else 0)
    out = F.linear(x[:, columns], weight[:, columns], bias if adds else None)
    parts = [{"source": "weight", "rows": [0, out_size], "cols": run} for run in _runs(columns)]
    bias_held = {"parts": [{"source": "bias", "rows": [0, out_size]}], "tensor": bias} if adds else None
    return _state({"weight": _held(parts, weight[:, columns])}, bias_held, {"out": out}), \
        communication_op.all_reduce(out.clone())


def _qkv(rank: int, tp: int, p: dict[str, Any], port: Port) -> tuple[dict[str, Any], list[torch.Tensor]]:
    heads, kv_heads, dim = p["num_heads"], p["num_kv_heads"], p["head_dim"]
    per_rank = heads // tp
    kv_per_rank, replicas = (1, tp // kv_heads) if tp >= kv_heads else (kv_heads // tp, 1)
    shard = rank // replicas
    rows = {"q": torch.arange(rank * per_rank * dim, (rank + 1) * per_rank * dim),
            "k": torch.arange(shard * kv_per_rank * dim, (shard + 1) * kv_per_rank * dim)}
    rows["v"] = rows["k"]
    hidden = p["x"].shape[1]
    order = port.fused_qkv
    fused = torch.cat([p[f"{n}_weight"][rows[n]] for n in order])
    biased = p["q_bias"] is not None
    fused_bias = torch.cat([p[f"{n}_bias"][rows[n]] for n in order]) if biased else None
    out = F.linear(p["x"], fused, fused_bias)
    pieces = dict(zip(order, out.split([rows[n].numel() for n in order], dim=-1)))
    partials = {n: pieces[n].contiguous() for n in "qkv"}
    parts = [part for n in order for part in _row_parts(f"{n}_weight", rows[n], hidden)]
    bias_held = {"parts": [{"source": f"{n}_bias", "rows": run} for n in order for run in _runs(rows[n])],
                 "tensor": fused_bias} if biased else None
    return _state({"qkv": _held(parts, fused)}, bias_held, partials), [partials[n] for n in "qkv"]


def _mlp(rank: int, tp: int, p: dict[str, Any], port: Port) -> tuple[dict[str, Any], torch.Tensor]:
    x, gate, up, down = p["x"], p["gate_weight"], p["up_weight"], p["down_weight"]
    ffn, hidden = gate.shape
    units = LAYOUTS[port.ffn](ffn, tp, rank)
    gate_up_weight = torch.cat([gate[units], up[units]])
    gate_up = F.linear(x, gate_up_weight)
    gate_part, up_part = gate_up.split(units.numel(), dim=-1)
    out = F.linear(F.silu(gate_part) * up_part, down[:, units])
    held = {"gate_up": _held(_row_parts("gate_weight", units, hidden) + _row_parts("up_weight", units, hidden),
                             gate_up_weight),
            "down": _held([{"source": "down_weight", "rows": [0, hidden], "cols": run} for run in _runs(units)],
                          down[:, units])}
    return _state(held, None, {"gate_up": gate_up, "down": out}), communication_op.all_reduce(out.clone())


def _vocab(weight: torch.Tensor, tp: int, rank: int, port: Port) -> tuple[torch.Tensor, dict[str, Any]]:
    """The rank's loaded ids and its held weight: their rows, then a zero row per padding id."""
    vocab = weight.shape[0]
    padded = -(-vocab // VOCAB_PADDING) * VOCAB_PADDING
    ids = LAYOUTS[port.vocab](padded, tp, rank)
    loaded = ids[ids < vocab]
    tensor = weight.new_zeros((ids.numel(), weight.shape[1]))
    tensor[:loaded.numel()] = weight[loaded]
    return loaded, {"weight": _held(_row_parts("weight", loaded, weight.shape[1], vocab), tensor,
                                    ids.numel() - loaded.numel())}


def _embedding(rank: int, tp: int, p: dict[str, Any], port: Port) -> tuple[dict[str, Any], torch.Tensor]:
    ids, weight = p["ids"], p["weight"]
    loaded, held = _vocab(weight, tp, rank, port)
    local_of = torch.full((weight.shape[0],), -1, dtype=torch.int64)
    local_of[loaded] = torch.arange(loaded.numel())
    local = local_of[ids]
    mask = local >= 0
    rows = F.embedding(torch.where(mask, local, torch.zeros_like(local)), held["weight"]["tensor"])
    rows = rows.masked_fill(~mask.unsqueeze(-1), 0)
    return _state(held, None, {"rows": rows}, mask), communication_op.all_reduce(rows.clone())


def _lm_head(rank: int, tp: int, p: dict[str, Any], port: Port) -> tuple[dict[str, Any], torch.Tensor]:
    hidden_states, weight = p["hidden_states"], p["weight"]
    _, held = _vocab(weight, tp, rank, port)
    logits = F.linear(hidden_states, held["weight"]["tensor"])
    vocab = weight.shape[0]
    order = _order(port.vocab, -(-vocab // VOCAB_PADDING) * VOCAB_PADDING, tp)
    gathered = _unpermuted(communication_op.all_gather(logits, dim=-1), order)
    return _state(held, None, {"logits": logits}), gathered[..., :vocab]


RANKS = {"column": _column, "row": _row, "qkv": _qkv, "mlp": _mlp, "embedding": _embedding, "lm_head": _lm_head}


def _one_rank(rank: int, tp: int, job: tuple[str, dict[str, Any], Port]) -> tuple[dict[str, Any], Any]:
    layer, inputs, port = job
    return RANKS[layer](rank, tp, inputs, port)


def _checked(layer: Any, inputs: Any, tp: Any) -> dict[str, Any]:
    """The inputs, refused as tp-layer-ranks refuses them: the layer and the keys (the impl's own check), then the
    layer operation's checks; the inputs as given (the checkers' payloads are not used)."""
    inputs = checked_layer_inputs(layer, inputs)
    CHECKERS[layer](**inputs, tp=tp)
    return inputs


def _run(layer: str, inputs: dict[str, Any], tp: int, port: Port) -> list[tuple[dict[str, Any], Any]]:
    return run_on_ranks(tp, _one_rank, (layer, _checked(layer, inputs, tp), port), timeout_s=ops.TIMEOUT_S)


def _ranks_of(port: Port) -> Callable[[Any, Any, Any], list[dict[str, Any]]]:
    def layer_ranks(layer: Any, inputs: Any, tp: Any) -> list[dict[str, Any]]:
        return [state for state, _ in _run(layer, inputs, tp, port)]
    return layer_ranks


def _reduced(layer: str, port: Port, inputs: dict[str, Any], tp: Any) -> list[Any]:
    return [reduced for _, reduced in _run(layer, inputs, tp, port)]


CORRECT = Port()

# The defects, each with the reduced operation's signature and with tp-layer-ranks' --------------------------------

ROW_COLUMNS_REVERSED = replace(CORRECT, row_columns="reversed")
ROW_COLUMNS_STRIDED = replace(CORRECT, row_columns="strided")
ROW_BIAS_ON_LAST_RANK = replace(CORRECT, row_bias_on_last=True)
MLP_FFN_STRIDED = replace(CORRECT, ffn="strided")
MLP_FFN_ROTATED = replace(CORRECT, ffn="rotated")
VOCAB_ROTATED = replace(CORRECT, vocab="rotated")
VOCAB_STRIDED = replace(CORRECT, vocab="strided")
COLUMN_GATHERED_ROTATED = replace(CORRECT, column_gathered="rotated")
QKV_FUSED_Q_V_K = replace(CORRECT, fused_qkv="qvk")


def row_columns_reversed(x: Any, weight: Any, bias: Any, tp: Any) -> list[Any]:
    """Rank r holds input columns block tp-1-r and multiplies x's same columns (TP-4.2)."""
    return _reduced("row", ROW_COLUMNS_REVERSED, {"x": x, "weight": weight, "bias": bias}, tp)


def row_columns_strided(x: Any, weight: Any, bias: Any, tp: Any) -> list[Any]:
    """Rank r holds input columns r, r+tp, r+2·tp, ... (TP-4.2)."""
    return _reduced("row", ROW_COLUMNS_STRIDED, {"x": x, "weight": weight, "bias": bias}, tp)


def row_bias_on_last_rank(x: Any, weight: Any, bias: Any, tp: Any) -> list[Any]:
    """The last rank, not rank 0, adds the bias before the all-reduce (TP-4.2, TP-5.2)."""
    return _reduced("row", ROW_BIAS_ON_LAST_RANK, {"x": x, "weight": weight, "bias": bias}, tp)


def _mlp_inputs(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any) -> dict[str, Any]:
    return {"x": x, "gate_weight": gate_weight, "up_weight": up_weight, "down_weight": down_weight}


def mlp_ffn_strided(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any, tp: Any) -> list[Any]:
    """Rank r holds ffn units r, r+tp, ...: those rows of gate and up, those columns of down (TP-4.4, TP-4.2)."""
    return _reduced("mlp", MLP_FFN_STRIDED, _mlp_inputs(x, gate_weight, up_weight, down_weight), tp)


def mlp_ffn_rotated(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any, tp: Any) -> list[Any]:
    """Rank r holds ffn block (r+1) % tp of gate, up and down (TP-4.4, TP-4.2)."""
    return _reduced("mlp", MLP_FFN_ROTATED, _mlp_inputs(x, gate_weight, up_weight, down_weight), tp)


def embedding_vocab_rotated(ids: Any, weight: Any, tp: Any) -> list[Any]:
    """Rank r holds padded-vocabulary block (r+1) % tp and masks by it (TP-4.5, TP-5.3)."""
    return _reduced("embedding", VOCAB_ROTATED, {"ids": ids, "weight": weight}, tp)


def embedding_vocab_strided(ids: Any, weight: Any, tp: Any) -> list[Any]:
    """Rank r holds ids r, r+tp, ... of the padded vocabulary and masks by them (TP-4.5, TP-5.3)."""
    return _reduced("embedding", VOCAB_STRIDED, {"ids": ids, "weight": weight}, tp)


def lm_head_vocab_rotated(hidden_states: Any, weight: Any, tp: Any) -> list[Any]:
    """Rank r's logits are block (r+1) % tp's; the gathered logits are un-rotated (TP-4.6, TP-5.4)."""
    return _reduced("lm_head", VOCAB_ROTATED, {"hidden_states": hidden_states, "weight": weight}, tp)


def lm_head_vocab_strided(hidden_states: Any, weight: Any, tp: Any) -> list[Any]:
    """Rank r's logits are ids r, r+tp, ...; the gathered logits are put back in id order (TP-4.6, TP-5.4)."""
    return _reduced("lm_head", VOCAB_STRIDED, {"hidden_states": hidden_states, "weight": weight}, tp)


def column_gathered_rotated(x: Any, weight: Any, bias: Any, tp: Any, gather_output: Any) -> list[Any]:
    """With gather_output rank r holds output block (r+1) % tp and re-orders after the gather (TP-4.1, TP-5.1)."""
    return _reduced("column", COLUMN_GATHERED_ROTATED,
                    {"x": x, "weight": weight, "bias": bias, "gather_output": gather_output}, tp)


def qkv_fused_q_v_k(x: Any, q_weight: Any, k_weight: Any, v_weight: Any, q_bias: Any, k_bias: Any, v_bias: Any,
                    num_heads: Any, num_kv_heads: Any, head_dim: Any, tp: Any) -> list[Any]:
    """The fused weight (and bias) stacks q, v, k and its output is split the same way (TP-4.3)."""
    inputs = {"x": x, "q_weight": q_weight, "k_weight": k_weight, "v_weight": v_weight, "q_bias": q_bias,
              "k_bias": k_bias, "v_bias": v_bias, "num_heads": num_heads, "num_kv_heads": num_kv_heads,
              "head_dim": head_dim}
    return _reduced("qkv", QKV_FUSED_Q_V_K, inputs, tp)


ranks_row_columns_reversed = _ranks_of(ROW_COLUMNS_REVERSED)
ranks_row_columns_strided = _ranks_of(ROW_COLUMNS_STRIDED)
ranks_row_bias_on_last_rank = _ranks_of(ROW_BIAS_ON_LAST_RANK)
ranks_mlp_ffn_strided = _ranks_of(MLP_FFN_STRIDED)
ranks_mlp_ffn_rotated = _ranks_of(MLP_FFN_ROTATED)
ranks_vocab_rotated = _ranks_of(VOCAB_ROTATED)
ranks_vocab_strided = _ranks_of(VOCAB_STRIDED)
ranks_column_gathered_rotated = _ranks_of(COLUMN_GATHERED_ROTATED)
ranks_qkv_fused_q_v_k = _ranks_of(QKV_FUSED_Q_V_K)
ranks_correct = _ranks_of(CORRECT)
"""The port without a defect: the tests show the oracle agrees with it, so each known-bad is rejected for its defect."""
