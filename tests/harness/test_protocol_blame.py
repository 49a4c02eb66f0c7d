"""A reply that breaks the worker protocol is blamed on whoever sent it (docs/worker-protocol.md §9): from the judged
implementation's worker (an external one is the implementation) it is that case's FAIL, or the generated example's,
naming the implementation, what it sent, the limit it broke and its last output, never "the gate's own code failed";
from an oracle's or a known-bad's worker (the gate's own code) it stays the gate's ERROR."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.harness.protocol_break_worker import BREAKS, LIMITS
from tests.harness.test_implementations import IMPL_LINE, OPERATIONS

pytestmark = pytest.mark.cpu

WORKER = Path(__file__).with_name("protocol_break_worker.py")
GATE_ERROR = "the gate's own code failed"


def _breaking_port(example, mode: str, when: str) -> None:
    """The example row's gate as an operation, answered by the `port` implementation (protocol_break_worker.py in
    MODE, breaking WHEN); the project caps a message's tensor bytes at 64."""
    example.write("gates/rows/example/operations.yaml", OPERATIONS)
    example.edit(IMPL_LINE, "    operation: page-bytes\n")
    command = json.dumps([sys.executable, str(WORKER), mode, when])
    text = example.read("pyproject.toml").replace("[tool.vllm-gates]\n", "[tool.vllm-gates]\nmax-tensor-bytes = 64\n")
    text = text.replace("[tool.pytest.ini_options]", f"""[tool.vllm-gates.implementations.port]
command = {command}

[tool.vllm-gates.error-kinds]
ValueError = "invalid-argument"

[tool.pytest.ini_options]""")
    example.write("pyproject.toml", text)


@pytest.mark.parametrize("mode", list(BREAKS))
def test_each_protocol_break_of_the_implementations_worker_fails_that_case(example, mode):
    _breaking_port(example, mode, "case")
    result = example.gates("run", "EXAMPLE-ROW", "--gate", "page-bytes", "--case", "fp16-page", "--impl", "port")
    assert result.code == 1, result.text
    assert "case 'fp16-page': impl port broke the worker protocol: its reply was refused and its worker ended" in result.text
    assert "input      : {block_size: 2, heads: 2, head_size: 2, dtype_bytes: 2}" in result.text, result.text
    assert "impl       : no result: its worker's reply broke the protocol\n" in result.text, result.text
    sent = next(line for line in result.text.splitlines() if line.startswith("  sent       : "))
    assert LIMITS[mode] in sent, sent
    assert "expected   : 32" in result.text
    assert f"last output: protocol-break worker: sending {mode}" in result.text, result.text
    assert GATE_ERROR not in result.text and "gate error" not in result.text and "Traceback" not in result.text


def test_a_protocol_break_on_a_generated_example_fails_the_properties_shrunk(example):
    """Only inputs of 5 heads break: the cases pass, the properties FAIL on the smallest such input (each try a new
    worker), and Hypothesis never shrinks into a gate error."""
    _breaking_port(example, "short-buffer", "five-heads")
    result, report = example.run_json("--impl", "port", "--profile", "ci")
    assert result.code == 1, result.text
    items = {i["name"]: i["outcome"] for i in report["items"] if i["gate"] == "page-bytes"}
    assert items["fp16-page"] == items["negative-heads"] == "passed" and items["properties"] == "failed", items
    gate = example.gate(report)
    assert gate["verdict"] == "FAIL", gate
    assert "properties: impl port broke the worker protocol" in result.text, result.text
    assert "input      : {block_size: 0, heads: 5, head_size: 0, dtype_bytes: 1}" in result.text, result.text
    assert "(shrunk by hypothesis)" in result.text
    assert "needs 8 bytes, but buffer 0 holds 4" in result.text
    assert "last output: protocol-break worker: sending short-buffer" in result.text
    assert GATE_ERROR not in result.text and "gate error" not in result.text


BROKEN_TAG = ("import numpy\nimport _vllm_gates.wire.tensors as _wire\n\n_wire.WireTensor.tag = lambda self, index: "
              "{'$tensor': {'dtype': self.dtype, 'shape': list(self.shape), 'buffer': index + 5}}\n\n\n")
BROKEN_RETURN = "    print('sending a tensor tagged with a buffer the frame lacks', flush=True)\n    return numpy.zeros(2, numpy.float32)\n"


def _tags_a_missing_buffer(example, path: str, old: str) -> None:
    """The Python subject in ``path`` patches its worker's encoder to tag buffer i+5 and returns a tensor: its reply
    names a buffer the frame does not carry (what a Python subject can do to its own worker)."""
    example.write(path, BROKEN_TAG + example.read(path).replace(old, BROKEN_RETURN))


def test_the_python_ports_broken_reply_fails_its_case_too(example):
    _tags_a_missing_buffer(example, "example_row/impl.py", "    return 2 * block_size * heads * head_size * dtype_bytes\n")
    result = example.gates("run", "EXAMPLE-ROW", "--gate", "page-bytes", "--case", "fp16-page")
    assert result.code == 1, result.text
    assert "case 'fp16-page': impl broke the worker protocol" in result.text, result.text
    assert "a $tensor of buffer 5, not an index below the frame's 1 buffers" in result.text
    assert "last output: sending a tensor tagged with a buffer the frame lacks" in result.text
    assert GATE_ERROR not in result.text


@pytest.mark.parametrize("role,path,old", [
    ("oracle", "example_row/oracle.py", "    return one + one\n"),
    ("known-bad", "gates/rows/example/known_bad.py", "    return block_size * heads * head_size * dtype_bytes\n"),
], ids=["oracle", "known-bad"])
def test_the_same_break_from_an_oracle_or_a_known_bad_is_the_gates_error(example, role, path, old):
    _tags_a_missing_buffer(example, path, old)
    result, report = example.run_json("--profile", "ci")
    assert result.code == 3, result.text
    assert example.gate(report)["verdict"] == "ERROR"
    assert f"gate error ({GATE_ERROR}, not the implementation)" in result.text
    assert f"worker {role} of gates/rows/example/gate.yaml broke the protocol: result is not plain data: a $tensor of " \
           f"buffer 5, not an index below the frame's 1 buffers" in result.text, result.text
    assert "broke the worker protocol" not in result.text
