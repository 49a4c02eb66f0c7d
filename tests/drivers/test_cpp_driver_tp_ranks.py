"""The C++ port's tp-layer-ranks (spec/tensor-parallel.md TP-5.7): each rank's held blocks, the bias it adds, its
outputs before the collective and its vocabulary mask, for every layer kind at tp 1, 2, 3 (where divisible), 4 and
8, checked against per-rank states derived here from vLLM's sharding rules (float64 numpy); and its refusals: the
matching layer operation's messages, an unknown layer, an unknown or missing input key."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.drivers.test_cpp_driver_tp_layers import _bf16, _randn, _silu, _values
from tests.drivers.wire_v2 import Raw, Worker, tag

pytestmark = pytest.mark.cpu

TPS = [1, 2, 3, 4, 8]
Span = list[int]


def _wire(value: Any, buffers: list[bytes]) -> Any:
    """A value in wire form: maps (nested too) as `$map`, arrays as `$tensor` tags."""
    if isinstance(value, dict):
        return {"$map": [[key, _wire(item, buffers)] for key, item in value.items()]}
    if isinstance(value, np.ndarray):
        value = Raw.of(value)
    return tag(value, buffers) if isinstance(value, Raw) else value


def _ranks(worker: Worker, layer: str, tp: int, **inputs: Any) -> list[dict[str, Any]]:
    buffers: list[bytes] = []
    return worker.value("tp-layer-ranks", _wire({"layer": layer, "inputs": inputs, "tp": tp}, buffers), buffers)


def _raised(worker: Worker, layer: Any, inputs: Any, tp: Any) -> dict[str, Any]:
    buffers: list[bytes] = []
    reply = worker.call("tp-layer-ranks", _wire({"layer": layer, "inputs": inputs, "tp": tp}, buffers), buffers)
    assert "raised" in reply.body.get("result", {}), reply.body
    return reply.body["result"]["raised"]


def _block(size: int, tp: int, rank: int) -> Span:
    width = size // tp
    return [rank * width, (rank + 1) * width]


def _cut(array: np.ndarray, rows: Span, cols: Span | None = None) -> np.ndarray:
    return array[rows[0]:rows[1]] if cols is None else array[rows[0]:rows[1], cols[0]:cols[1]]


def _close(raw: Raw, expected: np.ndarray, dtype: str = "float32") -> None:
    assert raw.dtype == dtype and raw.shape == expected.shape, (raw.dtype, raw.shape, expected.shape)
    np.testing.assert_allclose(_values(raw), expected, rtol=1e-5, atol=1e-5)


def _check_held(held: dict[str, Any], parts: list[dict[str, Any]], padding: int, tensor: np.ndarray) -> None:
    assert held["parts"] == parts and held["padding_rows"] == padding
    _close(held["tensor"], tensor)


def _check_bias(bias: dict[str, Any] | None, parts: list[dict[str, Any]] | None, tensor: np.ndarray | None) -> None:
    if parts is None:
        assert bias is None
        return
    assert bias is not None and bias["parts"] == parts
    _close(bias["tensor"], tensor)


def test_every_rank_answers_exactly_the_four_keys(v2_ready: Worker) -> None:
    ranks = _ranks(v2_ready, "row", 2, x=_randn(2, 4), weight=_randn(3, 4), bias=None)
    assert [list(state) for state in ranks] == [["held", "bias", "partials", "mask"]] * 2
    assert [list(state["held"]["weight"]) for state in ranks] == [["parts", "padding_rows", "tensor"]] * 2


@pytest.mark.parametrize("tp", TPS)
def test_column_ranks_hold_their_output_rows_and_the_same_bias_rows(v2_ready: Worker, tp: int) -> None:
    x, w, b = _randn(3, 16), _randn(24, 16), _randn(24)
    for gather in (False, True):
        ranks = _ranks(v2_ready, "column", tp, x=x, weight=w, bias=b, gather_output=gather)
        assert len(ranks) == tp
        for r, state in enumerate(ranks):
            rows = _block(24, tp, r)
            _check_held(state["held"]["weight"], [{"source": "weight", "rows": rows, "cols": [0, 16]}], 0, _cut(w, rows))
            _check_bias(state["bias"], [{"source": "bias", "rows": rows}], _cut(b, rows))
            # before the gather: the rank's columns only, with or without gather_output
            _close(state["partials"]["out"], x.astype(np.float64) @ _cut(w, rows).T.astype(np.float64) + _cut(b, rows))
            assert list(state["partials"]) == ["out"] and state["mask"] is None
    assert all(state["bias"] is None for state in _ranks(v2_ready, "column", tp, x=x, weight=w, bias=None,
                                                           gather_output=False))


@pytest.mark.parametrize("tp", TPS)
def test_row_ranks_hold_their_input_columns_and_rank_0_alone_the_bias(v2_ready: Worker, tp: int) -> None:
    x, w, b = _randn(5, 24), _randn(12, 24), _randn(12) + 3.0
    for r, state in enumerate(_ranks(v2_ready, "row", tp, x=x, weight=w, bias=b)):
        cols = _block(24, tp, r)
        _check_held(state["held"]["weight"], [{"source": "weight", "rows": [0, 12], "cols": cols}], 0,
                    _cut(w, [0, 12], cols))
        _check_bias(state["bias"], [{"source": "bias", "rows": [0, 12]}] if r == 0 else None, b)
        partial = x[:, cols[0]:cols[1]].astype(np.float64) @ _cut(w, [0, 12], cols).T.astype(np.float64)
        _close(state["partials"]["out"], partial + (b if r == 0 else 0.0))
        assert state["mask"] is None


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_qkv_ranks_hold_their_query_heads_and_kv_shard_rank_over_replicas(v2_ready: Worker, tp: int) -> None:
    heads, kv_heads, head_dim, hidden = 8, 2, 3, 10
    x = _randn(4, hidden)
    wq, wk, wv = _randn(heads * head_dim, hidden), _randn(kv_heads * head_dim, hidden), _randn(kv_heads * head_dim, hidden)
    bq, bk, bv = _randn(heads * head_dim), _randn(kv_heads * head_dim), _randn(kv_heads * head_dim)
    ranks = _ranks(v2_ready, "qkv", tp, x=x, q_weight=wq, k_weight=wk, v_weight=wv, q_bias=bq, k_bias=bk, v_bias=bv,
                   num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim)
    replicas, kv_width = max(1, tp // kv_heads), max(1, kv_heads // tp) * head_dim
    x64 = x.astype(np.float64)
    for r, state in enumerate(ranks):
        q_rows, kv_rows = _block(heads * head_dim, tp, r), [r // replicas * kv_width, (r // replicas + 1) * kv_width]
        whole = [0, hidden]
        parts = [{"source": "q_weight", "rows": q_rows, "cols": whole}, {"source": "k_weight", "rows": kv_rows, "cols": whole},
                 {"source": "v_weight", "rows": kv_rows, "cols": whole}]
        _check_held(state["held"]["qkv"], parts, 0, np.concatenate([_cut(wq, q_rows), _cut(wk, kv_rows), _cut(wv, kv_rows)]))
        _check_bias(state["bias"], [{"source": "q_bias", "rows": q_rows}, {"source": "k_bias", "rows": kv_rows},
                                    {"source": "v_bias", "rows": kv_rows}],
                    np.concatenate([_cut(bq, q_rows), _cut(bk, kv_rows), _cut(bv, kv_rows)]))
        _close(state["partials"]["q"], x64 @ _cut(wq, q_rows).T + _cut(bq, q_rows))
        _close(state["partials"]["k"], x64 @ _cut(wk, kv_rows).T + _cut(bk, kv_rows))
        _close(state["partials"]["v"], x64 @ _cut(wv, kv_rows).T + _cut(bv, kv_rows))


@pytest.mark.parametrize("tp", TPS)
def test_mlp_ranks_hold_the_same_ffn_block_of_gate_up_and_down(v2_ready: Worker, tp: int) -> None:
    hidden, ffn = 8, 24
    x, gate, up, down = _randn(3, hidden), _randn(ffn, hidden), _randn(ffn, hidden), _randn(hidden, ffn)
    x64 = x.astype(np.float64)
    for r, state in enumerate(_ranks(v2_ready, "mlp", tp, x=x, gate_weight=gate, up_weight=up, down_weight=down)):
        rows = _block(ffn, tp, r)
        _check_held(state["held"]["gate_up"], [{"source": "gate_weight", "rows": rows, "cols": [0, hidden]},
                                               {"source": "up_weight", "rows": rows, "cols": [0, hidden]}], 0,
                    np.concatenate([_cut(gate, rows), _cut(up, rows)]))
        _check_held(state["held"]["down"], [{"source": "down_weight", "rows": [0, hidden], "cols": rows}], 0,
                    _cut(down, [0, hidden], rows))
        g, u = x64 @ _cut(gate, rows).T, x64 @ _cut(up, rows).T
        _close(state["partials"]["gate_up"], np.concatenate([g, u], axis=1))
        _close(state["partials"]["down"], (_silu(g) * u) @ _cut(down, [0, hidden], rows).T)
        assert state["bias"] is None and state["mask"] is None


@pytest.mark.parametrize("tp", TPS)
def test_vocab_ranks_hold_their_loaded_rows_then_zero_padding_and_mask_the_others(v2_ready: Worker, tp: int) -> None:
    vocab, hidden = 130, 8  # padded to 192: at tp 8 ranks 6 and 7 hold padding only
    weight, states = _randn(vocab, hidden), _randn(3, hidden)
    ids = np.array([0, 23, 24, 63, 64, 127, 128, 129, 5], dtype=np.int64)
    embedding = _ranks(v2_ready, "embedding", tp, ids=ids, weight=weight)
    head = _ranks(v2_ready, "lm_head", tp, hidden_states=states, weight=weight)
    per_rank = 192 // tp
    for r, (embed, logits) in enumerate(zip(embedding, head)):
        loaded = [min(r * per_rank, vocab), min((r + 1) * per_rank, vocab)]
        padding = per_rank - (loaded[1] - loaded[0])
        shard = np.concatenate([_cut(weight, loaded), np.zeros((padding, hidden), np.float32)])
        parts = [{"source": "weight", "rows": loaded, "cols": [0, hidden]}]
        for state in (embed, logits):
            _check_held(state["held"]["weight"], parts, padding, shard)
            assert state["bias"] is None
        mask = (ids >= loaded[0]) & (ids < loaded[1])
        assert embed["mask"].dtype == "bool" and np.array_equal(embed["mask"].array(), mask)
        _close(embed["partials"]["rows"], np.where(mask[:, None], weight[np.clip(ids, 0, vocab - 1)], 0.0))
        _close(logits["partials"]["logits"], states.astype(np.float64) @ shard.T.astype(np.float64))
        assert logits["mask"] is None


def test_bfloat16_ranks_answer_in_bfloat16(v2_ready: Worker) -> None:
    x, w, b = _bf16(_randn(3, 8)), _bf16(_randn(4, 8)), _bf16(_randn(4))
    for r, state in enumerate(_ranks(v2_ready, "row", 2, x=x, weight=w, bias=b)):
        cols = _block(8, 2, r)
        assert state["held"]["weight"]["tensor"].dtype == "bfloat16"
        np.testing.assert_array_equal(_values(state["held"]["weight"]["tensor"]), _values(w)[:, cols[0]:cols[1]])
        partial = _values(x)[:, cols[0]:cols[1]] @ _values(w)[:, cols[0]:cols[1]].T + (_values(b) if r == 0 else 0.0)
        out = state["partials"]["out"]
        assert out.dtype == "bfloat16"
        np.testing.assert_allclose(_values(out), partial, rtol=2 ** -7, atol=2 ** -8 * np.abs(partial).max())


@pytest.mark.parametrize("layer, inputs, tp, message", [
    ("conv", {}, 2, "tp-layer-ranks: layer must be one of column, row, qkv, mlp, embedding, lm_head, got 'conv'"),
    (3, {}, 2, "tp-layer-ranks: layer must be one of column, row, qkv, mlp, embedding, lm_head, got 3"),
    ("row", {"x": None, "w": None, "bias": None}, 2, "tp-layer-ranks: inputs of layer row: unknown key 'w'"),
    ("row", {"x": None, "weight": None}, 2, "tp-layer-ranks: inputs of layer row: missing key 'bias'"),
    ("row", {"x": None, "weight": None, "bias": None, "tp": 2}, 2, "tp-layer-ranks: inputs of layer row: unknown key 'tp'"),
    ("lm_head", [1], 2, "tp-layer-ranks: inputs of layer lm_head must be a map of hidden_states, weight, got list"),
    ("row", {"x": np.zeros((2, 60), np.float32), "weight": np.zeros((3, 60), np.float32), "bias": None}, 8,
     "tp-row-linear: in=60 is not divisible by tp=8"),
    ("column", {"x": np.zeros((2, 4), np.float32), "weight": np.zeros((3, 4), np.float32), "bias": None,
                "gather_output": False}, 9, "tp-column-linear: tp must be an int in [1, 8]"),
    ("mlp", {"x": np.zeros((2, 4), np.float32), "gate_weight": np.zeros((6, 4), np.float32),
             "up_weight": np.zeros((6, 4), np.float32), "down_weight": np.zeros((4, 6), np.float32)}, 4,
     "tp-mlp: ffn=6 is not divisible by tp=4"),
    ("embedding", {"ids": np.array([130], np.int64), "weight": np.zeros((130, 2), np.float32)}, 2,
     "tp-vocab-embedding: ids[0]=130 is outside the vocabulary [0, 130)"),
    ("lm_head", {"hidden_states": np.zeros((1, 2), np.float32), "weight": np.zeros((130, 2), np.float32)}, 5,
     "the padded vocab 192 (vocab=130 padded to a multiple of 64) is not divisible by tp=5"),
    ("qkv", {"x": np.zeros((1, 2), np.float32), "q_weight": np.zeros((6, 2), np.float32),
             "k_weight": np.zeros((3, 2), np.float32), "v_weight": np.zeros((3, 2), np.float32), "q_bias": None,
             "k_bias": None, "v_bias": None, "num_heads": 2, "num_kv_heads": 1, "head_dim": 3}, 4,
     "tp-qkv-linear: num_heads=2 is not divisible by tp=4"),
])
def test_refusals_name_the_layer_operation_or_the_key(v2_ready: Worker, layer: Any, inputs: Any, tp: int,
                                                      message: str) -> None:
    raised = _raised(v2_ready, layer, inputs, tp)
    assert raised["type"] == "invalid-argument" and message in raised["message"], raised
