"""Verdicts and exit codes: isolation of a broken row, known-bad that passes, EMPTY, claims, WEAK, gate crashes."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"
KNOWN_BAD = "    known_bad:\n"


def _verdicts(report):
    return {r["row"]: r["claim"]["verdict"] for r in report["rows"]}


# 2. one bad gate file does not hide other rows ------------------------------------------------------------------

BREAKAGES = {
    "unknown-key": ("    markers: [cpu]\n", "    markers: [cpu]\n    colour: blue\n"),
    "yaml-syntax": ("    markers: [cpu]\n", "    markers: [cpu\n"),
    "missing-module": ("example_row.oracle:counted_page_bytes", "example_row.nope:counted_page_bytes"),
    "unknown-marker": ("markers: [cpu]", "markers: [tpu]"),
}


@pytest.mark.parametrize("old,new", BREAKAGES.values(), ids=BREAKAGES.keys())
def test_a_broken_gate_file_does_not_hide_other_rows(example, old, new):
    example.add_row("SECOND-ROW")
    example.edit(old, new)
    result, report = example.run_json()
    assert result.code == 3, result.text
    assert _verdicts(report) == {"EXAMPLE-ROW": "ERROR", "SECOND-ROW": "PASS"}
    second = example.gate(report, row="SECOND-ROW")
    assert (second["verdict"], second["cases_passed"], second["known_bad_rejected"], second["examples"]) == ("PASS", 2, 3, 50)
    assert example.row(report, "SECOND-ROW")["claim"]["claim_met"] is True
    assert example.row(report, "EXAMPLE-ROW")["claim"]["claim_met"] is False
    second_items = [i for i in report["items"] if i["row"] == "SECOND-ROW"]
    assert len(second_items) == 7 and all(i["outcome"] == "passed" for i in second_items)
    # pytest, the other front door: the good row's seven items (audit included) pass, the broken file is one failed item
    example.pytest().assert_outcomes(passed=7, failed=1)


def test_the_good_row_alone_is_green_while_another_is_broken(example):
    example.add_row("SECOND-ROW")
    example.edit("markers: [cpu]", "markers: [tpu]")
    result = example.gates("run", "SECOND-ROW")
    assert result.code == 0, result.text


# 3. a known-bad that passes ---------------------------------------------------------------------------------------

def test_known_bad_that_is_the_impl_fails_its_gate(example):
    example.edit(KNOWN_BAD, KNOWN_BAD + "      itself: example_row.impl:page_bytes\n")
    result, report = example.run_json()
    assert result.code == 1, result.text
    gate = example.gate(report)
    assert gate["verdict"] == "FAIL"
    assert (gate["known_bad_rejected"], gate["known_bad_total"]) == (3, 4)
    assert "known_bad[itself]" in gate["reason"]
    item = next(i for i in report["items"] if i["name"] == "known_bad[itself]")
    assert item["outcome"] == "failed"
    assert "gate page-bytes cannot tell itself from correct" in item["detail"]
    assert example.row(report)["claim"] == {"row": "EXAMPLE-ROW", "milestone": None, "state": "DONE", "verdict": "FAIL",
                                            "claim_met": False, "reason": "claims DONE but the verdict is FAIL",
                                            "claimed_by": None, "judged": True}
    text = example.pytest().stdout.str()
    assert f"{GATE_FILE}:" in text and "gate page-bytes cannot tell itself from correct: it passed all" in text


# 4. EMPTY -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("state", ["INVENTORIED", "ACTIVE", "DONE"])
def test_a_milestone_without_gate_is_empty_and_not_green(example, state):
    example.set_roadmap({"EXAMPLE-ROW": ("ACTIVE", {"M1": "DONE", "M2": state})})
    result, report = example.run_json()
    assert result.code == 1, result.text
    milestones = {m["milestone"]: m for m in example.row(report)["milestones"]}
    assert (milestones["M1"]["verdict"], milestones["M1"]["claim_met"]) == ("PASS", True)
    assert (milestones["M2"]["verdict"], milestones["M2"]["claim_met"]) == ("EMPTY", False)
    assert milestones["M2"]["reason"] == "no gate covers this milestone"
    assert example.row(report)["claim"]["verdict"] == "EMPTY"


def test_marker_gpu_on_a_cpu_only_row_runs_nothing_and_exits_non_zero(example):
    result = example.gates("run", "--marker", "gpu")
    assert result.code == 5, result.text
    assert "0 checks" in result.out and "exit 5" in result.out


def test_a_row_without_gate_file_is_empty(example):
    (example.root / GATE_FILE).unlink()
    result, report = example.run_json()
    assert result.code == 5, result.text
    claim = example.row(report)["claim"]
    assert (claim["verdict"], claim["claim_met"], claim["reason"]) == ("EMPTY", False, "no gate file for this row")


def test_an_empty_gate_list_is_a_definition_error(example):
    text = example.read()
    example.write(GATE_FILE, text[:text.index("gates:\n")] + "gates: []\n")
    result = example.gates("run")
    assert result.code == 3
    assert f"{GATE_FILE}:5:1: gates: the row defines no gate" in result.text


# 5. claims ------------------------------------------------------------------------------------------------------------

def test_done_over_a_failing_gate_exits_1(example):
    example.edit("    return 2 * block_size", "    return block_size", "example_row/impl.py")
    result, report = example.run_json()
    assert result.code == 1, result.text
    assert example.gate(report)["verdict"] == "FAIL"
    assert example.row(report)["claim"]["reason"] == "claims DONE but the verdict is FAIL"
    assert "EXAMPLE-ROW: claims DONE but the verdict is FAIL" in result.out


def test_partial_with_a_skipped_gpu_gate_exits_0(example, no_cuda):
    example.set_roadmap({"EXAMPLE-ROW": ("PARTIAL", {"M1": "PARTIAL"})})
    example.add_gate("page-bytes-gpu", "[gpu]")
    result, report = example.run_json()
    assert result.code == 0, result.text
    assert example.gate(report)["verdict"] == "PASS"
    gpu = example.gate(report, "page-bytes-gpu")
    assert gpu["verdict"] == "SKIPPED" and "CUDA" in gpu["reason"]
    assert example.row(report)["claim"]["claim_met"] is True


def test_done_with_a_skipped_gpu_gate_exits_1(example, no_cuda):
    example.add_gate("page-bytes-gpu", "[gpu]")
    result, report = example.run_json()
    assert result.code == 1, result.text
    assert example.row(report)["claim"]["reason"] == "claims DONE but the verdict is SKIPPED"


def test_partial_with_a_failing_cpu_gate_exits_1(example, no_cuda):
    example.set_roadmap({"EXAMPLE-ROW": ("PARTIAL", {"M1": "PARTIAL"})})
    example.add_gate("page-bytes-gpu", "[gpu]")
    example.edit("    return 2 * block_size", "    return block_size", "example_row/impl.py")
    result, report = example.run_json()
    assert result.code == 1, result.text
    assert example.gate(report)["verdict"] == "FAIL"
    assert example.row(report)["claim"]["reason"] == "claims PARTIAL but the verdict is FAIL"


def _drop_known_bad(example):
    text = example.read()
    example.write(GATE_FILE, text[:text.index(KNOWN_BAD)])


def test_a_gate_without_known_bad_is_weak_and_cannot_back_done(example):
    _drop_known_bad(example)
    result, report = example.run_json()
    assert result.code == 1, result.text
    gate = example.gate(report)
    assert (gate["verdict"], gate["cases_passed"]) == ("WEAK", 2)
    assert gate["reason"] == "no known-bad entry: the gate has not shown it can fail"
    assert example.row(report)["claim"]["reason"] == "claims DONE but the verdict is WEAK"


@pytest.mark.parametrize("state,code", [("PARTIAL", 1), ("ACTIVE", 0)])
def test_weak_under_other_claims(example, state, code):
    """PARTIAL wants PASS (gpu skips aside); a row still being built (ACTIVE) may carry a WEAK gate."""
    _drop_known_bad(example)
    example.set_roadmap({"EXAMPLE-ROW": (state, {"M1": state})})
    result = example.gates("run")
    assert result.code == code, result.text


# 9. the gate's own code crashing is ERROR, never FAIL or PASS -------------------------------------------------------

BUILDERS = '''"""Gate machinery for the crash tests."""
from hypothesis import strategies as st

from vllm_gates import Call


def plain(data):
    return Call(kwargs=dict(data))


def always_crashes(data):
    raise RuntimeError("builder bug")


def returns_a_dict(data):
    return dict(data)


def crashes_on_many_heads(data):
    if data["heads"] >= 3:
        raise RuntimeError("builder bug on many heads")
    return Call(kwargs=dict(data))


def compare_crashes(actual, expected):
    raise ZeroDivisionError("compare bug")


def strategy_crashes():
    raise RuntimeError("strategy bug")


def not_a_strategy():
    return [1, 2, 3]
'''

ORACLE_LINE = "    oracle: example_row.oracle:counted_page_bytes\n"
PROPERTIES = "    properties:\n      strategy: .strategies:geometries\n      max_examples: 50\n"
BUILD = "    build: example_row.builders:"
# (edit old, edit new, what the error says, keep the properties): where the crash already happens in the named
# cases the properties are dropped, which spares hypothesis shrinking a crash on every input (seconds per run)
CRASHES = {
    "builder-raises": (ORACLE_LINE, ORACLE_LINE + BUILD + "always_crashes\n", "impl builder always_crashes failed on input", False),
    "builder-returns-a-dict": (ORACLE_LINE, ORACLE_LINE + BUILD + "returns_a_dict\n",
                               "returned dict, expected vllm_gates.Call", False),
    "oracle-builder-raises": (ORACLE_LINE, ORACLE_LINE + "    build: {impl: example_row.builders:plain, oracle: example_row.builders:always_crashes}\n",
                              "oracle builder always_crashes failed", False),
    "compare-raises": (ORACLE_LINE, ORACLE_LINE + "    compare: example_row.builders:compare_crashes\n",
                       "compare example_row.builders:compare_crashes crashed: ZeroDivisionError", False),
    "builder-crashes-on-a-generated-input": (ORACLE_LINE, ORACLE_LINE + BUILD + "crashes_on_many_heads\n",
                                             "builder crashes_on_many_heads failed on input", True),
    "strategy-raises": (".strategies:geometries", "example_row.builders:strategy_crashes",
                        "strategy example_row.builders:strategy_crashes failed: RuntimeError: strategy bug", True),
    "strategy-not-a-strategy": (".strategies:geometries", "example_row.builders:not_a_strategy",
                                "returned list, expected a hypothesis strategy", True),
}


@pytest.mark.parametrize("old,new,says,keep_properties", CRASHES.values(), ids=CRASHES.keys())
def test_a_crashing_gate_is_error_not_fail(example, old, new, says, keep_properties):
    example.write("example_row/builders.py", BUILDERS)
    example.edit(old, new)
    if not keep_properties:
        example.edit(PROPERTIES, "")
    result, report = example.run_json("--profile", "ci")
    assert result.code == 3, result.text
    gate = example.gate(report)
    assert gate["verdict"] == "ERROR"
    assert example.row(report)["claim"]["verdict"] == "ERROR"
    assert any(i["outcome"] == "error" for i in report["items"])
    assert not any(i["outcome"] == "failed" for i in report["items"]), "a crash of the gate's own code is not a FAIL"
    assert says in result.out


def test_pytest_reports_a_crashing_builder_as_a_gate_error(example):
    example.write("example_row/builders.py", BUILDERS)
    example.edit(ORACLE_LINE, ORACLE_LINE + BUILD + "always_crashes\n")
    example.edit(PROPERTIES, "")
    result = example.pytest()
    text = result.stdout.str()
    assert "gate error (the gate's own code failed, not the implementation): impl builder always_crashes failed on input" in text
    assert "RuntimeError: builder bug" in text
    result.assert_outcomes(failed=6)


def test_a_builder_crash_next_to_a_real_mismatch_is_still_error(example):
    example.write("example_row/builders.py", BUILDERS)
    example.edit(ORACLE_LINE, ORACLE_LINE + BUILD + "crashes_on_many_heads\n")
    example.edit("    return 2 * block_size", "    return (1 if heads == 1 else 0) + 2 * block_size", "example_row/impl.py")
    result, report = example.run_json("--profile", "ci")
    assert example.gate(report)["verdict"] == "ERROR"
    assert result.code == 3
