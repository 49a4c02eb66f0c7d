"""Claims per implementation (issue 25, item 4): `claims` of `[tool.vllm-gates.implementations.NAME]` states what a
port claims per row and milestone; it is judged against them, the roadmap's claims stay the python port's, and
each row says how many of its operations the port answers."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from tests.harness.test_implementations import IMPL_LINE, OPERATIONS, _external

pytestmark = pytest.mark.cpu

SECOND_OPERATION = """  page-size:
    summary: The same page bytes under a second name, which the partial worker does not list.
    input: {block_size: int32, heads: int32, head_size: int32, dtype_bytes: int32}
    output: int64 bytes
    errors: {invalid-argument: the head count}
    python: {impl: example_row.impl:page_bytes}
"""
OWN_CLAIMS = 'EXAMPLE-ROW = { state = "ACTIVE", milestones = { M2 = "ACTIVE" } }'


def _partial_port(example, claims: str | None = OWN_CLAIMS, mode: str = "correct") -> None:
    """Row EXAMPLE-ROW with two operations, page-bytes (M1) and page-size (M2), both DONE in the roadmap; the external
    implementation `fake` answers page-bytes only, and claims ``claims`` (None: none of its own)."""
    _external(example, mode, extra=f"[tool.vllm-gates.implementations.fake.claims]\n{claims}\n" if claims else "")
    example.write("gates/rows/example/operations.yaml", OPERATIONS + SECOND_OPERATION)
    block = example.gate_block("page-size").replace(IMPL_LINE, "    operation: page-size\n").replace("milestone: M1", "milestone: M2")
    example.write("gates/rows/example/gate.yaml", example.read() + block)
    example.set_roadmap({"EXAMPLE-ROW": ("DONE", {"M1": "DONE", "M2": "DONE"})})


def _claims(report: dict) -> dict:
    row = report["rows"][0]
    return {claim["milestone"] or "(row)": (claim["state"], claim["claimed_by"], claim["claim_met"])
            for claim in (*row["milestones"], row["claim"])}


def test_a_partial_port_with_its_own_lower_claims_meets_them_and_says_how_much_it_implements(example):
    _partial_port(example)
    result, report = example.run_json("--impl", "fake", "--markdown", str(example.root / "out/run.md"))
    assert result.code == 0, result.text
    assert example.gate(report, "page-size")["verdict"] == "NOT-IMPLEMENTED"
    assert _claims(report) == {"M1": ("DONE", None, True), "M2": ("ACTIVE", "fake", True), "(row)": ("ACTIVE", "fake", True)}
    assert "EXAMPLE-ROW: fake: 1/2 operations implemented (missing: page-size)" in result.out
    assert "ACTIVE (fake's claim) ok" in result.out
    assert example.row(report)["operations"] == {"impl": "fake", "implemented": ["page-bytes"], "missing": ["page-size"],
                                                 "python_only": []}
    markdown = example.read("out/run.md")
    assert "- EXAMPLE-ROW: fake: 1/2 operations implemented (missing: page-size)" in markdown
    assert "| EXAMPLE-ROW | 🚧 NOT-IMPLEMENTED | ACTIVE (fake's claim) | met |" in markdown


def test_the_same_port_under_the_roadmaps_claims_fails_as_before(example):
    _partial_port(example, claims=None)
    result, report = example.run_json("--impl", "fake")
    assert result.code == 1, result.text
    assert _claims(report)["M2"] == ("DONE", None, False)
    assert "claims DONE but the verdict is NOT-IMPLEMENTED" in result.out
    assert "EXAMPLE-ROW: fake: 1/2 operations implemented (missing: page-size)" in result.out


def test_a_claim_missed_only_for_want_of_an_operation_names_the_claims_entry_that_states_the_ports_own(example):
    """The row's unmet claim says which operation the port lacks and the entry of its own claims that would lower
    it; written into pyproject.toml as given, that entry makes the same run meet every claim."""
    _partial_port(example, claims=None)
    result, _ = example.run_json("--impl", "fake")
    assert result.code == 1, result.text
    hint = re.search(r"^EXAMPLE-ROW: claims DONE but the verdict is NOT-IMPLEMENTED: 'fake' does not implement operation "
                     r"page-size \(the roadmap's claims are the Python port's: to judge fake on a claim of its own, add "
                     r"(?P<entry>.+) under \[tool\.vllm-gates\.implementations\.fake\.claims\] in pyproject\.toml; "
                     r"docs/gating-a-port\.md, \"Your port's own claims\"\)$", result.out, re.MULTILINE)
    assert hint, result.out
    assert hint["entry"] == 'EXAMPLE-ROW = { state = "GATING", milestones = { M2 = "GATING" } }'
    example.edit("[tool.vllm-gates.error-kinds]", f"[tool.vllm-gates.implementations.fake.claims]\n{hint['entry']}\n\n"
                                                  "[tool.vllm-gates.error-kinds]", "pyproject.toml")
    result, report = example.run_json("--impl", "fake")
    assert result.code == 0, result.text
    assert _claims(report) == {"M1": ("DONE", None, True), "M2": ("GATING", "fake", True), "(row)": ("GATING", "fake", True)}


def test_no_claims_entry_is_proposed_where_a_gate_fails(example):
    """A wrong answer is the port's defect, not a claim to lower: the unmet claim names no claims entry."""
    _external(example, "wrong-value")
    result, _ = example.run_json("--impl", "fake")
    assert result.code == 1, result.text
    assert "claims DONE but the verdict is FAIL" in result.out and "does not implement" not in result.out


