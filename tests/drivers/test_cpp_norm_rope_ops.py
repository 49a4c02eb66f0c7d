"""The C++ port's LAYERS-NORM-ROPE operations (drivers/cpp/src/ops/layers_norm_rope_ops.cpp; spec/layers-norm-rope.md)
over the wire: RMSNorm bit-equal to the float64 oracle's rounding points (NR-1.2, NR-1.3: float32 statistics rounded
once, the weight multiply in the weight's dtype, RNE casts), the rotation bit-equal to the oracle's complex
multiplication on the C++ port's own table (NR-3.2, NR-3.3), the table within its argued atol (NR-2.3), and every
refusal worded as the Python port's (NR-1.5, NR-3.6)."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch

from gates.rows.layers_norm_rope.tensors import randn
from impl.model_executor.layers.layernorm import rms_norm
from impl.model_executor.layers.rotary_embedding import rope_forward
from oracles import norm_rope
from tests.drivers.wire_v2 import Raw, Worker, tag

pytestmark = pytest.mark.cpu

BITS = {"float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16, "int64": np.int64}


def _wire(value: Any, buffers: list[bytes]) -> Any:
    """A case input in wire form: numpy arrays as `$tensor` tags (bfloat16 by its bits), mappings as `$map`, a
    one-key `$` tag ({"$float": "inf"}) as it is."""
    if isinstance(value, dict) and not (len(value) == 1 and next(iter(value)).startswith("$")):  # a tag as written
        return {"$map": [[key, _wire(item, buffers)] for key, item in value.items()]}
    if isinstance(value, np.ndarray):
        name = "bfloat16" if value.dtype == ml_dtypes.bfloat16 else value.dtype.name
        return tag(Raw.of(value.view(np.uint16) if name == "bfloat16" else value, name), buffers)
    return value


def _call(worker: Worker, operation: str, case: dict[str, Any]) -> dict[str, Any]:
    buffers: list[bytes] = []
    return worker.call(operation, _wire(case, buffers), buffers).body["result"]


def _bits(raw: Raw) -> np.ndarray:
    return raw.array().view(BITS[raw.dtype])


def _oracle_bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(BITS["bfloat16" if array.dtype == ml_dtypes.bfloat16 else array.dtype.name])


def _value(worker: Worker, operation: str, case: dict[str, Any]) -> Any:
    buffers: list[bytes] = []
    return worker.value(operation, _wire(case, buffers), buffers)


def _rms_case(dtype: str, seed: int, *, weighted: bool = True, fused: bool = False, scale: float = 1.0,
              shape: tuple[int, ...] = (4, 4096), eps: float = 1e-6) -> dict[str, Any]:
    return {"x": randn(shape, dtype, 10 * seed, scale),
            "weight": randn(shape[-1:], dtype, 10 * seed + 1, 0.1, 1.0) if weighted else None, "eps": eps,
            "residual": randn(shape, dtype, 10 * seed + 2, scale) if fused else None}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize(("weighted", "fused", "scale"), [(True, False, 1.0), (True, True, 10.0), (False, True, 1e-3),
                                                          (False, False, 100.0)])
def test_rms_norm_is_bit_equal_to_the_oracles_rounding_points(v2_ready: Worker, dtype: str, weighted: bool,
                                                              fused: bool, scale: float) -> None:
    for seed in range(3):
        case = _rms_case(dtype, seed, weighted=weighted, fused=fused, scale=scale)
        got = _value(v2_ready, "rms-norm", case)
        expected = norm_rope.rms_norm(case["x"], case["weight"], case["eps"], residual=case["residual"])
        got, expected = (got, expected) if fused else ([got], [expected])
        for port, oracle in zip(got, expected):
            assert port.dtype == dtype and port.shape == case["x"].shape
            assert np.array_equal(_bits(port), _oracle_bits(oracle)), (dtype, seed)


def test_rms_norm_any_leading_shape_is_rows_and_a_float32_weight_keeps_its_dtype(v2_ready: Worker) -> None:
    x = randn((2, 3, 64), "bfloat16", 7)
    weight = randn((64,), "float32", 8, 0.1, 1.0)
    got = _value(v2_ready, "rms-norm", {"x": x, "weight": weight, "eps": 1e-5, "residual": None})
    expected = norm_rope.rms_norm(x, weight, 1e-5)
    assert got.dtype == "bfloat16" and got.shape == (2, 3, 64) and np.array_equal(_bits(got), _oracle_bits(expected))


def _python_refusal(call: Any) -> str:
    with pytest.raises(ValueError) as raised:
        call()
    return str(raised.value)


@pytest.mark.parametrize("case", [
    {"x": randn((), "float32", 1), "weight": None, "eps": 1e-6, "residual": None},
    {"x": randn((2, 0), "float32", 1), "weight": None, "eps": 1e-6, "residual": None},
    {"x": randn((2, 8), "float16", 1), "weight": randn((7,), "float16", 2), "eps": 1e-6, "residual": None},
    {"x": randn((2, 8), "float16", 1), "weight": None, "eps": 1e-6, "residual": randn((3, 8), "float16", 2)},
    {"x": randn((2, 8), "float32", 1), "weight": None, "eps": -1e-6, "residual": None},
    {"x": randn((2, 8), "float32", 1), "weight": None, "eps": float("inf"), "residual": None},
    {"x": randn((2, 8), "float32", 1), "weight": None, "eps": float("nan"), "residual": None},
])
def test_rms_norm_refusals_are_the_python_ports_words(v2_ready: Worker, case: dict[str, Any]) -> None:
    torch_case = {k: torch.from_numpy(v.astype(np.float32) if v.dtype == ml_dtypes.bfloat16 else v.copy())
                  if isinstance(v, np.ndarray) else v for k, v in case.items()}
    message = _python_refusal(lambda: rms_norm(torch_case["x"], torch_case["weight"], torch_case["eps"],
                                               residual=torch_case["residual"]))
    wire_case = {**case, "eps": {"$float": repr(case["eps"])} if not np.isfinite(case["eps"]) else case["eps"]}
    raised = _call(v2_ready, "rms-norm", wire_case)["raised"]
    assert raised["type"] == "invalid-argument" and raised["message"] == message


def test_a_tensor_of_another_dtype_is_refused_naming_it(v2_ready: Worker) -> None:
    raised = _call(v2_ready, "rms-norm", {"x": np.zeros((2, 4), np.int32), "weight": None, "eps": 1e-6,
                                          "residual": None})["raised"]
    assert raised["type"] == "invalid-argument" and "x is a int32 tensor" in raised["message"]
    raised = _call(v2_ready, "rotary-embedding", {"positions": np.zeros(2, np.int32), "query": randn((2, 8), "float32", 1),
                                                  "key": None, "head_size": 8, "rotary_dim": 8, "max_position": 4,
                                                  "base": 10000.0, "neox": True})["raised"]
    assert "positions must be an int64 tensor, got int32" in raised["message"]


@pytest.mark.parametrize(("rotary_dim", "max_position", "base"), [(128, 8192, 500000.0), (256, 8192, 1e6), (2, 1, 1e4),
                                                                  (66, 64, 100.0), (8, 64, 1.5)])
def test_the_cos_sin_table_is_float32_within_the_gates_atol_of_the_exact_one(v2_ready: Worker, rotary_dim: int,
                                                                            max_position: int, base: float) -> None:
    got = _value(v2_ready, "rope-cos-sin-cache", {"rotary_dim": rotary_dim, "max_position": max_position, "base": base})
    exact = norm_rope.cos_sin_table(rotary_dim, max_position, base)
    assert got.dtype == "float32" and got.shape == (max_position, rotary_dim)
    error = np.abs(got.array().astype(np.float64) - exact)
    # NR-2.3: the float32 angle p·inv_freq is off by up to p·inv_freq·(2^-24 + 2^-23), cos and sin by as much
    bound = (np.arange(max_position)[:, None] * 3 * 2.0 ** -24 + 2.0 ** -24)
    assert (error <= np.tile(bound, (1, rotary_dim))).all() and error.max() <= 1.5e-3


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize(("neox", "head_size", "rotary_dim", "kv_heads"), [(True, 128, 128, 2), (False, 64, 64, 1),
                                                                          (True, 128, 64, 1), (False, 256, 64, 0)])
def test_the_rotation_is_bit_equal_to_the_oracle_on_the_ports_own_table(v2_ready: Worker, dtype: str, neox: bool,
                                                                        head_size: int, rotary_dim: int,
                                                                        kv_heads: int) -> None:
    max_position, base = 4096, 10000.0
    positions = np.array([4095, 0, 7, 7, 1000], dtype=np.int64)
    case = {"positions": positions, "query": randn((5, 2 * head_size), dtype, 34, 30.0),
            "key": randn((5, kv_heads * head_size), dtype, 35, 3.0) if kv_heads else None, "head_size": head_size,
            "rotary_dim": rotary_dim, "max_position": max_position, "base": base, "neox": neox}
    query, key = _value(v2_ready, "rotary-embedding", case)
    table = _value(v2_ready, "rope-cos-sin-cache", {"rotary_dim": rotary_dim, "max_position": max_position,
                                                    "base": base}).array()
    rows = table.astype(case["query"].dtype)[positions]
    cos, sin = rows[:, : rotary_dim // 2], rows[:, rotary_dim // 2:]
    assert np.array_equal(_bits(query), _oracle_bits(norm_rope._rotated(case["query"], cos, sin, head_size, rotary_dim, neox)))
    if kv_heads:
        assert np.array_equal(_bits(key), _oracle_bits(norm_rope._rotated(case["key"], cos, sin, head_size, rotary_dim, neox)))
    else:
        assert key is None


@pytest.mark.parametrize(("change", "rotary_dim"), [({"rotary_dim": 66}, 66), ({"rotary_dim": 33}, 33),
                                                    ({"positions": np.array([3, 16])}, 8), ({"positions": np.array([-1, 2])}, 8),
                                                    ({"query": randn((2, 12), "float32", 1)}, 8),
                                                    ({"key": randn((2, 12), "float32", 1)}, 8),
                                                    ({"max_position": 0}, 8), ({"base": 1.0}, 8)])
def test_rope_refusals_are_the_python_ports_words(v2_ready: Worker, change: dict[str, Any], rotary_dim: int) -> None:
    case = {"positions": np.array([0, 9]), "query": randn((2, 8), "float32", 2), "key": randn((2, 8), "float32", 3),
            "head_size": 8, "rotary_dim": rotary_dim, "max_position": 16, "base": 10000.0, "neox": True, **change}
    if rotary_dim == 66:
        case.update(query=randn((2, 64), "float32", 2), key=None, head_size=64)
    message = _python_refusal(lambda: rope_forward(
        torch.from_numpy(case["positions"]), torch.from_numpy(case["query"].copy()),
        None if case["key"] is None else torch.from_numpy(case["key"].copy()),
        **{k: case[k] for k in ("head_size", "rotary_dim", "max_position", "base", "neox")}))
    raised = _call(v2_ready, "rotary-embedding", case)["raised"]
    assert raised["type"] == "invalid-argument" and raised["message"] == message
