"""The interface file cannot drift from its gates (issue 25): a case expecting an error of a kind its operation does
not declare, and a declared limit no case reaches, are definition errors at the right file:line; agreement is quiet."""
from __future__ import annotations

import pytest

from _vllm_gates.base.errors import Location
from _vllm_gates.definitions.agreement import reaches
from _vllm_gates.definitions.model import Case, Limit, Raises
from tests.harness.test_implementations import OPERATIONS as BASE_OPERATIONS

pytestmark = pytest.mark.cpu

OPERATIONS_FILE = "gates/rows/example/operations.yaml"
OPERATIONS = BASE_OPERATIONS.replace("    errors: {invalid-argument: the head count}\n", """    errors:
      invalid-argument: the head count
    limits:
      heads-floor: {at: input.heads, min: 0, note: a negative count is refused}
""")  # test_implementations' page-bytes, its errors one per line and a limit the negative-heads case reaches
KINDS = """[tool.vllm-gates.error-kinds]
ValueError = "invalid-argument"
RuntimeError = "runtime-error"

[tool.pytest.ini_options]"""


def _interface(example, operations: str = OPERATIONS, kinds: str = KINDS) -> None:
    """The example gate as an operation of an operations.yaml, with the project's error kinds."""
    example.write(OPERATIONS_FILE, operations)
    example.edit("    impl: example_row.impl:page_bytes\n", "    operation: page-bytes\n")
    example.write("pyproject.toml", example.read("pyproject.toml").replace("[tool.pytest.ini_options]", kinds))


def test_an_interface_that_agrees_with_its_gates_loads_clean(example):
    _interface(example)
    result = example.gates("list")
    assert result.code == 0, result.text
    assert "page-bytes" in result.out


def test_a_case_expecting_an_undeclared_error_kind_is_refused_at_the_case(example):
    _interface(example, OPERATIONS.replace("      invalid-argument: the head count\n", "      runtime-error: a failed allocation\n"))
    result = example.gates("list")
    assert result.code == 3, result.text
    case_line, errors_line = example.line("negative-heads:"), example.line("errors:", relative=OPERATIONS_FILE)
    assert (f"gates/rows/example/gate.yaml:{case_line}:7: gate page-bytes: case negative-heads: raises.type: "
            f"expects error kind 'invalid-argument' (ValueError), which operation page-bytes declares runtime-error "
            f"at {OPERATIONS_FILE}:{errors_line}") in result.text


def test_an_operation_without_errors_is_named_where_it_is_declared(example):
    _interface(example, OPERATIONS.replace("    errors:\n      invalid-argument: the head count\n", ""))
    result = example.gates("list")
    assert result.code == 3, result.text
    assert (f"operation page-bytes declares no errors ({OPERATIONS_FILE}:"
            f"{example.line('page-bytes:', relative=OPERATIONS_FILE)})") in result.text


def test_an_expected_class_without_an_error_kind_is_refused(example):
    _interface(example, kinds=KINDS.replace('ValueError = "invalid-argument"\n', ""))
    result = example.gates("list")
    assert result.code == 3, result.text
    assert f"gate.yaml:{example.line('negative-heads:')}:" in result.text
    assert "ValueError has no error kind in [tool.vllm-gates.error-kinds] of pyproject.toml" in result.text


def test_a_limit_no_case_reaches_is_refused_at_the_limit(example):
    _interface(example, OPERATIONS.replace("min: 0", "max: INT32_MAX"))
    result = example.gates("list")
    assert result.code == 3, result.text
    line = example.line("heads-floor:", relative=OPERATIONS_FILE)
    assert (f"{OPERATIONS_FILE}:{line}:7: operations.page-bytes.limits.heads-floor: limit heads-floor "
            f"(input.heads <= INT32_MAX) of operation page-bytes is reached by no case of gate page-bytes") in result.text
    example.edit("    cases:\n", "    cases:\n      most-heads:\n        input: {block_size: 1, heads: 2147483647, head_size: 1, dtype_bytes: 1}\n"
                                   "        expect: 4294967294\n")
    assert example.gates("list").code == 0


