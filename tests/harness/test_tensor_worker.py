"""Tensors through real workers (issue 29 item 1): a gate whose impl returns a torch tensor and whose oracle returns a
numpy array PASSES, a mismatching one FAILS with the tensors shown compactly; a worker's tensor inputs are writable
arrays that `vllm_gates.as_torch` turns into torch tensors; `max-tensor-bytes` reaches the worker in hello and caps
its results; a worker or a judge of another protocol version is refused, naming both versions."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.definitions.config import load_config
from _vllm_gates.wire.channel import PROTOCOL_VERSION, receive, send
from _vllm_gates.wire.plain import decode, encode
from _vllm_gates.workers.worker_pool import WorkerLost, WorkerPool, WorkerSpec
from tests.harness.test_calls_ahead import _project as calls_ahead_project
from tests.harness.test_calls_ahead import _pytest
from tests.harness.test_shared_checkers import PYPROJECT

pytestmark = pytest.mark.cpu

IMPL = '''import numpy as np
import torch

import vllm_gates


def halves(n):
    """A transposed (non-contiguous) float32 column and a bfloat16 row, from torch."""
    column = (torch.arange(n, dtype=torch.float32) * 0.5).reshape(1, n).t()
    return {"column": column, "row": torch.full((n,), -0.0, dtype=torch.bfloat16), "n": n}


def halves_off(n):
    found = halves(n)
    found["column"][-1, 0] = 0.25
    return found


def halves_float64(n):
    found = halves(n)
    found["column"] = found["column"].double()
    return found


def doubled(x):
    """A tensor input: a writable numpy array, changed in place, returned through torch."""
    x[0] = 100
    return vllm_gates.as_torch(x) * 2


def big(n):
    return np.zeros(n, dtype=np.float32)
'''
ORACLE = '''import ml_dtypes
import numpy as np


def halves(n):
    return {"column": (np.arange(n, dtype=np.float32) * 0.5).reshape(n, 1),
            "row": np.full((n,), -0.0, dtype=ml_dtypes.bfloat16), "n": n}
'''
GATE = """row: R-0
title: row
spec: spec/s.md
gates:
  - id: g
    impl: pkg.impl:{impl}
    oracle: pkg.oracle:halves
    milestone: M1
    covers: [S-1.1]
    markers: [cpu]
    cases:
      three: {{input: {{n: 3}}}}
      five: {{input: {{n: 5}}}}
    known_bad:
      float64: pkg.impl:halves_float64
"""


def _project(root: Path, impl: str = "halves") -> Path:
    """test_calls_ahead's project (row R-0 in gates/rows/r0, subjects in pkg), its gate replaced by one of tensors."""
    calls_ahead_project(root)
    (root / "pkg" / "impl.py").write_text(IMPL)
    (root / "pkg" / "oracle.py").write_text(ORACLE)
    (root / "gates" / "rows" / "r0" / "gate.yaml").write_text(GATE.format(impl=impl))
    return root


def test_a_torch_impl_and_a_numpy_oracle_agree_and_a_wrong_dtype_is_caught(tmp_path):
    ran = _pytest(_project(tmp_path))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for item in ("g::three", "g::five", "g::known_bad[float64]", "g::audit"):
        assert f"PASSED gates/rows/r0/gate.yaml::{item}" in ran.stdout, ran.stdout


def test_a_mismatching_tensor_fails_and_the_report_shows_it_compactly(tmp_path):
    ran = _pytest(_project(tmp_path, impl="halves_off"))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "FAILED gates/rows/r0/gate.yaml::g::three" in ran.stdout and "FAILED gates/rows/r0/gate.yaml::g::five" in ran.stdout
    assert "impl disagrees with the oracle" in ran.stdout
    assert "'column': tensor(float32, shape [5, 1], [0.0, 0.5, 1.0, 1.5, 0.25])" in ran.stdout, ran.stdout
    assert "'column': tensor(float32, shape [5, 1], [0.0, 0.5, 1.0, 1.5, 2.0])" in ran.stdout, ran.stdout
    assert "'row': tensor(bfloat16, shape [5], [-0.0, -0.0, -0.0, -0.0, -0.0])" in ran.stdout