def test_the_python_ports_claims_stay_the_roadmaps(example):
    _partial_port(example)
    result, report = example.run_json()
    assert result.code == 0, result.text
    assert _claims(report) == {"M1": ("DONE", None, True), "M2": ("DONE", None, True), "(row)": ("DONE", None, True)}
    assert "EXAMPLE-ROW: python: 2/2 operations implemented" in result.out
    assert "(fake's claim)" not in result.out


def test_a_port_may_claim_more_than_the_roadmap_and_is_judged_by_it(example):
    """The roadmap claims ACTIVE, which tolerates FAIL; the port claims DONE, so its wrong value fails the claim."""
    _external(example, "wrong-value", extra='[tool.vllm-gates.implementations.fake.claims]\nEXAMPLE-ROW = "DONE"\n')
    example.set_roadmap({"EXAMPLE-ROW": ("ACTIVE", {"M1": "ACTIVE"})})
    result, report = example.run_json("--impl", "fake")
    assert result.code == 1, result.text
    assert _claims(report) == {"M1": ("DONE", "fake", False), "(row)": ("DONE", "fake", False)}
    assert example.gates("run").code == 0, "the python port is judged against the roadmap's ACTIVE"


def test_pytest_judges_the_implementation_named_by_gates_impl_against_its_claims(example):
    _partial_port(example)
    junit = example.root / "out" / "junit.xml"
    result = example.pytest("--gates-impl", "fake", f"--junitxml={junit}")
    assert result.ret == 0, result.stdout.str()
    assert "EXAMPLE-ROW: fake: 1/2 operations implemented (missing: page-size)" in result.stdout.str()
    names = {(case.get("classname"), case.get("name")) for case in ET.parse(junit).getroot().iter("testcase")}
    assert {("vllm-gates.EXAMPLE-ROW.M1", "claim[DONE]"), ("vllm-gates.EXAMPLE-ROW.M2", "claim[ACTIVE (fake's claim)]"),
            ("vllm-gates.EXAMPLE-ROW.(row)", "claim[ACTIVE (fake's claim)]")} <= names


def test_gates_verdict_judges_the_evidence_against_the_implementations_claims(example):
    _partial_port(example)
    evidence = str(example.root / "out" / "fake.json")
    assert example.gates("run", "--impl", "fake", "--json", evidence).code == 0
    result = example.gates("verdict", "--evidence", evidence, "--impl", "fake", "--json", str(example.root / "out" / "v.json"))
    assert result.code == 0, result.text
    assert _claims(json.loads(example.read("out/v.json")))["M2"] == ("ACTIVE", "fake", True)
    assert "EXAMPLE-ROW: fake: 1/2 operations implemented (missing: page-size)" in result.out  # as the evidence's run found
    python = example.gates("verdict", "--evidence", evidence)
    assert python.code == 6, python.text  # the roadmap's DONE, and fake's evidence does not count for python
    assert "(fake's claim)" not in python.out


@pytest.mark.parametrize("claims, key, message", [
    ('NO-SUCH-ROW = "ACTIVE"', "implementations.fake.claims.NO-SUCH-ROW", "row 'NO-SUCH-ROW' is not in spec/roadmap.yaml (rows: EXAMPLE-ROW)"),
    ('EXAMPLE-ROW = { milestones = { M9 = "ACTIVE" } }', "implementations.fake.claims.EXAMPLE-ROW.milestones.M9",
     "milestone 'M9' is not a milestone of EXAMPLE-ROW in spec/roadmap.yaml (milestones: M1, M2)"),
    ('EXAMPLE-ROW = { state = "FINISHED" }', "implementations.fake.claims.EXAMPLE-ROW.state", "unknown state 'FINISHED' (accepted: INVENTORIED,"),
    ('EXAMPLE-ROW = "done"', "implementations.fake.claims.EXAMPLE-ROW", "unknown state 'done'"),
    ("EXAMPLE-ROW = 3", "implementations.fake.claims.EXAMPLE-ROW", "expected ROW = \"STATE\", or ROW = { state = \"STATE\", milestones"),
    ('EXAMPLE-ROW = { status = "ACTIVE" }', "implementations.fake.claims.EXAMPLE-ROW", "unknown key 'status' (accepted: milestones, state)"),
    ('EXAMPLE-ROW = { milestones = ["M1"] }', "implementations.fake.claims.EXAMPLE-ROW.milestones", "expected a table of milestones"),
])
def test_a_bad_claim_is_refused_at_its_line_naming_the_key_and_value(example, claims, key, message):
    _partial_port(example, claims=claims)
    result = example.gates("list")
    assert result.code == 3, result.text
    line = example.line(claims.split(" =")[0], relative="pyproject.toml")
    assert f"pyproject.toml:{line}:1: [tool.vllm-gates] {key}: {message}" in result.err


def test_the_python_implementations_claims_are_the_roadmaps(example):
    text = example.read("pyproject.toml").replace("[tool.pytest.ini_options]", "[tool.vllm-gates.implementations.python]\n"
                                                  'claims = { EXAMPLE-ROW = "ACTIVE" }\n\n[tool.pytest.ini_options]')
    example.write("pyproject.toml", text)
    result = example.gates("list")
    assert result.code == 3
    line = example.line("claims = ", relative="pyproject.toml")
    assert (f"pyproject.toml:{line}:1: [tool.vllm-gates] implementations.python.claims: the roadmap states the python "
            "implementation's claims") in result.err
