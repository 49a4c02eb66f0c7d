"""Each malformed gate file is a definition error naming gates/rows/example/gate.yaml:<line>, the key and the value.

Three front doors are checked separately: `gates list` (loads and validates, does not import targets), `gates run`
(exit 3) and plain pytest (a failed definition item, and the same exit 3). The expected line is found by searching the mutated text for
the line that holds the mistake, and compared exactly.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"



@dataclass(frozen=True)
class Malformed:
    """One mistake: edits to make it, the text of the line it is on, and what the error must say."""

    id: str
    edits: tuple[tuple[str, str, str], ...]  # (file, old, new)
    needle: str  # the mistake is on the line holding this text (in the mutated gate file)
    says: tuple[str, ...]  # fragments of the message: key, value, what is wrong
    occurrence: int = 1
    resolves: bool = False  # found when targets are imported (gates run, pytest), not by `gates list`
    append_gate: bool = False  # append a copy of the gate (same id)
    bugs: dict[str, str] = field(default_factory=dict)  # front door -> xfail reason


def _gate(old: str, new: str) -> tuple[str, str, str]:
    return (GATE_FILE, old, new)


CASES = [
    Malformed("yaml-syntax", (_gate("        expect: 32\n", "        expect: 32: 33\n"),), "expect: 32: 33",
              ("YAML syntax error", "mapping values are not allowed here")),
    Malformed("unknown-key", (_gate("    markers: [cpu]\n", "    markers: [cpu]\n    colour: blue\n"),), "colour: blue",
              ("gates[0].colour", "unknown key 'colour'")),
    Malformed("markers-is-a-string", (_gate("    markers: [cpu]", '    markers: "cpu"'),), 'markers: "cpu"',
              ("gates[0].markers", "expected a list of strings", "'cpu'")),
    Malformed("max-examples-not-int", (_gate("max_examples: 50", "max_examples: ten"),), "max_examples: ten",
              ("gates[0].properties.max_examples", "expected a positive integer", "'ten'")),
    Malformed("expect-and-raises", (_gate("        expect: 32\n", "        expect: 32\n        raises: {type: ValueError}\n"),),
              "fp16-page:", ("gates[0].cases.fp16-page", "either `expect` or `raises`, not both")),
    Malformed("input-not-a-mapping", (_gate("input: {block_size: 2, heads: 2, head_size: 2, dtype_bytes: 2}", "input: [32000]"),),
              "input: [32000]", ("gates[0].cases.fp16-page.input", "expected a mapping of the call's arguments", "list [32000]")),
    Malformed("duplicate-gate-id", (), "- id: page-bytes", ("gates[1].id", "duplicate gate id 'page-bytes'", "first at line 6"),
              occurrence=2, append_gate=True),
    Malformed("duplicate-yaml-key", (_gate("    markers: [cpu]\n", "    markers: [cpu]\n    markers: [gpu]\n"),), "markers: [gpu]",
              ("markers", "duplicate key")),
    Malformed("unknown-marker", (_gate("markers: [cpu]", "markers: [cpu, tpu]"),), "markers: [cpu, tpu]",
              ("gates[0].markers", "unknown marker 'tpu'")),
    Malformed("unknown-milestone", (_gate("milestone: M1", "milestone: M9"),), "milestone: M9",
              ("milestone", "'M9' is not a milestone of EXAMPLE-ROW")),
    Malformed("covers-not-in-spec", (_gate("covers: [EX-1.1, EX-1.2]", "covers: [EX-1.1, EX-9.9]"),), "covers: [EX-1.1, EX-9.9]",
              ("covers", "'EX-9.9' is not declared in spec/example.md")),
    Malformed("unknown-row", (_gate("row: EXAMPLE-ROW", "row: NO-SUCH-ROW"),), "row: NO-SUCH-ROW",
              ("row", "'NO-SUCH-ROW' is not in spec/roadmap.yaml")),
    Malformed("empty-gates-list", (), "gates: []", ("gates", "the row defines no gate")),
    Malformed("target-without-colon", (_gate("example_row.oracle:counted_page_bytes", "example_row.oracle.counted_page_bytes"),),
              "example_row.oracle.counted_page_bytes",
              ("gates[0].oracle", "'example_row.oracle.counted_page_bytes' is not a target written module:attribute",
               "(no ':' between the module and the attribute)")),
    Malformed("missing-module", (_gate("example_row.oracle:counted_page_bytes", "example_row.nope:counted_page_bytes"),),
              "example_row.nope:", ("page-bytes.oracle", "cannot import module 'example_row.nope'"), resolves=True),
    Malformed("missing-attribute", (_gate("example_row.oracle:counted_page_bytes", "example_row.oracle:no_such_oracle"),),
              "no_such_oracle", ("page-bytes.oracle", "has no attribute 'no_such_oracle'"), resolves=True),
    Malformed("disallowed-root", (_gate("example_row.oracle:counted_page_bytes", "os:system"),), "os:system",
              ("page-bytes.oracle", "'os:system' is outside the allowed import roots (example_row, gates;"), resolves=True),
    Malformed("known-bad-signature", (
        ("gates/rows/example/known_bad.py", "def accepts_negative(", "def two_arguments(block_size: int, heads: int) -> int:\n"
                                                         "    return 0\n\n\ndef accepts_negative("),
        _gate("accepts-negative: .known_bad:accepts_negative", "accepts-negative: .known_bad:two_arguments")),
        "accepts-negative:", ("known_bad.accepts-negative", "takes (block_size, heads)",
                              "'example_row.impl:page_bytes' takes (block_size, heads, head_size, dtype_bytes)"), resolves=True),
]


def _apply(example, case: Malformed) -> int:
    """Make the mistake; return the line it is on."""
    for relative, old, new in case.edits:
        example.edit(old, new, relative)
    if case.append_gate:
        example.add_gate("page-bytes")
    if case.id == "empty-gates-list":
        text = example.read()
        example.write(GATE_FILE, text[:text.index("gates:\n")] + "gates: []\n")
    return example.line(case.needle, case.occurrence)


def _params(front_door: str, cases=CASES):
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.bugs[front_door])] if front_door in c.bugs else [])
            for c in cases]


def _assert_names(text: str, line: int, case: Malformed) -> None:
    for fragment in case.says:
        assert fragment in text, f"{fragment!r} missing from:\n{text}"
    assert f"{GATE_FILE}:{line}:" in text, f"expected {GATE_FILE}:{line}: in:\n{text}"


@pytest.mark.parametrize("case", _params("list", [c for c in CASES if not c.resolves]))
def test_gates_list_names_file_line_key_and_value(example, case):
    line = _apply(example, case)
    result = example.gates("list")
    assert result.code == 3
    assert "definition error in row" in result.err
    _assert_names(result.err, line, case)


@pytest.mark.parametrize("case", _params("run"))
def test_gates_run_exits_3_naming_file_line(example, case):
    line = _apply(example, case)
    result = example.gates("run")
    assert result.code == 3, result.text
    _assert_names(result.text, line, case)
    assert "ERROR" in result.out


@pytest.mark.parametrize("case", _params("pytest"))
def test_pytest_report_names_file_line(example, case):
    line = _apply(example, case)
    result = example.pytest()
    assert result.ret == 3, "pytest exits with the claim exit code, as gates run does"
    text = result.stdout.str()
    _assert_names(text, line, case)
    assert f"definition error: {GATE_FILE}:{line}:" in text
    # one definition item; a second gate that loads (duplicate-gate-id's first) still runs its 7 items
    result.assert_outcomes(failed=1, passed=7 if case.append_gate else 0)


def _second_file_for_the_same_row(example):
    example.write("gates/rows/example_again/gate.yaml", example.read())


def test_two_gate_files_for_one_row_are_an_error(example):
    _second_file_for_the_same_row(example)
    assert example.gates("list").code == 3
    ran = example.gates("run")
    assert ran.code == 3
    assert "EXAMPLE-ROW already has gate file" in ran.out


def test_two_gate_files_for_one_row_name_the_row_line(example):
    _second_file_for_the_same_row(example)
    assert re.search(r"gates/rows/example(_again)?/gate\.yaml:1:\d+: row", example.gates("list").err)


def test_pytest_flags_two_gate_files_for_one_row(example):
    _second_file_for_the_same_row(example)
    assert example.pytest().ret != pytest.ExitCode.OK