def _pool(root: Path, **spec: object) -> WorkerPool:
    return WorkerPool(WorkerSpec(root, (str(root),), ("pkg", "gates"), **spec))  # type: ignore[arg-type]


def test_a_tensor_input_reaches_the_worker_writable_and_comes_back(tmp_path):
    root = _project(tmp_path)
    pool = _pool(root)
    key = ("gates/rows/r0/gate.yaml", "impl")
    sent = np.arange(4, dtype=np.int32)
    try:
        message = {"op": "call", "target": "pkg.impl:doubled", "anchor": None, "build": None, "build_anchor": None,
                   "input": encode(sent, "input")}
        raw = pool.exchange_raw({key: message}, 30)[key]
        assert len(raw.buffers) == 1
        value = decode(pool.parse(key, raw)["result"]["value"], buffers=raw.buffers)
        assert value.dtype == np.int32 and value.tolist() == [200, 2, 4, 6] and not value.flags.writeable
        assert sent.tolist() == [0, 1, 2, 3], "the judge's own array is not the worker's"
    finally:
        pool.close()


def test_max_tensor_bytes_reaches_the_worker_and_caps_its_results(tmp_path):
    root = _project(tmp_path)
    pool = _pool(root, max_buffer_bytes=64)
    key = ("gates/rows/r0/gate.yaml", "impl")
    try:
        call = {"op": "call", "target": "pkg.impl:big", "anchor": None, "build": None, "build_anchor": None}
        assert pool.request(key, {**call, "input": encode({"n": 16}, "input")}, 30)["id"]  # 64 bytes: at the cap
        reply = pool.request(key, {**call, "input": encode({"n": 17}, "input")}, 30)
        assert reply["error"]["kind"] == "not-plain"
        assert reply["error"]["message"] == ("result is not plain data: numpy.ndarray of 68 bytes, past the cap of 64 bytes "
                                             "per message (max-tensor-bytes) at result")
    finally:
        pool.close()


def test_max_tensor_bytes_is_read_from_the_project_and_checked_at_its_key(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT.replace('allowed-roots = ["pkg", "gates"]\n',
                                                           'allowed-roots = ["pkg", "gates"]\nmax-tensor-bytes = 1048576\n'))
    config = load_config(root)
    assert config is not None and config.max_tensor_bytes == 1 << 20
    (tmp_path / "q").mkdir()
    assert load_config(_project(tmp_path / "q")).max_tensor_bytes == 4 * 1024 ** 3  # type: ignore[union-attr]
    for bad in ("-1", "0", '"4G"', "1.5", "true", str(2 ** 63)):
        (root / "pyproject.toml").write_text(PYPROJECT.replace('allowed-roots = ["pkg", "gates"]\n',
                                                               f'allowed-roots = ["pkg", "gates"]\nmax-tensor-bytes = {bad}\n'))
        with pytest.raises(DefinitionError) as refused:
            load_config(root)
        text = str(refused.value)
        assert "pyproject.toml:6:1: [tool.vllm-gates] max-tensor-bytes: expected a whole number of bytes from 1 to " in text, text
        assert "got " in text


def test_the_python_worker_refuses_another_version_naming_both(tmp_path):
    judge, worker = socket.socketpair()
    process = subprocess.Popen([sys.executable, "-m", "_vllm_gates.workers.worker_main", "--fd", str(worker.fileno())],
                               pass_fds=(worker.fileno(),), cwd=tmp_path)
    worker.close()
    send(judge, {"op": "hello", "version": 1, "root": str(tmp_path), "path": [], "allowed_roots": ["pkg"], "role": "impl"})
    assert receive(judge, 60) == {"op": "refused",
                                  "reason": f"this worker speaks protocol version {PROTOCOL_VERSION}; the judge sent version 1"}
    assert process.wait(60) == 2


OLD_WORKER = '''import os, socket, struct, sys, json
sock = socket.socket(fileno=int(sys.argv[-1]))
def read(n):
    data = b""
    while len(data) < n:
        data += sock.recv(n - len(data))
    return data
(length,) = struct.unpack(">I", read(4))
read(length & 0x1FFFFFFF)
body = json.dumps({"op": "ready", "version": 1, "pid": os.getpid(), "language": "old", "operations": []}).encode()
sock.sendall(struct.pack(">I", len(body)) + body)
sock.recv(1)
'''


