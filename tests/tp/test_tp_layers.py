"""TP-W2's sharded layers (issue 30 items 3 and 4): the defect a plain exact-shape check misses but the numeric gate
catches (bias added on every rank), and the oracle's KV heads (read off grouped-query attention) against the shard
plan's replica formula."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
import torch

from _vllm_gates.values.policies import Policy
from _vllm_gates.values.tolerance import compare_under
from gates.rows.backend_distributed_tp.known_bad.w2_linear import row_bias_on_every_rank
from impl.distributed.shard_plan import shard_plan_of
from impl.model_executor.layers.tp_operations import tp_row_linear
from oracles.tp_layers import qkv_linear, row_linear

pytestmark = [pytest.mark.cpu, pytest.mark.dist]


def _normal(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> np.ndarray:
    return (scale * np.random.Generator(np.random.PCG64(seed)).standard_normal(shape)).astype(np.float32)


def _numpy(results: list[torch.Tensor]) -> list[np.ndarray]:
    return [result.numpy() for result in results]


@pytest.mark.parametrize("tp", [2, 8])
def test_bias_on_every_rank_has_the_right_shapes_but_fails_the_numeric_comparison(tp: int) -> None:
    x, weight, bias = _normal((5, 64), 1), _normal((64, 64), 2, 0.125), _normal((64,), 3)
    expected = row_linear(x, weight, bias, tp)
    inputs = (torch.from_numpy(x), torch.from_numpy(weight), torch.from_numpy(bias), tp)
    wrong, right = _numpy(row_bias_on_every_rank(*inputs)), _numpy(tp_row_linear(*inputs))
    shapes = [(array.shape, array.dtype) for array in expected]
    assert [(array.shape, array.dtype) for array in wrong] == shapes  # a shape-only check accepts it
    assert not compare_under(Policy("allclose"), wrong, expected).passed  # the gate's comparison does not
    assert compare_under(Policy("allclose"), right, expected).passed


@pytest.mark.parametrize("heads, kv_heads, tp", [
    (heads, kv, tp) for heads, kv, tp in itertools.product([4, 8, 16], [1, 2, 4, 8], [1, 2, 4, 8])
    if heads % kv == 0 and heads % tp == 0])
def test_the_oracles_kv_heads_are_the_shard_plans_kv_shards(heads: int, kv_heads: int, tp: int) -> None:
    """Each rank's k equals the k rows of the KV shard the plan names, though the oracle never computes replicas."""
    dim, hidden = 2, 4
    x = np.eye(hidden, dtype=np.float32)
    k_weight = np.arange(kv_heads * dim * hidden, dtype=np.float32).reshape(kv_heads * dim, hidden)
    q_weight = np.zeros((heads * dim, hidden), np.float32)
    per_rank = qkv_linear(x, q_weight, k_weight, k_weight.copy(), None, None, None, heads, kv_heads, dim, tp)
    geometry = {"hidden": hidden, "num_heads": heads, "num_kv_heads": kv_heads, "head_dim": dim, "ffn": tp, "vocab": 64}
    for rank, (q, k, v) in zip(shard_plan_of(geometry, tp)["ranks"], per_rank):
        start, end = rank["weights"]["qkv_proj"]["parts"][1]["rows"]
        assert np.array_equal(k, k_weight[start:end].T) and np.array_equal(v, k)
        assert q.shape == (hidden, heads // tp * dim)


def test_the_oracle_rounds_to_the_input_dtype_once() -> None:
    x = _normal((3, 8), 4).astype(ml_dtypes.bfloat16)
    weight = _normal((8, 8), 5, 0.35).astype(ml_dtypes.bfloat16)
    exact = x.astype(np.float64) @ weight.astype(np.float64).T
    for result in row_linear(x, weight, None, 2):
        assert result.dtype == ml_dtypes.bfloat16 and np.array_equal(result, exact.astype(ml_dtypes.bfloat16))
