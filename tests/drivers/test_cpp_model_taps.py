"""The C++ port's decoder-taps beside the Python port's (spec/model-taps.md MT-1.x to MT-3.x): the same taps in the
same order, dtypes and shapes in float32, bfloat16 and float16 (the gate judges float32 alone), the values of the same
forward in that dtype, and a feed read at its feed points in the compute dtype. The gate (`gates run MODEL-TAPS --impl
cpp`) judges the float32 taps against the oracle and the refusals."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.drivers.test_cpp_driver_tp_layers import _values
from tests.drivers.wire_v2 import Raw, Worker, tag

pytestmark = pytest.mark.cpu

FIXTURES = Path(__file__).resolve().parents[2] / "gates" / "rows" / "model_taps" / "fixtures"
FOUR = {"layers": 4, "hidden": 64, "num_heads": 8, "num_kv_heads": 2, "head_dim": 8, "ffn": 64, "vocab": 130,
        "tie_word_embeddings": False, "rms_norm_eps": 1e-2, "rope_theta": 10000.0, "max_position": 128}
IDS = np.array([3, 129, 64, 0, 77, 120, 17, 101], dtype=np.int64)

AGREEMENT = 2e-3
"""The largest relative L2 distance of a tap of the C++ port from the Python port's in bfloat16 or float16. Measured:
0 in bfloat16 (the same bits), up to 7.9e-4 in float16 at tp 1 (one element of layers.0.mlp.out a float16 ulp
apart, where torch's summation order rounds the other way, and what follows it); the same forward in float32 is
further than this from the Python port's bfloat16 taps."""


@pytest.fixture(scope="module")
def four() -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(FIXTURES / "qwen3_four_layers.safetensors"))


def _wire(value: Any, buffers: list[bytes]) -> Any:
    """A nested input in wire form: mappings as `$map`, arrays as `$tensor` tags."""
    if isinstance(value, np.ndarray):
        return tag(Raw.of(value), buffers)
    if isinstance(value, dict):
        return {"$map": [[key, _wire(item, buffers)] for key, item in value.items()]}
    return value


def _cpp_taps(worker: Worker, **inputs: Any) -> dict[str, Raw]:
    buffers: list[bytes] = []
    return worker.value("decoder-taps", _wire(inputs, buffers), buffers)


def _python_taps(**inputs: Any) -> dict[str, np.ndarray]:
    from impl.model_executor.models.qwen3_taps import decoder_taps

    return {name: tensor for name, tensor in decoder_taps(**inputs).items()}


def _distance(actual: np.ndarray, expected: np.ndarray) -> float:
    norm = np.linalg.norm(expected)
    return float(np.linalg.norm(actual - expected) / norm) if norm else float(np.linalg.norm(actual))


@pytest.mark.parametrize(("dtype", "tp"), [("bfloat16", 1), ("bfloat16", 2), ("float16", 1), ("float32", 2)])
def test_the_taps_are_the_python_ports_in_every_dtype(v2_ready: Worker, four: dict[str, np.ndarray], dtype: str,
                                                      tp: int) -> None:
    cpp = _cpp_taps(v2_ready, config=FOUR, weights=four, ids=IDS, tp=tp, dtype=dtype)
    python = _python_taps(config=FOUR, weights=four, ids=IDS, tp=tp, dtype=dtype)
    assert list(cpp) == list(python)
    assert {name: (raw.dtype, raw.shape) for name, raw in cpp.items()} == {
        name: (str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape)) for name, tensor in python.items()}
    far = {name: _distance(_values(raw), python[name].double().numpy()) for name, raw in cpp.items()}
    assert {name: d for name, d in far.items() if d > AGREEMENT} == {}


def test_the_dtype_is_the_forwards_not_a_cast_of_its_result(v2_ready: Worker, four: dict[str, np.ndarray]) -> None:
    wide = _cpp_taps(v2_ready, config=FOUR, weights=four, ids=IDS, tp=1, dtype="float32")
    python = _python_taps(config=FOUR, weights=four, ids=IDS, tp=1, dtype="bfloat16")
    far = {name: _distance(_values(raw), python[name].double().numpy()) for name, raw in wide.items()}
    assert max(far.values()) > 2 * AGREEMENT, far