def test_the_judge_refuses_a_worker_of_another_version_naming_both(tmp_path):
    (tmp_path / "old_worker.py").write_text(OLD_WORKER)
    pool = _pool(tmp_path, external=(sys.executable, str(tmp_path / "old_worker.py")))
    try:
        with pytest.raises(WorkerLost) as lost:
            pool.request(("gate.yaml", "impl"), {"op": "call", "operation": "x", "input": 1}, 30)
        assert str(lost.value) == (f"worker impl of gate.yaml did not start: it speaks protocol version 1, "
                                   f"this judge speaks version {PROTOCOL_VERSION}")
    finally:
        pool.close()


POLICY_IMPL = '''import torch


def _shifted(n, off):
    """float32 x * 0.1 computed in torch, its last element moved by ``off`` (a wrong answer of that size)."""
    out = torch.arange(n, dtype=torch.float32) * 0.1
    if n:
        out[-1] += off
    return out


def scaled(n):
    return _shifted(n, 0.0)


def scaled_slightly_off(n):
    return _shifted(n, 1e-7)


def scaled_off(n):
    return _shifted(n, 1e-3)
'''
POLICY_ORACLE = '''import numpy as np


def scaled(n):
    """The same values in float64, rounded once to float32: not bit-equal to torch's float32 product everywhere."""
    return (np.arange(n, dtype=np.float64) / 10).astype(np.float32)
'''
POLICY_GATE = """row: R-0
title: row
spec: spec/s.md
gates:
  - id: g
    impl: pkg.impl:{impl}
    oracle: pkg.oracle:scaled
    compare: {{policy: allclose}}
    milestone: M1
    covers: [S-1.1]
    markers: [cpu]
    cases:
      seven: {{input: {{n: 7}}}}
      thousand: {{input: {{n: 1000}}}}
    known_bad:
      off-by-a-thousandth: pkg.impl:scaled_off
"""


def _policy_project(root: Path, impl: str) -> Path:
    calls_ahead_project(root)
    (root / "pkg" / "impl.py").write_text(POLICY_IMPL)
    (root / "pkg" / "oracle.py").write_text(POLICY_ORACLE)
    (root / "gates" / "rows" / "r0" / "gate.yaml").write_text(POLICY_GATE.format(impl=impl))
    return root


@pytest.mark.parametrize("impl", ["scaled", "scaled_slightly_off"])
def test_tensors_from_workers_are_judged_under_an_allclose_policy(tmp_path, impl):
    """Issue 29 items 1 and 3 together: a torch float32 result within float32's default tolerance of a numpy oracle
    PASSES (bit-equality would not be asked), and the known-bad a thousandth off is rejected."""
    ran = _pytest(_policy_project(tmp_path, impl))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for item in ("g::seven", "g::thousand", "g::known_bad[off-by-a-thousandth]"):
        assert f"PASSED gates/rows/r0/gate.yaml::{item}" in ran.stdout, ran.stdout


def test_a_tensor_off_by_more_than_its_tolerance_fails_saying_how_far(tmp_path):
    ran = _pytest(_policy_project(tmp_path, "scaled_off"))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "FAILED gates/rows/r0/gate.yaml::g::thousand" in ran.stdout, ran.stdout
    assert "mismatched   : 1 of 1000 elements" in ran.stdout, ran.stdout
    assert "max abs error: 0.00099945" in ran.stdout and "at [999]" in ran.stdout, ran.stdout


def test_an_empty_tensor_result_is_nothing_compared_not_a_pass(tmp_path):
    """Both sides agree on an empty tensor: zero elements compared is the gate's ERROR, never a pass."""
    root = _policy_project(tmp_path, "scaled")
    gate = root / "gates" / "rows" / "r0" / "gate.yaml"
    gate.write_text(gate.read_text().replace("seven: {input: {n: 7}}", "empty: {input: {n: 0}}"))
    ran = _pytest(root)
    assert ran.returncode not in (0, 1), ran.stdout + ran.stderr
    assert "nothing compared" in ran.stdout, ran.stdout
