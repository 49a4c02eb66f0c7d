"""The C++ port's planted defects (issue 30 item 5): -DGATES_PLANT_ROW_BIAS_EVERY_RANK makes every rank of the
row-parallel layer add the bias, so the all-reduced output holds it tp times. The driver built with it (a folder
of its own, build/cpp-plant-row-bias) answers tp-row-linear wrong at tp > 1 and right at tp 1; the driver built
without it answers right at every tp. `gates run --impl cpp BACKEND-DISTRIBUTED-TP` with the flag is the gate-level
check (docs/gating-a-port.md)."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

from _vllm_gates.wire.channel import PROTOCOL_VERSION
from tests.drivers.conftest import ROOT, build_driver
from tests.drivers.test_cpp_driver_tp_layers import _call, _values
from tests.drivers.wire_v2 import Worker

pytestmark = pytest.mark.cpu

RNG = np.random.default_rng(5)
X, WEIGHT, BIAS = (RNG.standard_normal(shape).astype(np.float32) for shape in ((3, 8), (4, 8), (4,)))
EXACT = X.astype(np.float64) @ WEIGHT.T.astype(np.float64) + BIAS


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    driver = build_driver(ROOT / "build" / "cpp-plant-row-bias", "-DGATES_PLANT_ROW_BIAS_EVERY_RANK")
    worker = Worker(driver, tmp_path_factory.mktemp("plant") / "worker.log", ROOT)
    assert worker.hello(PROTOCOL_VERSION)["op"] == "ready"
    yield worker
    worker.close()


def _row_linear(worker: Worker, tp: int) -> list[np.ndarray]:
    return [_values(out) for out in _call(worker, "tp-row-linear", x=X, weight=WEIGHT, bias=BIAS, tp=tp)]


@pytest.mark.parametrize("tp", [2, 4])
def test_the_planted_row_bias_is_added_on_every_rank(planted: Worker, v2_ready: Worker, tp: int) -> None:
    for out in _row_linear(planted, tp):
        np.testing.assert_allclose(out, EXACT + (tp - 1) * BIAS, rtol=1e-5, atol=1e-5)
    for out in _row_linear(v2_ready, tp):
        np.testing.assert_allclose(out, EXACT, rtol=1e-5, atol=1e-5)


def test_the_planted_row_bias_is_invisible_at_tp_1(planted: Worker) -> None:
    np.testing.assert_allclose(_row_linear(planted, 1)[0], EXACT, rtol=1e-5, atol=1e-5)
