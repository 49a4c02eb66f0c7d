"""Tensors in a case's `input:` and `expect:` (issue 29 item 2 and its Bad input; docs/gate-files.md, "Tensors in
cases"): inline values, a named tensor of a .safetensors fixture in the row's folder, and a seeded `randn`, each
judged end to end through real workers (PASS, and FAIL saying how far off); every bad spelling and every broken
fixture file a definition error at the case's file:line naming the key and the value."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.definitions import case_tensors
from _vllm_gates.definitions.case_tensors import randn
from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.gatefile import load_gate_file
from _vllm_gates.run.fingerprints import Fingerprinter
from tests.harness.test_calls_ahead import _project as calls_ahead_project
from tests.harness.test_calls_ahead import _pytest

pytestmark = pytest.mark.cpu

IMPL = '''import numpy as np

import vllm_gates


def doubled(x):
    """The input tensor doubled, through torch."""
    return vllm_gates.as_torch(x) * 2


def doubled_off(x):
    """Doubled, a thousandth too large."""
    return vllm_gates.as_torch(x) * 2.002


def doubled_unless_large(x):
    """Doubled, but one more where an element is over 10."""
    t = vllm_gates.as_torch(x)
    return t * 2 + (t > 10).to(t.dtype)
'''
ORACLE = '''import numpy as np


def doubled(x):
    return x * x.dtype.type(2)
'''
STRATEGIES = '''from hypothesis import strategies as st

from vllm_gates.strategies import shapes, tensors


def small():
    return st.fixed_dictionaries({"x": tensors("float32", shapes(max_dims=2, max_side=4), min_value=-100, max_value=100)})
'''
GATE = """row: R-0
title: row
spec: spec/s.md
gates:
  - id: g
    impl: pkg.impl:{impl}
    oracle: pkg.oracle:doubled
    milestone: M1
    covers: [S-1.1]
    markers: [cpu]
    compare: {{policy: allclose}}
    known_bad:
      too-large: pkg.impl:doubled_off
{properties}    cases:
{cases}
"""
CASES = {
    "inline": "{input: {x: {tensor: {dtype: float32, shape: [2, 3], values: [[1, 2.5, -3], [.inf, 0.0, 6]]}}}, "
              "expect: {tensor: {dtype: float32, shape: [2, 3], values: [2, 5.0, -6, .inf, 0, 12]}}}",
    "from-file": "{input: {x: {tensor: {file: fixtures/acts.safetensors, name: hidden}}}}",
    "generated": "{input: {x: {tensor: {randn: {shape: [4, 8], dtype: float32, seed: 3, scale: 0.5}}}}}",
    "generated-bf16": "{input: {x: {tensor: {randn: {shape: [4, 8], dtype: bfloat16, seed: 3, scale: 0.5}}}}}",
}


def _project(root: Path, impl: str = "doubled", cases: dict[str, str] | None = None, properties: str = "") -> Path:
    """test_calls_ahead's project (row R-0 in gates/rows/r0, subjects in pkg), its gate one that doubles a tensor,
    judged allclose, its fixture in the row's fixtures/."""
    root.mkdir(parents=True, exist_ok=True)
    calls_ahead_project(root)
    (root / "pkg" / "impl.py").write_text(IMPL)
    (root / "pkg" / "oracle.py").write_text(ORACLE)
    (root / "pkg" / "strategies.py").write_text(STRATEGIES)
    folder = root / "gates" / "rows" / "r0"
    (folder / "fixtures").mkdir()
    save_file({"hidden": (np.arange(12, dtype=np.float32) / 7).reshape(3, 4), "mask": np.array([True, False])},
              str(folder / "fixtures" / "acts.safetensors"))
    lines = "\n".join(f"      {name}: {body}" for name, body in (CASES if cases is None else cases).items())
    shown = f"    properties: {{strategy: {properties}, max_examples: 60}}\n" if properties else ""
    (folder / "gate.yaml").write_text(GATE.format(impl=impl, cases=lines, properties=shown))
    return root


def _load(root: Path):
    return load_gate_file(root / "gates" / "rows" / "r0" / "gate.yaml", root, None, ("cpu",))


# each spelling, read ----------------------------------------------------------------------------------------------

