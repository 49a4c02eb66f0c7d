"""`gates audit`: each gate must reject a wrong-everywhere stand-in and each of its known-bad entries."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"
ORACLE_LINE = "    oracle: example_row.oracle:counted_page_bytes\n"
KNOWN_BAD = "    known_bad:\n"
NEGATIVE_HEADS_CASE = ("      negative-heads:\n        input: {block_size: 2, heads: -1, head_size: 2, dtype_bytes: 2}\n"
                       "        raises: {type: ValueError, match: \"heads must be >= 0\"}\n")
LENIENT = '''"""A comparison that accepts anything: a gate using it cannot fail."""


def anything_goes(actual, expected):
    return True
'''


def _drop_known_bad(example):
    text = example.read()
    example.write(GATE_FILE, text[:text.index(KNOWN_BAD)])


def test_audit_passes_on_the_example(example):
    result = example.gates("audit")
    assert result.code == 0, result.text
    row = next(line for line in result.out.splitlines() if line.startswith("EXAMPLE-ROW"))
    assert "page-bytes" in row and "fails (case 'fp16-page')" in row and row.endswith("3/3 rejected")
    assert "audit exit 0" in result.out


def _only_an_empty_case_map(example):
    text = example.read()
    example.write(GATE_FILE, text[:text.index("    cases:\n")] + "    cases: {}\n")


def test_a_gate_that_checks_nothing_never_reaches_the_audit(example):
    """`cases: {}` and no properties checks nothing: the loader refuses it, so the audit and the run report ERROR
    (exit 3) instead of a gate that 'passes' zero checks. With the stand-in kept away from a gate's own compare,
    no loadable gate can pass the wrong-everywhere stand-in; the audit's remaining duty is the known-bad entries."""
    _only_an_empty_case_map(example)
    listed = example.gates("list")
    assert listed.code == 3
    assert f"{GATE_FILE}:{example.line('cases: {}')}:" in listed.err
    audited = example.gates("audit")
    assert audited.code == 3, audited.text
    ran, report = example.run_json()
    assert ran.code == 3


def test_a_lenient_compare_does_not_fool_the_audit_stand_in(example):
    """A `compare` that accepts anything would make every comparison pass, but the harness never hands the audit's
    wrong-everywhere result to a gate's compare (checks._agree): the stand-in is still rejected, the audit exits 0.
    Such a gate is caught by its known-bad entries instead (next test), or is WEAK without them."""
    example.write("example_row/lenient.py", LENIENT)
    example.edit(ORACLE_LINE, ORACLE_LINE + "    compare: example_row.lenient:anything_goes\n")
    example.edit(NEGATIVE_HEADS_CASE, "")
    _drop_known_bad(example)
    result = example.gates("audit")
    assert result.code == 0, result.text
    assert "fails (case 'fp16-page')" in result.out and "0/0 rejected" in result.out
    _, report = example.run_json()
    assert example.gate(report)["verdict"] == "WEAK"


def test_audit_fails_when_the_known_bad_entries_pass(example):
    """The same lenient compare with the example's three known-bad entries: none is rejected, the audit exits 1."""
    example.write("example_row/lenient.py", LENIENT)
    example.edit(ORACLE_LINE, ORACLE_LINE + "    compare: example_row.lenient:anything_goes\n")
    example.edit(NEGATIVE_HEADS_CASE, "")
    result = example.gates("audit")
    assert result.code == 1, result.text
    assert "0/3 rejected" in result.out
    assert "gate page-bytes cannot tell drops-factor-two from correct" in result.out


def test_a_raises_only_gate_with_a_broad_pattern_can_still_fail(example):
    """A gate whose only case is `raises: {type: Exception}` (matched by any error) still rejects the stand-in:
    the stand-in returns instead of raising. The audit says so and exits 0."""
    text = example.read()
    head = text[:text.index("    cases:\n")]
    example.write(GATE_FILE, head.replace(ORACLE_LINE, "") + (
        "    cases:\n"
        "      anything-raises:\n"
        "        input: {block_size: 2, heads: -1, head_size: 2, dtype_bytes: 2}\n"
        "        raises: {type: Exception}\n"))
    result = example.gates("audit")
    assert result.code == 0, result.text
    assert "fails (case 'anything-raises')" in result.out


def test_audit_reports_a_definition_error(example):
    example.edit("markers: [cpu]", "markers: [tpu]")
    result = example.gates("audit")
    assert result.code == 3
    assert f"{GATE_FILE}:{example.line('markers: [tpu]')}:" in result.text
