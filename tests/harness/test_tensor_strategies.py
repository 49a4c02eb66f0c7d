"""Hypothesis strategies of tensors (issue 29 item 2; `vllm_gates.strategies`): read-only arrays of every carried
dtype, in their bounds, special values only when asked for; and a failing property over tensors shrinks to a small
example printed as a paste-ready case in the tensor spelling which, pasted back, fails the same way (a large one is
named, too large to write, beside the rerun line)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings

from tests.harness.test_calls_ahead import _pytest
from tests.harness.test_case_tensors import _project
from vllm_gates.strategies import DTYPES, FLOAT_BOUND, shapes, tensors

pytestmark = pytest.mark.cpu

QUICK = settings(max_examples=200, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _floats(array: np.ndarray) -> np.ndarray:
    return array.astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_is_drawn_read_only_within_its_shape_and_default_bounds(dtype):
    wanted = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)

    @QUICK
    @given(tensors(dtype, shapes(max_dims=2, max_side=5)))
    def check(array):
        assert array.dtype == wanted and not array.flags.writeable
        assert 1 <= array.ndim <= 2 and all(1 <= side <= 5 for side in array.shape)
        if dtype in ("float16", "bfloat16", "float32", "float64"):
            values = _floats(array)
            assert np.isfinite(values).all() and (np.abs(values) <= FLOAT_BOUND).all()
            assert not np.signbit(values[values == 0]).any(), "-0.0 only with zero_signs"
            tiny = float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_normal if dtype == "bfloat16"
                         else np.finfo(dtype).smallest_normal)
            assert not ((values != 0) & (np.abs(values) < tiny)).any(), "subnormals only with subnormal"

    check()


def test_bounds_and_fixed_shapes_are_kept():
    @QUICK
    @given(tensors("bfloat16", (3, 2), min_value=-2.0, max_value=0.5), tensors("int16", 4, min_value=-3, max_value=3),
           tensors(["float16", "uint8"], ()))
    def check(bf16, ints, either):
        assert bf16.shape == (3, 2) and (-2.0 <= _floats(bf16)).all() and (_floats(bf16) <= 0.5).all()
        assert ints.shape == (4,) and ints.min() >= -3 and ints.max() <= 3
        assert either.shape == () and either.dtype in (np.float16, np.uint8)

    check()


@pytest.mark.parametrize("special, found", [
    ("nan", lambda a: np.isnan(_floats(a)).any()),
    ("inf", lambda a: np.isinf(_floats(a)).any() and (_floats(a) < 0).any()),
    ("zero_signs", lambda a: np.signbit(_floats(a)[_floats(a) == 0]).any()),
    ("subnormal", lambda a: ((_floats(a) != 0) & (np.abs(_floats(a)) < np.finfo(np.float32).smallest_normal)).any()),
    ("large", lambda a: (np.abs(_floats(a)) == np.finfo(np.float32).max).any()),
])
def test_each_special_value_is_drawn_when_asked_for(special, found):
    example = find(tensors("float32", (8,), specials=[special]), found, settings=settings(database=None, max_examples=2000))
    assert found(example)


def test_a_nan_is_the_one_quiet_nan_so_a_written_case_replays_it_bit_for_bit():
    example = find(tensors("float32", (4,), specials=["nan"]), lambda a: np.isnan(a).any(),
                   settings=settings(database=None, max_examples=2000))
    assert {int(bits) for bits in example.view(np.uint32)[np.isnan(example)]} == {0x7FC00000}


def test_large_on_an_int_dtype_is_its_extremes():
    example = find(tensors("int8", (6,), specials=["large"]), lambda a: a.min() == -128 and a.max() == 127,
                   settings=settings(database=None, max_examples=2000))
    assert example.min() == -128


@pytest.mark.parametrize("call, message", [
    (lambda: tensors("float128"), "tensors: dtype 'float128' is not one of bool, uint8"),
    (lambda: tensors("float32", specials=["huge"]), "tensors: unknown special value kinds ['huge']"),
    (lambda: tensors("float32", specials="nan "), "tensors: unknown special value kinds ['nan ']"),
    (lambda: tensors("int32", specials=["nan"]), "tensors: special values ['nan'] do not apply to int32"),
    (lambda: tensors("bool", min_value=0), "tensors: a bool tensor takes no min_value, max_value or specials"),
    (lambda: tensors("float16", min_value=0.0, max_value=1e6), "tensors: bounds [0.0, 1000000.0] are not finite numbers"),
    (lambda: tensors("float32", min_value=math.nan), "tensors: bounds [nan, 1000.0] are not finite numbers"),
    (lambda: tensors("uint8", min_value=-1), "tensors: bounds [-1, 255] are not whole numbers"),
])
def test_a_bad_argument_is_refused_naming_it(call, message):
    with pytest.raises(ValueError) as refused:
        call()
    assert message in str(refused.value)


# shrinking to a paste-ready case ---------------------------------------------------------------------------------

FITS = "{input: {x: {tensor: {dtype: float32, shape: [2], values: [1.5, -3]}}}}"


def _pasted(stdout: str) -> str:
    """The case a failing property printed, as written under its gate's `cases:` (six spaces in)."""
    block = stdout.split("to replay it as a named case, add under `cases:`:\n", 1)[1].split("\n  rerun:", 1)[0]
    return "\n".join("  " + line for line in block.splitlines())