def test_the_run_refuses_the_disagreement_too(example):
    """`gates run` (the plugin's collection) loads the gate file with the project's error kinds as `gates list` does."""
    _interface(example, OPERATIONS.replace("      invalid-argument: the head count\n", "      runtime-error: a failed allocation\n"))
    result = example.gates("run")
    assert result.code == 3, result.text
    assert "expects error kind 'invalid-argument' (ValueError), which operation page-bytes declares runtime-error" in result.text


MALFORMED_LIMITS = {  # the limit as written -> what the refusal says
    "{at: input.head_count, max: 7}": "'head_count' is not a key of the operation's input (declared: block_size, heads",
    "{at: heads, max: 7}": "'heads' is not a place in a case",
    "{at: input.heads, max: INT33_MAX}": "expected an integer or one of INT32_MIN, INT32_MAX",
    "{at: input.heads, max: 7, min: 0}": "a limit gives exactly one of `max` or `min`",
    "{at: input.heads, max: true}": "expected an integer or one of",
}


@pytest.mark.parametrize("limit", MALFORMED_LIMITS)
def test_a_malformed_limit_names_its_line(example, limit):
    says = MALFORMED_LIMITS[limit]
    _interface(example, OPERATIONS.replace("{at: input.heads, min: 0, note: a negative count is refused}", limit))
    result = example.gates("list")
    assert result.code == 3, result.text
    assert f"{OPERATIONS_FILE}:{example.line('heads-floor:', relative=OPERATIONS_FILE)}:" in result.text
    assert says in result.text


HERE = Location("x", 1, 1)


def _case(input: dict, expect: object = None, has_expect: bool = False, raises: Raises | None = None) -> Case:
    return Case("c", HERE, input, has_expect, expect, raises)


@pytest.mark.parametrize("limit, case, reached", [
    (Limit("n", HERE, ("input", "a", "b"), "INT32_MAX", 2**31 - 1, True), _case({"a": {"b": 2**31 - 1}}), True),
    (Limit("n", HERE, ("input", "a", "b"), "INT32_MAX", 2**31 - 1, True), _case({"a": {"b": 2**31}}), True),
    (Limit("n", HERE, ("input", "a", "b"), "INT32_MAX", 2**31 - 1, True), _case({"a": {"b": 2**31 - 2}}), False),
    (Limit("n", HERE, ("input", "a"), "INT32_MAX", 2**31 - 1, True), _case({"a": True}), False),
    (Limit("n", HERE, ("input", "a"), "0", 0, False), _case({"a": -1}), True),
    (Limit("n", HERE, ("input", "a"), "0", 0, False), _case({"a": 1}), False),
    (Limit("n", HERE, ("output",), "INT32_MAX", 2**31 - 1, True), _case({}, 2**31 - 1, True), True),
    (Limit("n", HERE, ("output",), "INT32_MAX", 2**31 - 1, True), _case({}, 2**31 - 1, False), False),
    (Limit("n", HERE, ("output", "num_blocks"), "INT32_MAX", 2**31 - 1, True), _case({}, {"num_blocks": 2**31 - 1}, True), True),
    (Limit("n", HERE, ("output",), "INT32_MAX", 2**31 - 1, True),
     _case({}, raises=Raises("ValueError", "more than the 2147483647 an engine counts")), True),
    (Limit("n", HERE, ("output",), "INT32_MAX", 2**31 - 1, True),
     _case({}, raises=Raises("ValueError", "2147483647", facts=("int32_t",))), False),
    (Limit("n", HERE, ("output",), "INT32_MAX", 2**31 - 1, True),
     _case({}, raises=Raises("ValueError", "int32_t", facts=("2147483647",))), True),
])
def test_what_reaches_a_limit(limit, case, reached):
    assert reaches(case, limit) is reached
