"""One gate at a time (issue 25): a run that selects part of a row (`-k`, a node id, `gates run ROW --gate ID
--case NAME`) shows and judges only what it selected, exits on whether that passed, judges no claim, and a gate it
ran in part is never evidence. A run of whole rows is judged as before (test_verdicts, test_untrusted_subjects)."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"
NOISE = ("INCOMPLETE", "UNPROVEN", "(milestone)", "(row)")


def _table_gates(text: str) -> list[str]:
    """The gate column of the row table's lines."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("row ") and "verdict" in line) + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return [line.split()[2] for line in lines[start:end]]


@pytest.fixture
def two_gates(example):
    """page-bytes fails its case fp16-page; `second`, a copy of the gate as it was, passes."""
    example.edit("        expect: 32\n", "        expect: 33\n")
    example.add_gate("second")
    return example


def test_k_on_one_gate_prints_that_gates_lines_and_exits_on_its_result(two_gates):
    passing = two_gates.pytest(GATE_FILE, "-k", "second")
    text = passing.stdout.str()
    assert passing.ret == 0, text
    assert _table_gates(text) == ["second"]
    assert not [word for word in NOISE if word in text], text
    failing = two_gates.pytest(GATE_FILE, "-k", "page-bytes")
    assert failing.ret == 1
    assert _table_gates(failing.stdout.str()) == ["page-bytes"]
    assert "EXAMPLE-ROW::page-bytes: FAIL: failed: fp16-page" in failing.stdout.str()


def test_a_node_id_of_one_item_is_judged_on_that_item(example):
    result = example.pytest(f"{GATE_FILE}::page-bytes::fp16-page", f"--gates-json={example.root / 'one.json'}")
    assert result.ret == 0, result.stdout.str()
    report = json.loads((example.root / "one.json").read_text(encoding="utf-8"))
    gate = example.gate(report)
    assert (gate["verdict"], gate["partial"], gate["executed"]) == ("PASS", True, False)
    assert gate["reason"] == "partial: 1 of 7 items selected"
    assert report["meta"]["selection"] == "partial"
    claims = [example.row(report)["claim"], *example.row(report)["milestones"]]
    assert all(c["judged"] is False and c["claim_met"] is False for c in claims)
    assert "partial selection: only the gates selected are shown" in result.stdout.str()


def test_gate_flags_run_the_gates_named(two_gates, tmp_path):
    junit = tmp_path / "one.xml"
    result, report = two_gates.run_json("EXAMPLE-ROW", "--gate", "second", "--junit", str(junit), "--markdown", str(tmp_path / "one.md"))
    assert result.code == 0, result.text
    assert [g["gate"] for g in two_gates.row(report)["gates"]] == ["second"]
    assert two_gates.gate(report, "second")["executed"] is True  # run whole: evidence for that gate
    assert "claim[" not in junit.read_text(encoding="utf-8")  # no claim judged
    assert "| EXAMPLE-ROW | ✅ PASS | DONE | not judged |" in (tmp_path / "one.md").read_text(encoding="utf-8")

    result, report = two_gates.run_json("EXAMPLE-ROW", "--gate", "page-bytes", "--case", "negative-heads", "--case", "properties")
    assert result.code == 0, result.text
    assert two_gates.gate(report)["reason"] == "partial: 2 of 7 items selected"
    assert {i["name"] for i in report["items"]} == {"negative-heads", "properties"}
    result, report = two_gates.run_json("EXAMPLE-ROW", "--gate", "page-bytes", "--case", "fp16-page")
    assert result.code == 1 and two_gates.gate(report)["verdict"] == "FAIL"

    result, report = two_gates.run_json("EXAMPLE-ROW", "--gate", "page-bytes", "--gate", "second")
    assert result.code == 1, result.text  # every gate of the row, whole: a run of the row, its claim judged
    assert report["meta"]["selection"] == "whole rows" and two_gates.row(report)["claim"]["judged"] is True


USAGE = {
    "unknown-gate": (["EXAMPLE-ROW", "--gate", "page-byte"], "--gate page-byte: row EXAMPLE-ROW has no such gate; "
                                                             "did you mean 'page-bytes'?"),
    "unknown-case": (["EXAMPLE-ROW", "--gate", "page-bytes", "--case", "fp16"],
                     "--case fp16: gate page-bytes has no such case or item; did you mean 'fp16-page'?"),
    "case-without-gate": (["EXAMPLE-ROW", "--case", "fp16-page"], "--case needs exactly one --gate"),
    "case-with-two-gates": (["EXAMPLE-ROW", "--gate", "page-bytes", "--gate", "page-bytes", "--case", "fp16-page"],
                            "--case needs exactly one --gate"),
    "gate-without-row": (["--gate", "page-bytes"], "--gate needs exactly one ROW"),
    "unknown-row": (["NOPE", "--gate", "page-bytes"], "unknown row 'NOPE'"),
}


@pytest.mark.parametrize("args,message", USAGE.values(), ids=USAGE.keys())
def test_an_unknown_gate_or_case_is_a_usage_error(example, args, message):
    result = example.gates("run", *args)
    assert result.code == 2, result.text
    assert message in result.err and "Traceback" not in result.text


def test_exit_codes_of_a_partial_selection(example):
    assert example.pytest(GATE_FILE, "-k", "no-such-item").ret == 5
    example.edit("    return st.fixed_dictionaries(", "    raise RuntimeError('broken strategy')\n    return st.fixed_dictionaries(",
                 "gates/rows/example/strategies.py")
    assert example.gates("run", "EXAMPLE-ROW", "--gate", "page-bytes", "--case", "properties").code == 3
    assert example.gates("run", "EXAMPLE-ROW", "--gate", "page-bytes", "--case", "fp16-page").code == 0


def test_a_gate_run_in_part_is_never_evidence(two_gates):
    evidence = two_gates.root / "partial.json"
    result = two_gates.pytest("-k", "second or negative-heads", f"--gates-json={evidence}", "gates")
    assert result.ret == 0, result.stdout.str()
    verdict = two_gates.gates("verdict", "--evidence", str(evidence))
    assert "EXAMPLE-ROW::page-bytes: UNPROVEN" in verdict.out  # run in part: no evidence of the gate
    assert "EXAMPLE-ROW::second: PASS: on evidence: " in verdict.out  # run whole: evidence of the gate
    assert verdict.code == 6

    document = json.loads(evidence.read_text(encoding="utf-8"))
    two_gates.gate(document)["executed"] = True  # a report that says `partial` is still refused as evidence
    evidence.write_text(json.dumps(document), encoding="utf-8")
    assert "EXAMPLE-ROW::page-bytes: UNPROVEN" in two_gates.gates("verdict", "--evidence", str(evidence)).out
    audit = two_gates.gates("audit", "--evidence", str(evidence))
    assert "no usable evidence for 1 gate(s)" in audit.out