def test_each_spelling_is_a_read_only_array_of_its_dtype_shape_and_values(tmp_path):
    cases = {case.name: case for case in _load(_project(tmp_path)).gates[0].cases}
    inline, expect = cases["inline"].input["x"], cases["inline"].expect
    assert inline.dtype == np.float32 and inline.shape == (2, 3) and not inline.flags.writeable
    assert inline.tolist() == [[1.0, 2.5, -3.0], [np.inf, 0.0, 6.0]]
    assert expect.dtype == np.float32 and expect.tolist() == [[2.0, 5.0, -6.0], [np.inf, 0.0, 12.0]]
    stored = cases["from-file"].input["x"]
    assert stored.dtype == np.float32 and not stored.flags.writeable
    assert np.array_equal(stored, (np.arange(12, dtype=np.float32) / 7).reshape(3, 4))
    made = cases["generated-bf16"].input["x"]
    assert made.dtype == ml_dtypes.bfloat16 and made.shape == (4, 8) and not made.flags.writeable
    wide = np.random.Generator(np.random.PCG64(3)).standard_normal(32) * 0.5
    assert np.array_equal(made.reshape(-1).view(np.uint16), wide.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_randn_is_the_same_numbers_on_every_machine_and_in_chunks(monkeypatch):
    """The first draws of PCG64(0), written down: a numpy whose stream changed would change every generated case."""
    first = randn((4,), "float64", 0)
    assert np.array_equal(first, np.random.Generator(np.random.PCG64(0)).standard_normal(4))
    assert [round(v, 6) for v in first.tolist()] == [0.12573, -0.132105, 0.640423, 0.1049]
    whole = randn((5, 7), "float32", 11, 2.0)
    monkeypatch.setattr(case_tensors, "RANDN_CHUNK", 3)
    assert np.array_equal(randn((5, 7), "float32", 11, 2.0), whole)
    assert randn((2,), "float16", 1, 1e6) is None  # overflows float16: refused, never inf


def test_randn_mean_shifts_the_scaled_draws_before_the_cast(tmp_path):
    """`mean` (an RMSNorm weight: 1 + 0.1 N(0, 1)) is added to the scaled float64 draws, then the cast rounds once."""
    cases = {"weight": "{input: {x: {tensor: {randn: {shape: [64], dtype: bfloat16, seed: 5, scale: 0.1, mean: 1.0}}}}}"}
    made = _load(_project(tmp_path, cases=cases)).gates[0].cases[0].input["x"]
    wide = 1.0 + 0.1 * np.random.Generator(np.random.PCG64(5)).standard_normal(64)
    assert np.array_equal(made.view(np.uint16), wide.astype(ml_dtypes.bfloat16).view(np.uint16))
    assert np.array_equal(randn((64,), "bfloat16", 5, 0.1, 1.0), made) and randn((64,), "float32", 5).mean() < 0.5


def test_nested_flat_zero_d_and_empty_values(tmp_path):
    cases = {"flat": "{input: {x: {tensor: {dtype: int16, shape: [2, 2], values: [1, -2, 3, 4]}}}, expect: 0}",
             "scalar": "{input: {x: {tensor: {dtype: bool, shape: [], values: true}}}, expect: 0}",
             "empty": "{input: {x: {tensor: {dtype: float64, shape: [0, 3], values: []}}}, expect: 0}",
             "listed": "{input: {x: [1, {tensor: {dtype: uint8, shape: [1], values: [255]}}]}, expect: 0}",
             "plain": "{input: {x: {tensor: 5, other: {tensor: [1]}}}, expect: {tensor: text}}"}
    found = {case.name: case for case in _load(_project(tmp_path, cases=cases)).gates[0].cases}
    assert found["flat"].input["x"].tolist() == [[1, -2], [3, 4]] and found["flat"].input["x"].dtype == np.int16
    assert found["scalar"].input["x"].shape == () and found["scalar"].input["x"].item() is True
    assert found["empty"].input["x"].shape == (0, 3)
    assert found["listed"].input["x"][1].tolist() == [255]
    assert found["plain"].input == {"x": {"tensor": 5, "other": {"tensor": [1]}}}  # not the spelling: plain data
    assert found["plain"].expect == {"tensor": "text"}


# end to end -------------------------------------------------------------------------------------------------------

def test_each_spelling_passes_through_real_workers_and_a_wrong_impl_fails_saying_how_far(tmp_path):
    ran = _pytest(_project(tmp_path / "right"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for name in CASES:
        assert f"PASSED gates/rows/r0/gate.yaml::g::{name}" in ran.stdout, ran.stdout
    wrong = _pytest(_project(tmp_path / "wrong", impl="doubled_off"))
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    for name in ("inline", "from-file", "generated"):
        assert f"FAILED gates/rows/r0/gate.yaml::g::{name}" in wrong.stdout, wrong.stdout
    # a thousandth off is within bfloat16's default rtol (1.6e-2): that case passes, as torch's assert_close would
    assert "PASSED gates/rows/r0/gate.yaml::g::generated-bf16" in wrong.stdout, wrong.stdout
    assert "impl does not return the expected value" in wrong.stdout  # `inline` has an expect
    assert "impl disagrees with the oracle" in wrong.stdout
    assert "max abs error" in wrong.stdout and "mismatched" in wrong.stdout and "NMSE" in wrong.stdout, wrong.stdout
    assert "tensor(float32, shape [3, 4], [0.0, 0.28" in wrong.stdout, wrong.stdout  # the fixture, shown compactly


def test_the_fixture_file_is_part_of_the_gates_fingerprint(tmp_path):
    root = _project(tmp_path)
    gate_file = _load(root)
    before = Fingerprinter(load_config(root)).gate(gate_file, gate_file.gates[0], None)
    assert "file:gates/rows/r0/fixtures/acts.safetensors" in before.inputs
    save_file({"hidden": np.zeros((3, 4), np.float32)}, str(root / "gates/rows/r0/fixtures/acts.safetensors"))
    after = Fingerprinter(load_config(root)).gate(gate_file, gate_file.gates[0], None)
    assert after.fingerprint != before.fingerprint


# bad input --------------------------------------------------------------------------------------------------------

def _refused(tmp_path: Path, body: str) -> str:
    """The definition error of a gate whose one case is ``body`` (line 15 of gate.yaml)."""
    root = _project(tmp_path, cases={"bad": body})
    with pytest.raises(DefinitionError) as refused:
        _load(root)
    return str(refused.value)


WHERE = "gates/rows/r0/gate.yaml:15:"
KEY = "gates[0].cases.bad.input.x.tensor"


@pytest.mark.parametrize("spelled, message", [
    ("{dtype: float128, shape: [2], values: [1, 2]}",
     f"{KEY}.dtype: unknown dtype 'float128' (known: bool, uint8, int8, int16, int32, int64, float16, bfloat16, "
     "float32, float64)"),
    ("{dtype: float32, shape: [2, -1], values: []}", f"{KEY}.shape: shape [2, -1] has a negative dimension"),
    ("{dtype: float32, shape: [65536, 65536], values: []}",
     f"{KEY}.shape: shape [65536, 65536] of float32 needs 17179869184 bytes, past the 4294967296 a tensor may hold"),
    ("{dtype: float32, shape: [9223372036854775807, 9223372036854775807], values: []}",
     f"{KEY}.shape: shape [9223372036854775807, 9223372036854775807] of float32 needs "),
    ("{dtype: float32, shape: 3, values: [1, 2, 3]}", f"{KEY}.shape: a shape is a list of whole numbers, got int 3"),
    ("{dtype: float32, shape: [2, 2], values: [1, 2, 3]}",
     f"{KEY}.values: values hold 3 numbers, but shape [2, 2] needs 4"),
    ("{dtype: float32, shape: [2, 2], values: [[1, 2, 3], [4]]}",
     f"{KEY}.values: values [[1, 2, 3], [4]] are nested as no shape is: give them nested by shape [2, 2] or as one "
     "flat list"),
    ("{dtype: int8, shape: [2], values: [1, 200]}", f"{KEY}.values: element 1 (200) is outside int8's range [-128, 127]"),
    ("{dtype: int8, shape: [2], values: [1, 2.5]}", f"{KEY}.values: element 1 (2.5) is a float, but a int8 tensor holds"),
    ("{dtype: bool, shape: [1], values: [1]}", f"{KEY}.values: element 0 (1) is int, but a bool tensor holds true or false"),
    ("{dtype: float16, shape: [1], values: [1.0e+6]}",
     f"{KEY}.values: element 0 (1000000.0) is beyond the largest finite float16 (65504.0)"),
    ("{dtype: float32, shape: [1], values: [1e-5]}",
     f"{KEY}.values: element 0 ('1e-5') is str, not a number (YAML reads a number with an exponent as a number only"),
    ("{randn: {shape: [2], dtype: float32, seed: 1.5}}",
     f"{KEY}.randn.seed: a seed is a whole number from 0 to 2**128 - 1, got float 1.5"),
    ("{randn: {shape: [2], dtype: float32, seed: '7'}}",
     f"{KEY}.randn.seed: a seed is a whole number from 0 to 2**128 - 1, got str '7'"),
    ("{randn: {shape: [2], dtype: float32, seed: -1}}",
     f"{KEY}.randn.seed: a seed is a whole number from 0 to 2**128 - 1, got int -1"),
    ("{randn: {shape: [2], dtype: int32, seed: 1}}",
     f"{KEY}.randn.dtype: dtype 'int32' is not one a generator makes (it makes float16, bfloat16, float32, float64)"),
    ("{randn: {shape: [2], dtype: float16, seed: 1, scale: 1.0e+9}}",
     f"{KEY}.randn.scale: scale 1000000000.0 makes draws beyond the largest finite float16 (65504.0)"),
    ("{randn: {shape: [2], dtype: float32, seed: 1, mean: '1'}}", f"{KEY}.randn.mean: a mean is a finite number, got str '1'"),
    ("{randn: {shape: [2], dtype: float32, seed: 1, mean: .nan}}", f"{KEY}.randn.mean: a mean is a finite number, got float nan"),
    ("{randn: {shape: [2], dtype: float16, seed: 1, mean: 7.0e+4}}",
     f"{KEY}.randn.mean: mean 70000.0 with scale 1.0 makes draws beyond the largest finite float16 (65504.0)"),
    ("{randn: {shape: [2], dtype: float32, seed: 1, spread: 0}}", f"{KEY}.randn.spread: unknown key 'spread'"),
    ("{randn: [2, 3]}", f"{KEY}.randn: expected a mapping of shape, dtype, seed, scale and mean, got list [2, 3]"),
    ("{dtype: float32, shape: [1]}", f"{KEY}: a tensor is given by `values` (with `dtype` and `shape`), by `file`"),
    ("{file: fixtures/acts.safetensors, name: weights}",
     f"{KEY}.name: gates/rows/r0/fixtures/acts.safetensors has no tensor 'weights' (it holds: hidden, mask)"),
    ("{file: fixtures/missing.safetensors, name: w}",
     f"{KEY}.file: fixture file 'gates/rows/r0/fixtures/missing.safetensors' does not exist"),
    ("{file: ../../../spec/s.safetensors, name: w}", f"{KEY}.file: fixture file '../../../spec/s.safetensors' has a '..' part"),
    ("{file: /etc/x.safetensors, name: w}", f"{KEY}.file: fixture file '/etc/x.safetensors' is an absolute path"),
    ("{file: fixtures/acts.npy, name: w}", f"{KEY}.file: fixture file 'fixtures/acts.npy' is not a .safetensors file"),
    ("{file: fixtures/acts.safetensors}", f"{KEY}.name: required key is missing"),
])
def test_every_bad_spelling_is_a_definition_error_at_the_cases_line_naming_key_and_value(tmp_path, spelled, message):
    text = _refused(tmp_path, f"{{input: {{x: {{tensor: {spelled}}}}}, expect: 0}}")
    assert WHERE in text and message in text, text
    assert "Traceback" not in text


def _fixture(root: Path, data: bytes) -> None:
    (root / "gates/rows/r0/fixtures/bad.safetensors").write_bytes(data)


def _safetensors(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


FILE_CASE = "{input: {x: {tensor: {file: fixtures/bad.safetensors, name: w}}}, expect: 0}"
GOOD_HEADER = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}


@pytest.mark.parametrize("data, message", [
    (_safetensors(GOOD_HEADER, b"\0" * 7), "has tensor 'w' at data offsets [0, 8], past the end of its 7 data bytes "
                                            "(a truncated file or a lying header)"),
    (_safetensors(GOOD_HEADER, b"\0" * 8)[:-12],
     "says its header is 61 bytes, but the file holds only 57 after the header length (a truncated or lying header)"),
    (b"\x05\0\0", "is 3 bytes, shorter than the 8-byte header length that starts a .safetensors file"),
    (struct.pack("<Q", 1 << 40) + b"{}", f"says its header is {1 << 40} bytes, past the format's limit of 104857600"),
    (_safetensors({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
     "has tensor 'w' of shape [3] (F32), which needs 12 bytes, but its data offsets [0, 8] hold 8"),
    (_safetensors({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                   "v": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
     "has tensor 'v' at data offset 4, which overlaps the tensor before it (the buffer is covered up to offset 8)"),
    (_safetensors(GOOD_HEADER, b"\0" * 12), "holds 12 data bytes, but its header's tensors cover 8"),
    (_safetensors({"w": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8),
     "has tensor 'w' of dtype 'Q7', not one of BOOL, U8"),
    (_safetensors({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8),
     "has tensor 'w' of shape [-2]: not a list of ints >= 0"),
    (_safetensors({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8),
     "has tensor 'w' with data_offsets [8, 0]: not [begin, end] with 0 <= begin <= end"),
    (struct.pack("<Q", 4) + b"[1] ", "has a header that is a JSON list, not an object of tensors"),
    (struct.pack("<Q", 4) + b"{x}}", "has a header that is not UTF-8 JSON"),
])
def test_a_broken_fixture_file_is_an_error_naming_the_file_and_what_it_lies_about(tmp_path, data, message):
    root = _project(tmp_path, cases={"bad": FILE_CASE})
    _fixture(root, data)
    with pytest.raises(DefinitionError) as refused:
        _load(root)
    text = str(refused.value)
    assert f"{WHERE}34: {KEY}.file: fixture file gates/rows/r0/fixtures/bad.safetensors {message}" in text, text


def test_a_fixture_of_a_dtype_not_carried_or_a_bool_byte_not_0_or_1_is_refused_naming_the_tensor(tmp_path):
    root = _project(tmp_path, cases={"bad": FILE_CASE})
    _fixture(root, _safetensors({"w": {"dtype": "U16", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4))
    with pytest.raises(DefinitionError) as refused:
        _load(root)
    assert (f"{KEY}.name: tensor 'w' of gates/rows/r0/fixtures/bad.safetensors is U16, a dtype the protocol does not "
            "carry") in str(refused.value)
    _fixture(root, _safetensors({"w": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x07"))
    with pytest.raises(DefinitionError) as refused:
        _load(root)
    assert "is BOOL, but its element 1 is the byte 7: bool elements are 0 or 1" in str(refused.value)


def test_a_fixture_reached_through_a_symlink_is_refused(tmp_path):
    root = _project(tmp_path, cases={"bad": "{input: {x: {tensor: {file: linked/acts.safetensors, name: hidden}}}, "
                                             "expect: 0}"})
    (root / "gates/rows/r0/linked").symlink_to(root / "gates/rows/r0/fixtures")
    with pytest.raises(DefinitionError) as refused:
        _load(root)
    assert ("fixture file 'gates/rows/r0/linked/acts.safetensors' is reached through the symlink 'linked': the row's "
            "fingerprint covers only files inside its folder") in str(refused.value)


def test_a_bad_tensor_breaks_only_its_gate_and_the_run_says_where(tmp_path):
    root = _project(tmp_path, cases={"bad": "{input: {x: {tensor: {dtype: float32, shape: [3], values: [1]}}}}"})
    ran = _pytest(root)
    assert ran.returncode != 0
    assert (f"definition error: {WHERE}62: {KEY}.values: values hold 1 number, but shape [3] needs 3"
            in ran.stdout), ran.stdout
    assert "Traceback" not in ran.stdout


def test_upstream_drift_leaves_out_a_case_holding_a_tensor(tmp_path):
    """Its probes travel as one JSON request, which carries no buffers: such a case is left out, not a crash."""
    from _vllm_gates.frontends.drift import probes

    root = _project(tmp_path, cases={**CASES, "plain": "{input: {x: 3}, expect: 6}"})
    found = probes(load_config(root), [("R-0", _load(root).gates[0])], 0)
    assert [probe.source for probe in found] == ["case plain"]
