"""Implementations by name: a gate's `operation:` answered by an external worker, NOT-IMPLEMENTED, error kinds
and facts, the build on demand, and the refusals of bad configuration (issue: gate the C++ port itself)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

WORKER = Path(__file__).with_name("external_worker.py")
IMPL_LINE = "    impl: example_row.impl:page_bytes\n"
OPERATIONS = """row: EXAMPLE-ROW
operations:
  page-bytes:
    summary: Bytes of one KV page (EX-1.1), refusing a negative head count (EX-1.2).
    input: {block_size: int32, heads: int32, head_size: int32, dtype_bytes: int32}
    output: int64 bytes
    errors: {invalid-argument: the head count}
    python: {impl: example_row.impl:page_bytes}
"""


def _external(example, mode: str, extra: str = "", name: str = "fake") -> None:
    """Declare an external implementation `name` (the stand-alone worker in MODE) and make the gate an operation."""
    example.write("gates/rows/example/operations.yaml", OPERATIONS)
    example.edit(IMPL_LINE, "    operation: page-bytes\n")
    command = json.dumps([sys.executable, str(WORKER), mode])
    text = example.read("pyproject.toml").replace("[tool.pytest.ini_options]", f"""[tool.vllm-gates.implementations.{name}]
command = {command}
{extra}
[tool.vllm-gates.error-kinds]
ValueError = "invalid-argument"
RuntimeError = "runtime-error"

[tool.pytest.ini_options]""")
    example.write("pyproject.toml", text)


def test_an_external_implementation_that_is_right_passes_and_is_named(example):
    _external(example, "correct")
    result, report = example.run_json("--impl", "fake")
    assert result.code == 0, result.text
    gate = example.gate(report)
    assert gate["verdict"] == "PASS" and gate["cases_passed"] == 2 and gate["examples"] > 0
    assert report["evidence"]["impl"] == "fake"
    assert any(name == "impl:fake" for name in gate["inputs"])


def test_the_python_port_still_answers_an_operation_by_its_binding(example):
    _external(example, "wrong-value")
    result, report = example.run_json()
    assert result.code == 0, result.text
    assert example.gate(report)["verdict"] == "PASS" and report["evidence"]["impl"] == "python"


def test_a_wrong_value_from_the_external_worker_fails(example):
    _external(example, "wrong-value")
    result = example.gates("run", "--impl", "fake")
    assert result.code == 1, result.text
    assert "impl does not return the expected value" in result.text or "disagrees with the oracle" in result.text


def test_an_error_of_the_wrong_kind_fails_naming_the_kind(example):
    _external(example, "wrong-kind")
    result, report = example.run_json("--impl", "fake")
    assert result.code == 1, result.text
    assert example.gate(report)["verdict"] == "FAIL"
    assert "expected invalid-argument (for ValueError) to be raised" in result.text


def test_a_message_without_the_cases_facts_fails(example):
    """The case's `match` "heads must be >= 0" carries the fact 0; "negative head count" does not say it."""
    _external(example, "few-facts")
    result = example.gates("run", "--impl", "fake")
    assert result.code == 1, result.text
    assert "lacks facts the case names" in result.text and "missing: 0" in result.text


def test_explicit_facts_replace_those_taken_from_the_pattern(example):
    _external(example, "few-facts")
    example.edit('raises: {type: ValueError, match: "heads must be >= 0"}',
                 'raises: {type: ValueError, match: "heads must be >= 0", facts: ["head count"]}')
    result = example.gates("run", "--impl", "fake")
    assert result.code == 0, result.text


@pytest.mark.parametrize("mode", ["no-operations", "not-implemented-at-call"])
def test_an_operation_the_worker_lacks_is_not_implemented_and_backs_no_done_claim(example, mode):
    _external(example, mode)
    result, report = example.run_json("--impl", "fake")
    assert result.code == 1, result.text
    gate = example.gate(report)
    assert gate["verdict"] == "NOT-IMPLEMENTED", gate
    assert "not implemented by 'fake'" in gate["reason"]
    assert example.row(report)["claim"]["claim_met"] is False


def test_not_implemented_is_no_failure_for_a_row_still_active(example):
    _external(example, "no-operations")
    example.set_roadmap({"EXAMPLE-ROW": ("ACTIVE", {"M1": "ACTIVE"})})
    result, report = example.run_json("--impl", "fake")
    assert result.code == 0, result.text
    assert example.gate(report)["verdict"] == "NOT-IMPLEMENTED"


def test_a_gate_with_only_a_python_target_is_not_implemented_elsewhere(example):
    _external(example, "correct")
    example.edit("    operation: page-bytes\n", IMPL_LINE)
    result, report = example.run_json("--impl", "fake")
    assert result.code == 1
    assert "names a Python target, not an operation" in example.gate(report)["reason"]