def test_a_fed_array_is_read_in_the_compute_dtype(v2_ready: Worker, four: dict[str, np.ndarray]) -> None:
    stream = np.random.default_rng(3).standard_normal((8, 64)) * 4.0  # float64
    feed = {"layers.1.attn.in": stream, "norm.in": stream.astype(np.float32)}
    cpp = _cpp_taps(v2_ready, config=FOUR, weights=four, ids=IDS, tp=2, dtype="bfloat16", feed=feed)
    python = _python_taps(config=FOUR, weights=four, ids=IDS, tp=2, dtype="bfloat16", feed=feed)
    for point in feed:
        np.testing.assert_array_equal(_values(cpp[point]), python[point].double().numpy())
    free = _cpp_taps(v2_ready, config=FOUR, weights=four, ids=IDS, tp=2, dtype="bfloat16")
    np.testing.assert_array_equal(_values(cpp["layers.0.out"]), _values(free["layers.0.out"]))  # before the feed: free
    assert _distance(_values(cpp["layers.1.out"]), _values(free["layers.1.out"])) > 0.5  # after it: the fed stream's


PARTIAL_AGREEMENT = 1e-5
"""The largest relative L2 distance of a rank's partial (MT-1.6) of the C++ port from the Python port's in float32.
Measured: up to 1.03e-6 at tp 2 and 1.02e-6 at tp 4 (the same products, summed in another order; the reduced taps are
up to 8.5e-7 apart)."""


def _partials(taps: dict[str, Any]) -> list[str]:
    return [name for name in taps if ".rank" in name]


@pytest.mark.parametrize("tp", [2, 4])
def test_the_ranks_partials_are_the_python_ports(v2_ready: Worker, four: dict[str, np.ndarray], tp: int) -> None:
    cpp = _cpp_taps(v2_ready, config=FOUR, weights=four, ids=IDS, tp=tp, dtype="float32", rank_partials=True)
    python = _python_taps(config=FOUR, weights=four, ids=IDS, tp=tp, dtype="float32", rank_partials=True)
    assert list(cpp) == list(python)
    assert len(_partials(python)) == 2 * FOUR["layers"] * tp
    assert {name: (raw.dtype, raw.shape) for name, raw in cpp.items()} == {
        name: (str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape)) for name, tensor in python.items()}
    far = {name: _distance(_values(cpp[name]), python[name].double().numpy()) for name in _partials(python)}
    assert {name: d for name, d in far.items() if d > PARTIAL_AGREEMENT} == {}


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_the_cpp_partials_sum_to_their_reduced_tap(v2_ready: Worker, four: dict[str, np.ndarray], tp: int) -> None:
    taps = _cpp_taps(v2_ready, config=FOUR, weights=four, ids=IDS, tp=tp, dtype="float32", rank_partials=True)
    for reduced in ("layers.0.attn.out", "layers.3.mlp.out"):
        partials = [_values(taps[f"{reduced}.rank{r}"]) for r in range(tp)]
        if tp == 1:
            np.testing.assert_array_equal(partials[0], _values(taps[reduced]))
        else:
            assert _distance(np.sum(partials, axis=0), _values(taps[reduced])) < 1e-6  # measured: up to 4.5e-8
            assert all(_distance(partial, _values(taps[reduced])) > 0.1 for partial in partials)  # each a share only
    plain = _cpp_taps(v2_ready, config=FOUR, weights=four, ids=IDS, tp=tp, dtype="float32", rank_partials=False)
    assert list(plain) == [name for name in taps if ".rank" not in name]


@pytest.mark.parametrize("value", [1, "yes", None, 0.0])
def test_rank_partials_that_is_not_a_bool_is_refused_in_the_python_ports_words(
        v2_ready: Worker, four: dict[str, np.ndarray], value: Any) -> None:
    with pytest.raises(TypeError) as python:
        _python_taps(config=FOUR, weights=four, ids=IDS, tp=2, rank_partials=value)
    buffers: list[bytes] = []
    wire = _wire({"config": FOUR, "weights": four, "ids": IDS, "tp": 2, "rank_partials": value}, buffers)
    raised = v2_ready.call("decoder-taps", wire, buffers).body["result"]["raised"]
    assert (raised["type"], raised["message"]) == ("invalid-argument", str(python.value))
