"""Definition errors told once, at the place that is wrong (issue 25 item 6, issue 26 item 4): a case input that is
not a mapping at its `input:` line; an implementation whose worker command, build or file setting cannot be used as
one error at its pyproject.toml line, each gate pointing at it; `gates list` showing root causes with their
follow-ons folded; a broken gate ERROR while the row's other gates still run.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from _vllm_gates.base import yamlsource
from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.definitions.gatefile import load_gate_file
from tests.harness.test_implementations import WORKER, _external

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"
FP16_INPUT = "        input: {block_size: 2, heads: 2, head_size: 2, dtype_bytes: 2}\n"


def _problem_lines(text: str, path: str) -> list[str]:
    """The lines of ``text`` that report a problem at ``path``:LINE:COLUMN."""
    return [line for line in text.splitlines() if re.search(rf"{re.escape(path)}:\d+:\d+: ", line)]


# a case input that is not a mapping ---------------------------------------------------------------------------------

@pytest.mark.parametrize("written, shown", [("[32000]", "list [32000]"), ("32000", "int 32000"), ("~", "null None"),
                                            ("'heads'", "str 'heads'"), ("\n          - 1\n          - 2", "list [1, 2]")])
def test_a_case_input_that_is_not_a_mapping_is_one_definition_error_at_its_line(example, written, shown):
    """Refused where it is written, as `gates list` reads the file (no target is imported)."""
    example.edit(FP16_INPUT, f"        input: {written}\n".replace(": \n", ":\n"))
    line = example.line("input:", 1)
    listed = example.gates("list")
    assert listed.code == 3, listed.text
    expected = (f"{GATE_FILE}:{line}:9: gates[0].cases.fp16-page.input: expected a mapping of the call's arguments "
                f"(omit `input` for none), got {shown}")
    assert _problem_lines(listed.err, GATE_FILE) == ["  " + expected], listed.err


def test_a_run_blames_a_non_mapping_input_on_the_gate_not_the_impl(example):
    example.edit(FP16_INPUT, "        input: [32000]\n")
    result, report = example.run_json()
    assert result.code == 3, result.text
    assert example.gate(report)["verdict"] == "ERROR"
    assert _errors(report) == [f"definition error: {GATE_FILE}:{example.line('input: [32000]')}:9: gates[0].cases.fp16-page.input: "
                               "expected a mapping of the call's arguments (omit `input` for none), got list [32000]"]


def test_both_yaml_paths_refuse_a_non_mapping_input_alike(example, monkeypatch):
    """libyaml's event path and the node-by-node path (tests/harness/test_loader_speed_equivalence.py) load the
    same gate file to the same refusal."""
    example.edit(FP16_INPUT, "        input: [32000]\n")

    def refusal() -> str:
        with pytest.raises(DefinitionError) as caught:
            load_gate_file(example.root / GATE_FILE, example.root, None, ("cpu",))
        return str(caught.value)

    fast = refusal()
    monkeypatch.setattr(yamlsource, "_build_with_libyaml", lambda *args: yamlsource._FALLBACK)
    assert refusal() == fast
    assert fast.count("\n") == 0 and "fp16-page.input: expected a mapping" in fast


# an implementation that cannot be used: one error at its pyproject.toml line ----------------------------------------

def _pyproject_line(example, needle: str) -> int:
    return example.line(needle, relative="pyproject.toml")


def _errors(report: dict) -> list[str]:
    return [item["detail"] for item in report["items"] if item["outcome"] == "error"]


def _assert_once(result, report: dict, setting: str, line: int, says: tuple[str, ...], gates: list[tuple[str, int]]) -> None:
    """Exactly one error item reports the problem at pyproject.toml:LINE (its full text in the run's output); each
    gate's one error item points at it."""
    errors = _errors(report)
    own = [e for e in errors if e.startswith(f"definition error: pyproject.toml:{line}:1: [tool.vllm-gates] {setting}: ")]
    assert len(own) == 1, errors
    shown = [text for text in result.out.splitlines() if text.startswith(own[0][:200])][0]
    for fragment in says:
        assert fragment in shown, shown
    pointers = [e for e in errors if e not in own]
    assert sorted(pointers) == sorted(
        f"definition error: {path}:{gate_line}:5: implementation fake: cannot be used: see the definition error at "
        f"pyproject.toml:{line} ({setting}), reported once in this run" for path, gate_line in gates), pointers


def _two_gates(example) -> list[tuple[str, int]]:
    example.add_gate("second")
    return [(GATE_FILE, example.line("- id: page-bytes")), (GATE_FILE, example.line("- id: second"))]


def test_a_worker_command_that_does_not_exist_is_one_error_naming_the_command_line(example):
    _external(example, "correct")
    example.edit(json.dumps([sys.executable, str(WORKER), "correct"]), '["build/no-such-worker"]', "pyproject.toml")
    gates = _two_gates(example)
    example.add_row("OTHER-ROW")  # a second gate file: still one error, and its gates point at it too
    example.edit("row: EXAMPLE-ROW", "row: OTHER-ROW", "gates/rows/other_row/operations.yaml")
    gates += [("gates/rows/other_row/gate.yaml", line) for _, line in gates]
    result, report = example.run_json("--impl", "fake")
    assert result.code == 3, result.text
    line = _pyproject_line(example, "command = ")
    _assert_once(result, report, "implementations.fake.command", line,
                 ("the worker `build/no-such-worker` could not be started: [Errno 2] No such file or directory",), gates)
    assert all(row["claim"]["verdict"] == "ERROR" for row in report["rows"])
    ours = [line for line in result.out.splitlines() if not line.startswith("FAILED ")]  # pytest's summary: cut to
    # the terminal's width, but whole where CI is set
    assert sum("[tool.vllm-gates] implementations.fake.command: " in line for line in ours) == 2, result.out  # its
    # failure, and its row's reason


@pytest.mark.parametrize("mode, says", [("crash-at-start", ("exited with status 9", "external worker: cannot start")),
                                        ("refuse", ("did not start", "this worker refuses"))])
def test_a_worker_that_ends_before_its_ready_is_one_error_naming_the_command_line(example, mode, says):
    _external(example, mode)
    gates = _two_gates(example)
    result, report = example.run_json("--impl", "fake")
    assert result.code == 3, result.text
    _assert_once(result, report, "implementations.fake.command", _pyproject_line(example, "command = "), says, gates)


def test_a_failing_build_is_one_error_naming_the_build_line(example):
    failing = json.dumps([sys.executable, "-c", "import sys; print('compiler says no'); sys.exit(4)"])
    _external(example, "correct", extra=f'build = [{failing}]\nsources = ["example_row/*.py"]\n')
    gates = _two_gates(example)
    result, report = example.run_json("--impl", "fake")
    assert result.code == 3, result.text
    _assert_once(result, report, "implementations.fake.build", _pyproject_line(example, "build = "),
                 ("exited with status 4", "compiler says no"), gates)


def test_a_file_setting_that_names_no_file_is_one_error_naming_the_setting_line(example):
    _external(example, "correct", extra='settings = { header = "include/missing.h", note = "not a file" }\n')
    example.edit("[tool.vllm-gates]\n", '[tool.vllm-gates]\nfile-settings = ["header", "library"]\n', "pyproject.toml")
    gates = _two_gates(example)
    result, report = example.run_json("--impl", "fake")
    assert result.code == 3, result.text
    _assert_once(result, report, "implementations.fake.settings.header", _pyproject_line(example, "settings = {"),
                 ("header = 'include/missing.h' names no file",), gates)
    assert len(_errors(report)) == 3, "one error, and one pointer per gate: `note` is not a file setting"


def test_a_file_setting_that_names_a_readable_file_passes(example):
    _external(example, "correct", extra='settings = { header = "spec/example.md" }\n')
    example.edit("[tool.vllm-gates]\n", '[tool.vllm-gates]\nfile-settings = ["header"]\n', "pyproject.toml")
    result = example.gates("run", "--impl", "fake")
    assert result.code == 0, result.text


def test_a_file_setting_that_names_a_folder_is_refused(example):
    _external(example, "correct", extra='settings = { header = "spec" }\n')
    example.edit("[tool.vllm-gates]\n", '[tool.vllm-gates]\nfile-settings = ["header"]\n', "pyproject.toml")
    result, report = example.run_json("--impl", "fake")
    assert result.code == 3, result.text
    _assert_once(result, report, "implementations.fake.settings.header", _pyproject_line(example, "settings = {"),
                 ("header = 'spec' names a directory, not a regular file",), [(GATE_FILE, example.line("- id: page-bytes"))])


# gates list: root causes first, follow-ons folded -------------------------------------------------------------------

DEVIATION = """  {name}:
    row: EXAMPLE-ROW
    operation: page-bytes
    upstream: what upstream does
    ours: what we do
    why: because
    checked_by: page-bytes
"""


def test_gates_list_folds_the_errors_that_follow_from_a_broken_row(example):
    example.write("pyproject.toml", example.read("pyproject.toml").replace(
        "[tool.pytest.ini_options]", '[tool.vllm-gates.upstream]\npackage = "vllm"\nversion = "0.33.0"\n\n[tool.pytest.ini_options]'))
    example.write("spec/deviations.yaml", "upstream: \"0.33.0\"\ndeviations:\n" + "".join(DEVIATION.format(name=f"d{i}") for i in range(3)))
    example.edit("    markers: [cpu]\n", "    markers: [cpu]\n    colour: blue\n")
    result = example.gates("list")
    assert result.code == 3, result.text
    lines = result.err.splitlines()
    line = example.line("colour: blue")
    assert lines[:3] == [
        "definition error in row EXAMPLE-ROW:",
        f"  {GATE_FILE}:{line}:5: gates[0].colour: unknown key 'colour' (allowed: build, cases, compare, covers, "
        "description, id, impl, known_bad, known_good, markers, milestone, operation, oracle, properties, strength, taps, timeout, upstream)",
        f"  and 3 more caused by the error above (the first: spec/deviations.yaml:{4}:5: deviations.d0.row: "
        "row 'EXAMPLE-ROW' has no gate file that loads)"], result.err
    assert len(lines) == 3, result.err
    deviations = example.gates("deviations")
    assert deviations.code == 3 and deviations.err == result.err


def test_gates_list_still_shows_a_deviation_error_of_its_own(example):
    example.write("pyproject.toml", example.read("pyproject.toml").replace(
        "[tool.pytest.ini_options]", '[tool.vllm-gates.upstream]\npackage = "vllm"\nversion = "0.33.0"\n\n[tool.pytest.ini_options]'))
    example.write("spec/deviations.yaml", "upstream: \"0.33.0\"\ndeviations:\n" + DEVIATION.format(name="d0").replace("page-bytes\n", "no-such-op\n", 1))
    result = example.gates("list")
    assert result.code == 3, result.text
    lines = result.err.splitlines()
    assert lines[:2] == ["definition error:", "spec/deviations.yaml:5:5: deviations.d0.operation: operation "
                                              "'no-such-op' is not declared in gates/rows/example/operations.yaml"], result.err
    assert "caused by the error above" not in result.err


# a definition error in one gate: that gate ERROR, the others run ----------------------------------------------------

def test_a_bad_key_in_one_gate_makes_only_that_gate_error(example):
    example.add_gate("second")
    example.edit("id: second\n", "id: second\n    colour: blue\n")
    line = example.line("colour: blue")
    result, report = example.run_json()
    assert result.code == 3, result.text
    assert example.gate(report, "page-bytes")["verdict"] == "PASS"
    broken = example.gate(report, "second")
    assert broken["verdict"] == "ERROR"
    assert broken["reason"] == (f"definition error: {GATE_FILE}:{line}:5: gates[1].colour: unknown key 'colour' (allowed: "
                                "build, cases, compare, covers, description, id, impl, known_bad, known_good, markers, milestone, "
                                "operation, oracle, properties, strength, taps, timeout, upstream)")
    assert example.row(report)["claim"]["verdict"] == "ERROR"
    assert len(_errors(report)) == 1
    outcome = example.pytest()
    assert outcome.ret == 3
    outcome.assert_outcomes(failed=1, passed=7)


def test_a_gate_with_an_unknown_milestone_still_makes_the_row_error(example):
    """Its milestone is not the roadmap's, so no milestone holds it: the row's verdict carries it."""
    example.add_gate("second")
    text = example.read()
    at = text.index("id: second")
    example.write(GATE_FILE, text[:at] + text[at:].replace("milestone: M1", "milestone: M9", 1))
    result, report = example.run_json()
    assert result.code == 3, result.text
    assert example.gate(report, "second")["verdict"] == "ERROR"
    assert [m["verdict"] for m in example.row(report)["milestones"]] == ["PASS"]
    assert example.row(report)["claim"]["verdict"] == "ERROR"


def test_gates_list_reports_a_gate_error_as_before(example):
    example.add_gate("second")
    example.edit("id: second\n", "id: second\n    colour: blue\n")
    result = example.gates("list")
    assert result.code == 3
    assert len(_problem_lines(result.err, GATE_FILE)) == 1