@pytest.mark.parametrize("mode", ["crash-at-start", "refuse"])
def test_a_worker_that_does_not_start_is_an_error_never_a_pass(example, mode):
    _external(example, mode)
    result = example.gates("run", "--impl", "fake")
    assert result.code == 3, result.text
    assert "implementation fake" in result.text
    assert "did not start" in result.text or "exited with status 9" in result.text


def test_the_audit_stand_in_is_answered_by_the_external_worker(example):
    _external(example, "correct")
    result = example.gates("audit", "--impl", "fake")
    assert result.code == 0, result.text
    assert "3/3 rejected" in result.out


def test_settings_reach_the_external_worker_in_hello(example, tmp_path, monkeypatch):
    log = tmp_path / "hello.log"
    monkeypatch.setenv("EXTERNAL_WORKER_LOG", str(log))
    _external(example, "correct", extra='settings = { header = "include/port.h" }\n')
    assert example.gates("run", "--impl", "fake").code == 0
    assert {"header": "include/port.h"} in [json.loads(line) for line in log.read_text().splitlines()]


def test_an_out_of_date_build_runs_once_and_a_failing_build_is_an_error(example, tmp_path):
    counter = tmp_path / "builds"
    step = json.dumps([sys.executable, "-c", f"open({str(counter)!r}, 'a').write('x')"])
    _external(example, "correct", extra=f'build = [{step}]\nsources = ["example_row/*.py"]\n')
    assert example.gates("run", "--impl", "fake").code == 0
    assert example.gates("run", "--impl", "fake").code == 0
    assert counter.read_text() == "x", "an unchanged implementation is not built again"
    example.write("example_row/extra.py", "X = 1\n")
    assert example.gates("run", "--impl", "fake").code == 0
    assert counter.read_text() == "xx", "a changed source rebuilds it"
    failing = json.dumps([sys.executable, "-c", "import sys; print('compiler says no'); sys.exit(4)"])
    text = example.read("pyproject.toml").replace(f"build = [{step}]", f"build = [{failing}]")
    example.write("pyproject.toml", text)
    result = example.gates("run", "--impl", "fake")
    assert result.code == 3, result.text
    assert "exited with status 4" in result.text and "compiler says no" in result.text


def test_an_unknown_implementation_is_a_usage_error_naming_the_known_ones(example):
    _external(example, "correct")
    result = example.gates("run", "--impl", "rust")
    assert result.code == 2
    assert "--impl rust: unknown implementation (known: python, fake" in result.err


@pytest.mark.parametrize("body, message", [
    ('[tool.vllm-gates.implementations.bad]\ncommand = "worker"\n', "implementations.bad.command: expected the worker command"),
    ('[tool.vllm-gates.implementations.bad]\ncommand = ["w"]\nbuild = [["make"]]\n', "needs `sources`"),
    ('[tool.vllm-gates.implementations.python]\ncommand = ["w"]\n', "only `settings` and `reads` may be set"),
    ('[tool.vllm-gates.implementations.Bad]\ncommand = ["w"]\n', "must match"),
    ('[tool.vllm-gates.error-kinds]\nValueError = "Invalid Argument"\n', "error-kinds.ValueError: expected a kind"),
])
def test_bad_implementation_configuration_is_refused_naming_the_key(example, body, message):
    text = example.read("pyproject.toml").replace("[tool.pytest.ini_options]", body + "\n[tool.pytest.ini_options]")
    example.write("pyproject.toml", text)
    result = example.gates("list")
    assert result.code == 3
    assert message in result.text and "pyproject.toml:" in result.text


def test_a_gate_naming_an_undeclared_operation_is_refused_at_its_line(example):
    _external(example, "correct")
    example.edit("    operation: page-bytes\n", "    operation: page-size\n")
    result = example.gates("list")
    assert result.code == 3
    line = example.line("operation: page-size")
    assert f"gate.yaml:{line}:" in result.text
    assert "operation 'page-size' is not declared in gates/rows/example/operations.yaml (declared: page-bytes)" in result.text


def test_a_gate_with_both_impl_and_operation_is_refused(example):
    _external(example, "correct")
    example.edit("    operation: page-bytes\n", "    operation: page-bytes\n" + IMPL_LINE)
    result = example.gates("list")
    assert result.code == 3 and "names exactly one of `impl`" in result.text


def test_a_malformed_operations_file_names_its_line(example):
    _external(example, "correct")
    example.write("gates/rows/example/operations.yaml", OPERATIONS.replace("    output: int64 bytes\n", ""))
    result = example.gates("list")
    assert result.code == 3
    assert "gates/rows/example/operations.yaml:" in result.text and "operations.page-bytes.output: required key is missing" in result.text
