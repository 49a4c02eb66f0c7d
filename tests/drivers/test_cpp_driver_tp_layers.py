"""The C++ port's TP-W2 layer operations (issue 30 item 5): ranks as threads, tensors in and per-rank tensors out,
checked against unsharded numpy forwards written here (float64), at tp 1, 2, 4 and 8; and the refusals of bad input.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.drivers.wire_v2 import Raw, Worker, tag

pytestmark = pytest.mark.cpu

RNG = np.random.default_rng(30)
TPS = [1, 2, 4, 8]


def _randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _bf16(array: np.ndarray) -> Raw:
    """float32 values rounded to bfloat16 (nearest even) as the wire's uint16 bits."""
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return Raw.of(rounded, "bfloat16")


def _values(raw: Raw) -> np.ndarray:
    if raw.dtype == "bfloat16":
        return (raw.array().astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.array().astype(np.float64)


def _wire(inputs: dict[str, Any], buffers: list[bytes]) -> dict[str, Any]:
    """A map input in wire form, its arrays as `$tensor` tags."""
    items = []
    for name, value in inputs.items():
        if isinstance(value, np.ndarray):
            value = Raw.of(value)
        items.append([name, tag(value, buffers) if isinstance(value, Raw) else value])
    return {"$map": items}


def _call(worker: Worker, operation: str, **inputs: Any) -> Any:
    buffers: list[bytes] = []
    return worker.value(operation, _wire(inputs, buffers), buffers)


def _raised(worker: Worker, operation: str, **inputs: Any) -> dict[str, Any]:
    buffers: list[bytes] = []
    reply = worker.call(operation, _wire(inputs, buffers), buffers)
    assert "raised" in reply.body.get("result", {}), reply.body
    return reply.body["result"]["raised"]


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


@pytest.mark.parametrize("tp", TPS)
def test_column_linear_gives_each_rank_its_output_columns_or_all_of_them_gathered(v2_ready: Worker, tp: int) -> None:
    x, w, b = _randn(3, 16), _randn(24, 16), _randn(24)
    full = x.astype(np.float64) @ w.T.astype(np.float64) + b
    ranks = _call(v2_ready, "tp-column-linear", x=x, weight=w, bias=b, tp=tp, gather_output=False)
    width = 24 // tp
    assert len(ranks) == tp
    for r, out in enumerate(ranks):
        np.testing.assert_allclose(_values(out), full[:, r * width:(r + 1) * width], rtol=1e-5, atol=1e-5)
    gathered = _call(v2_ready, "tp-column-linear", x=x, weight=w, bias=None, tp=tp, gather_output=True)
    for out in gathered:
        np.testing.assert_allclose(_values(out), full - b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tp", TPS)
def test_row_linear_all_reduces_the_partial_sums_and_adds_the_bias_once(v2_ready: Worker, tp: int) -> None:
    x, w, b = _randn(5, 32), _randn(12, 32), _randn(12) + 3.0
    full = x.astype(np.float64) @ w.T.astype(np.float64) + b
    ranks = _call(v2_ready, "tp-row-linear", x=x, weight=w, bias=b, tp=tp)
    assert len(ranks) == tp
    for out in ranks:
        assert out.dtype == "float32" and out.shape == (5, 12)
        np.testing.assert_allclose(_values(out), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tp", TPS)
def test_qkv_linear_replicates_kv_heads_when_tp_exceeds_them(v2_ready: Worker, tp: int) -> None:
    heads, kv_heads, head_dim, hidden = 8, 2, 4, 16
    x = _randn(3, hidden)
    wq, wk, wv = _randn(heads * head_dim, hidden), _randn(kv_heads * head_dim, hidden), _randn(kv_heads * head_dim, hidden)
    bq, bk, bv = _randn(heads * head_dim), _randn(kv_heads * head_dim), _randn(kv_heads * head_dim)
    x64 = x.astype(np.float64)
    q, k, v = x64 @ wq.T + bq, x64 @ wk.T + bk, x64 @ wv.T + bv
    ranks = _call(v2_ready, "tp-qkv-linear", x=x, q_weight=wq, k_weight=wk, v_weight=wv, q_bias=bq, k_bias=bk, v_bias=bv,
                  num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, tp=tp)
    q_width, kv_heads_per_rank = heads // tp * head_dim, max(1, kv_heads // tp)
    replicas = max(1, tp // kv_heads)
    kv_width = kv_heads_per_rank * head_dim
    for r, (q_r, k_r, v_r) in enumerate(ranks):
        shard = r // replicas
        np.testing.assert_allclose(_values(q_r), q[:, r * q_width:(r + 1) * q_width], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_values(k_r), k[:, shard * kv_width:(shard + 1) * kv_width], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_values(v_r), v[:, shard * kv_width:(shard + 1) * kv_width], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tp", TPS)
def test_mlp_is_silu_gate_times_up_through_down_all_reduced(v2_ready: Worker, tp: int) -> None:
    x, gate, up, down = _randn(4, 16), _randn(32, 16), _randn(32, 16), _randn(16, 32)
    x64 = x.astype(np.float64)
    full = (_silu(x64 @ gate.T) * (x64 @ up.T)) @ down.T
    for out in _call(v2_ready, "tp-mlp", x=x, gate_weight=gate, up_weight=up, down_weight=down, tp=tp):
        np.testing.assert_allclose(_values(out), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tp", TPS)
def test_vocab_embedding_looks_every_id_up_across_the_padded_ranges(v2_ready: Worker, tp: int) -> None:
    weight = _randn(130, 8)  # padded to 192: at tp 8 ranks 6 and 7 hold padding only
    ids = np.array([0, 23, 24, 63, 64, 127, 128, 129, 5], dtype=np.int64)
    for out in _call(v2_ready, "tp-vocab-embedding", ids=ids, weight=weight, tp=tp):
        np.testing.assert_array_equal(_values(out), weight[ids].astype(np.float64))


@pytest.mark.parametrize("tp", TPS)
def test_lm_head_gathers_the_logits_in_rank_order_and_trims_the_padding(v2_ready: Worker, tp: int) -> None:
    hidden, weight = _randn(3, 8), _randn(130, 8)
    full = hidden.astype(np.float64) @ weight.T.astype(np.float64)
    for out in _call(v2_ready, "tp-lm-head", hidden_states=hidden, weight=weight, tp=tp):
        assert out.shape == (3, 130)
        np.testing.assert_allclose(_values(out), full, rtol=1e-5, atol=1e-5)


def test_bfloat16_row_linear_stays_within_bfloat16_rounding_of_the_exact_sum(v2_ready: Worker) -> None:
    x, w, b = _bf16(_randn(6, 64)), _bf16(_randn(16, 64)), _bf16(_randn(16))
    full = _values(x) @ _values(w).T + _values(b)
    for tp in TPS:
        for out in _call(v2_ready, "tp-row-linear", x=x, weight=w, bias=b, tp=tp):
            assert out.dtype == "bfloat16"
            # per rank one rounding of its partial sum, then one of the all-reduced sum: relative 2^-8 each
            np.testing.assert_allclose(_values(out), full, rtol=2 ** -7, atol=2 ** -8 * np.abs(full).max())


@pytest.mark.parametrize(("operation", "inputs", "message"), [
    ("tp-row-linear", {"x": _randn(2, 8), "weight": _randn(4, 6), "bias": None, "tp": 2},
     "tp-row-linear: weight has shape (4, 6), expected (4, 8)"),
    ("tp-row-linear", {"x": _randn(2, 6), "weight": _randn(4, 6), "bias": None, "tp": 4}, "tp-row-linear: in=6 is not divisible by tp=4"),
    ("tp-column-linear", {"x": _randn(2, 8), "weight": _randn(6, 8), "bias": _randn(5), "tp": 2, "gather_output": False},
     "tp-column-linear: bias has shape (5,), expected (6,)"),
    ("tp-column-linear", {"x": _randn(2, 8), "weight": _randn(6, 8), "bias": None, "tp": 4, "gather_output": False},
     "tp-column-linear: out=6 is not divisible by tp=4"),
    ("tp-row-linear", {"x": _randn(2, 8), "weight": _randn(4, 8), "bias": None, "tp": 9}, "tp-row-linear: tp must be an int in [1, 8] (the largest thread world this port starts), got 9"),
    ("tp-row-linear", {"x": _randn(2, 8), "weight": _bf16(_randn(4, 8)), "bias": None, "tp": 1},
     "tp-row-linear: weight has dtype bfloat16, expected float32"),
    ("tp-qkv-linear", {"x": _randn(2, 8), "q_weight": _randn(12, 8), "k_weight": _randn(4, 8), "v_weight": _randn(4, 8),
                       "q_bias": None, "k_bias": None, "v_bias": None, "num_heads": 3, "num_kv_heads": 1, "head_dim": 4,
                       "tp": 2}, "tp-qkv-linear: num_heads=3 is not divisible by tp=2"),
    ("tp-qkv-linear", {"x": _randn(2, 8), "q_weight": _randn(16, 8), "k_weight": _randn(12, 8), "v_weight": _randn(12, 8),
                       "q_bias": None, "k_bias": None, "v_bias": None, "num_heads": 4, "num_kv_heads": 3, "head_dim": 4,
                       "tp": 2}, "num_kv_heads=3 is not divisible by tp=2"),
    ("tp-vocab-embedding", {"ids": np.array([0, 130], dtype=np.int64), "weight": _randn(130, 8), "tp": 2},
     "tp-vocab-embedding: ids[1]=130 is outside the vocabulary [0, 130)"),
    ("tp-row-linear", {"x": _randn(2, 8, 1), "weight": _randn(4, 8), "bias": None, "tp": 1},
     "tp-row-linear: x must be a 2-d tensor, got (2, 8, 1)"),
    ("tp-mlp", {"x": Raw.of(np.zeros((2, 8), dtype=np.float16)), "gate_weight": _randn(4, 8), "up_weight": _randn(4, 8),
                "down_weight": _randn(8, 4), "tp": 1}, "tp-mlp: x has dtype float16; accepted: float32, bfloat16"),
    ("tp-qkv-linear", {"x": _randn(2, 8), "q_weight": _randn(8, 8), "k_weight": _randn(8, 8), "v_weight": _randn(8, 8),
                       "q_bias": _randn(8), "k_bias": None, "v_bias": _randn(8), "num_heads": 2, "num_kv_heads": 2,
                       "head_dim": 4, "tp": 1}, "come all three or none; got q_bias given, k_bias null, v_bias given"),
    ("tp-lm-head", {"hidden_states": _randn(2, 8), "weight": _randn(130, 8), "tp": 5},
     "the padded vocab 192 (vocab=130 padded to a multiple of 64) is not divisible by tp=5"),
])
def test_bad_input_is_invalid_argument_naming_the_numbers(v2_ready: Worker, operation: str, inputs: dict[str, Any],
                                                          message: str) -> None:
    raised = _raised(v2_ready, operation, **inputs)
    assert raised["type"] == "invalid-argument" and message in raised["message"], raised