def test_a_failing_property_over_tensors_shrinks_to_a_case_that_pasted_back_fails_the_same_way(tmp_path):
    root = _project(tmp_path, impl="doubled_unless_large", cases={"fits": FITS}, properties="pkg.strategies:small")
    ran = _pytest(root)
    assert ran.returncode == 1 and "FAILED gates/rows/r0/gate.yaml::g::properties" in ran.stdout, ran.stdout + ran.stderr
    pasted = _pasted(ran.stdout)
    found = re.search(r"x: \{tensor: \{dtype: float32, shape: \[1\], values: \[(.+)\]\}\}", pasted)
    assert found and 10 < float(found.group(1)) <= 100, ran.stdout  # shrunk to one element over 10
    assert "max abs error" in ran.stdout and "rerun: pytest 'gates/rows/r0/gate.yaml::g::properties'" in ran.stdout
    gate = root / "gates" / "rows" / "r0" / "gate.yaml"
    gate.write_text(gate.read_text() + pasted + "\n")
    again = _pytest(root, "gates/rows/r0/gate.yaml::g::shrunk-example")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "gate g, case 'shrunk-example': impl disagrees with the oracle" in again.stdout, again.stdout
    assert f"input        : {{'x': tensor(float32, shape [1], [{float(found.group(1))!r}])}}" in again.stdout


def test_a_failing_example_too_large_to_write_is_named_beside_the_rerun_line():
    """The report of a shrunk example holding a 20x20 tensor (shrinking one through workers takes minutes: the
    report is made here from the mismatch, as the item makes it)."""
    from _vllm_gates.run.checks import Mismatch
    from _vllm_gates.run.items import _render_mismatch

    big = np.zeros((20, 20), np.float32)
    shown = _render_mismatch(Mismatch("impl disagrees with the oracle on a generated input", "gate.yaml:9:5: gate g, "
                                      "properties", {"x": big, "n": 2}, [("impl", "...")], shrunk=True),
                             "gates/rows/r0/gate.yaml::g::properties", "profile dev, seed 5",
                             "--hypothesis-profile=dev --hypothesis-seed=5")
    assert ("# the input cannot be written as a case: input.x (float32, shape [20, 20]) is too large to write inline "
            "(at most 256 elements are): replay the example with the rerun line") in shown, shown
    assert "rerun: pytest 'gates/rows/r0/gate.yaml::g::properties' --hypothesis-profile=dev --hypothesis-seed=5" in shown
    assert "values: [" not in shown and len(shown) < 2000


def test_the_rendered_case_reads_back_as_the_same_bits(tmp_path):
    """Every carried dtype, specials included, written as a case and read back by the gate file loader."""
    from _vllm_gates.values.render import render_case
    from tests.harness.test_case_tensors import _load

    arrays = {"f32": np.array([1.5, -0.0, np.inf, -np.inf, np.nan, 1e-45], np.float32),
              "bf16": np.array([0.1, -3.5, 65280], ml_dtypes.bfloat16), "f16": np.array([[6e-8, 65504]], np.float16),
              "f64": np.array(0.1), "i64": np.array([-2 ** 63, 2 ** 63 - 1]), "u8": np.array([0, 255], np.uint8),
              "b": np.array([[True], [False]]), "empty": np.zeros((0, 2), np.int32)}
    block = render_case("written", arrays)
    root = _project(tmp_path, cases={})
    gate = root / "gates" / "rows" / "r0" / "gate.yaml"
    gate.write_text(gate.read_text().replace("    cases:\n", "    cases:\n" + "\n".join("      " + line for line in
                                                                                      block.splitlines()) + "\n"))
    read = _load(root).gates[0].cases[0].input
    for name, array in arrays.items():
        assert read[name].dtype == array.dtype and read[name].shape == array.shape, name
        assert read[name].tobytes() == array.tobytes(), (name, read[name], array)
