"""Failure reports point at the YAML: a case failure names file:line, input, impl vs expected/oracle; a property
failure shows the shrunk input as a case to paste and a command to rerun it."""
from __future__ import annotations

import textwrap

import pytest
import yaml

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"
PROPERTIES_NODE = f"{GATE_FILE}::page-bytes::properties"
WRONG_FOR_FOUR_HEADS = ("    return 2 * block_size", "    return (1 if heads == 4 else 0) + 2 * block_size", "example_row/impl.py")


def _pasteable_case(lines: list[str]) -> tuple[str, dict]:
    """The YAML block printed between the 'add under `cases:`' line and the rerun line, and what it parses to."""
    start = next(i for i, line in enumerate(lines) if "to replay it as a named case, add under `cases:`:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.strip().startswith("rerun: "))
    block = textwrap.dedent("\n".join(lines[start:end]))
    return block, yaml.safe_load(block)


def test_property_failure_shows_the_shrunk_example_as_a_case_and_a_rerun_command(example):
    example.edit(*WRONG_FOR_FOUR_HEADS)
    result = example.pytest()
    result.assert_outcomes(failed=1, passed=6)
    line = example.line("    properties:")
    result.stdout.fnmatch_lines([
        f"{GATE_FILE}:{line}:5: gate page-bytes, properties: impl disagrees with the oracle on a generated input",
        "  input : {block_size: 0, heads: 4, head_size: 0, dtype_bytes: 1}",
        "  impl  : 1",
        "  oracle: 0",
        "  (shrunk by hypothesis) to replay it as a named case, add under `cases:`:",
    ])
    result.stdout.fnmatch_lines([f"  rerun: pytest '{PROPERTIES_NODE}' --hypothesis-profile=ci"])
    block, case = _pasteable_case(result.outlines)
    assert case == {"shrunk-example": {"input": {"block_size": 0, "heads": 4, "head_size": 0, "dtype_bytes": 1}}}

    # the rerun command reproduces the failure
    rerun = example.pytest(PROPERTIES_NODE, "--hypothesis-profile=ci")
    rerun.assert_outcomes(failed=1)

    # the printed case, pasted under `cases:`, is a named case that fails the same way
    example.edit("    cases:\n", "    cases:\n" + textwrap.indent(block, "      ") + "\n")
    pasted = example.pytest(f"{GATE_FILE}::page-bytes::shrunk-example")
    pasted.assert_outcomes(failed=1)
    pasted.stdout.fnmatch_lines([f"{GATE_FILE}:{example.line('shrunk-example:')}:7: gate page-bytes, case 'shrunk-example': "
                                 "impl disagrees with the oracle"])


def test_gates_run_shows_the_property_failure_too(example):
    example.edit(*WRONG_FOR_FOUR_HEADS)
    result = example.gates("run", "--profile", "ci")
    assert result.code == 1
    assert "impl disagrees with the oracle on a generated input" in result.out
    assert f"rerun: pytest '{PROPERTIES_NODE}' --hypothesis-profile=ci" in result.out
    assert "EXAMPLE-ROW::page-bytes: FAIL: failed: properties" in result.out


CASE_FAILURES = {
    "impl-not-expected": (("        expect: 32\n", "        expect: 33\n", GATE_FILE), "fp16-page",
                          "impl does not return the expected value",
                          ["  input   : {block_size: 2, heads: 2, head_size: 2, dtype_bytes: 2}",
                           "  impl    : 32", "  expected: 33", "  oracle  : 32"]),
    "oracle-not-expected": (("    return one + one\n", "    return one + one + 1\n", "example_row/oracle.py"), "fp16-page",
                            "the oracle does not return the expected value (the oracle or the case is wrong)",
                            ["  input   : {block_size: 2, heads: 2, head_size: 2, dtype_bytes: 2}",
                             "  oracle  : 33", "  expected: 32", "  impl    : 32"]),
    "message-does-not-match": (('match: "heads must be >= 0"', 'match: "heads must be positive"', GATE_FILE), "negative-heads",
                               "ValueError raised, but its message does not match",
                               ["  input  : {block_size: 2, heads: -1, head_size: 2, dtype_bytes: 2}",
                                "  message: heads must be >= 0, got -1", "  pattern: heads must be positive"]),
    "nothing-raised": (("heads: -1", "heads: 1", GATE_FILE), "negative-heads", "expected ValueError to be raised",
                       ["  input   : {block_size: 2, heads: 1, head_size: 2, dtype_bytes: 2}",
                        "  impl    : 16", "  expected: raises ValueError matching 'heads must be >= 0'"]),
}


@pytest.mark.parametrize("edit,case,headline,lines", CASE_FAILURES.values(), ids=CASE_FAILURES.keys())
def test_case_failure_shows_file_line_input_and_both_sides(example, edit, case, headline, lines):
    example.edit(*edit)
    result = example.pytest(f"{GATE_FILE}::page-bytes::{case}")
    result.assert_outcomes(failed=1)
    where = f"{GATE_FILE}:{example.line(case + ':')}:7"
    result.stdout.fnmatch_lines([f"{where}: gate page-bytes, case '{case}': {headline}", *lines])
