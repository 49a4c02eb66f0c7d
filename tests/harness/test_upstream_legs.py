"""A gate's `upstream:` key (issue 27 item 5): its cases checked against the oracle and, where they say so, against
the pinned upstream release, each leg a verdict of its own; the parity leg judges the row's `upstream:` claim."""
from __future__ import annotations

import pytest

from tests.harness.test_upstream_parity import DEVIATIONS, INSTALLED, OPERATIONS, _pin

pytestmark = pytest.mark.cpu

STAND_IN = "def page_bytes(block_size, heads, head_size, dtype_bytes):\n    return 2 * block_size * heads * head_size * dtype_bytes\n"
LEG = """    upstream:
      oracle: example_row.upstream_stand_in:page_bytes
      known_bad: [drops-factor-two, {off-by-one: example_row.upstream_stand_in:off_by_one}]
"""


def _folded(example, stand_in: str = STAND_IN, leg: str = LEG, route: str = "also") -> None:
    """The example's page-bytes gate with an upstream leg: fp16-page also checked against the stand-in upstream."""
    _pin(example, upstream_gate=False)
    example.write("example_row/upstream_stand_in.py", stand_in + "\n\ndef off_by_one(block_size, heads, head_size, "
                                                                 "dtype_bytes):\n    return 2 * block_size * heads * "
                                                                 "head_size * dtype_bytes + 1\n")
    example.edit("    cases:\n", leg + "    cases:\n")
    example.edit("        expect: 32\n", f"        expect: 32\n        upstream: {route}\n")


def test_the_parity_leg_is_its_own_verdict_and_judges_the_parity_claim(example):
    _folded(example)
    result, report = example.run_json()
    assert result.code == 0, result.text
    gate, leg = example.gate(report), example.gate(report, "page-bytes:upstream")
    assert (gate["verdict"], gate["markers"], gate["leg_of"], gate["cases_total"]) == ("PASS", ["cpu"], "", 2)
    assert (leg["verdict"], leg["markers"], leg["leg_of"]) == ("PASS", ["upstream"], "page-bytes")
    assert (leg["cases_total"], leg["known_bad_total"], leg["known_bad_rejected"]) == (1, 2, 2)
    assert example.row(report)["parity"]["gates"] == ["page-bytes:upstream"]
    assert example.row(report)["parity"]["met"] is True
    names = {i["name"] for i in report["items"] if i["gate"] == "page-bytes:upstream"}
    assert names == {"fp16-page", "known_bad[drops-factor-two]", "known_bad[off-by-one]", "audit"}
    line = next(line for line in result.out.splitlines() if "page-bytes:upstream" in line)
    assert line.split()[-1] == INSTALLED and "parity" in line


def test_a_case_only_for_upstream_is_not_run_against_the_oracle(example):
    _folded(example, route="only")
    result, report = example.run_json()
    assert result.code == 0, result.text
    assert example.gate(report)["cases_total"] == 1
    assert {i["name"] for i in report["items"] if i["gate"] == "page-bytes" and i["kind"] == "case"} == {"negative-heads"}
    assert example.gate(report, "page-bytes:upstream")["cases_total"] == 1


def test_upstream_that_differs_fails_the_parity_leg_and_claim_not_the_oracle_leg(example):
    _folded(example, stand_in="def page_bytes(block_size, heads, head_size, dtype_bytes):\n    return 31\n")
    result, report = example.run_json()
    assert result.code == 1, result.text
    assert example.gate(report)["verdict"] == "PASS"
    assert example.gate(report, "page-bytes:upstream")["verdict"] == "FAIL"
    row = example.row(report)
    assert row["claim"]["claim_met"] is True and row["parity"]["met"] is False
    assert "page-bytes:upstream FAIL" in row["parity"]["reason"]


def test_where_upstream_is_not_installed_the_leg_is_skipped_and_the_exit_code_stands(example):
    _folded(example)
    example.edit(f'version = "{INSTALLED}"', 'version = "0.0.1"', "pyproject.toml")
    example.write("spec/roadmap.yaml", example.read("spec/roadmap.yaml").replace(INSTALLED, "0.0.1"))
    result, report = example.run_json()
    assert result.code == 0, result.text
    assert example.gate(report)["verdict"] == "PASS"
    assert example.gate(report, "page-bytes:upstream")["verdict"] == "SKIPPED"
    assert example.row(report)["parity"]["met"] is None


def test_a_leg_known_bad_it_cannot_reject_fails_the_leg(example):
    """The leg's known-bads are its own: rejected by the oracle leg does not count for the parity leg."""
    _folded(example, leg=LEG.replace("[drops-factor-two, ", "[accepts-negative, "))
    result, report = example.run_json()
    assert result.code == 1, result.text
    leg = example.gate(report, "page-bytes:upstream")
    assert leg["verdict"] == "FAIL" and (leg["known_bad_rejected"], leg["known_bad_total"]) == (1, 2)
    assert "cannot tell accepts-negative from correct" in result.text


def test_a_deviation_leg_checks_the_cases_that_name_its_deviation(example):
    leg = LEG + "      deviations:\n        declared:\n          checks: [explicit-units]\n" \
                "          oracle: example_row.upstream_stand_in:page_bytes\n          known_bad: [drops-factor-two]\n"
    _folded(example, leg=leg, route="{deviation: explicit-units}")
    example.edit("      negative-heads:\n", "      upstream-only:\n        input: {block_size: 1, heads: 1, head_size: 1, "
                                            "dtype_bytes: 1}\n        upstream: only\n      negative-heads:\n")
    example.write("gates/rows/example/operations.yaml", OPERATIONS)
    example.write("spec/deviations.yaml", DEVIATIONS.format(gate="page-bytes"))
    assert example.gates("deviations").code == 0
    result, report = example.run_json()
    assert result.code == 0, result.text
    declared = example.gate(report, "page-bytes:declared")
    assert (declared["verdict"], declared["markers"], declared["leg_of"], declared["cases_total"]) == \
        ("PASS", ["upstream"], "page-bytes", 1)
    assert example.gate(report, "page-bytes:upstream")["cases_total"] == 1  # upstream-only, not fp16-page
    assert example.row(report)["parity"]["gates"] == ["page-bytes:upstream", "page-bytes:declared"]
    example.write("spec/deviations.yaml", DEVIATIONS.format(gate="page-bytes").replace("explicit-units:", "other-units:"))
    refused = example.gates("deviations")
    assert refused.code == 3
    assert "deviation 'explicit-units' is not declared in spec/deviations.yaml" in refused.text
    assert f"gates/rows/example/gate.yaml:{example.line('oracle: example_row.upstream_stand_in', 2)}:" in refused.text


@pytest.mark.parametrize("edit, message", [
    (("        upstream: also\n", "        upstream: sometimes\n"), "expected `also`"),
    (("        upstream: also\n", "        upstream: {deviation: nowhere}\n"),
     "no leg under `upstream.deviations` checks deviation 'nowhere'"),
    (("drops-factor-two, ", "no-such-bad, "), "'no-such-bad' is not a known-bad of gate page-bytes"),
])
def test_a_malformed_upstream_key_is_refused_at_its_line(example, edit, message):
    _folded(example)
    example.edit(*edit)
    result = example.gates("list")
    assert result.code == 3, result.text
    assert message in result.text and "gates/rows/example/gate.yaml:" in result.text


def test_a_case_routed_to_upstream_needs_the_gates_upstream_key(example):
    _pin(example, upstream_gate=False)
    example.edit("        expect: 32\n", "        expect: 32\n        upstream: also\n")
    result = example.gates("list")
    assert result.code == 3
    assert f"gate.yaml:{example.line('fp16-page:')}:" in result.text and "no `upstream:` reference" in result.text


def test_an_upstream_key_needs_a_marker_that_requires_upstream(example):
    example.edit("    cases:\n", LEG + "    cases:\n")
    result = example.gates("list")
    assert result.code == 3
    assert f"gate.yaml:{example.line('upstream:')}:" in result.text and "requires `upstream`" in result.text


PART = """# the example row's M1, in a file of its own
row: EXAMPLE-ROW
milestone: M1
gates:
{gates}"""


def _split(example) -> str:
    """The example row as a header (gate.yaml naming `parts: [m1.yaml]`) and m1.yaml holding its gates; the gates'
    text as moved."""
    text = example.read()
    head, gates = text.split("gates:\n", 1)
    example.write("gates/rows/example/gate.yaml", head + "parts: [m1.yaml]\n")
    moved = gates.replace("    milestone: M1\n", "")
    example.write("gates/rows/example/m1.yaml", PART.format(gates=moved))
    return moved


def test_a_row_split_into_part_files_runs_as_one_row_with_the_parts_lines(example):
    _split(example)
    example.edit("        expect: 32\n", "        expect: 33\n", "gates/rows/example/m1.yaml")
    result, report = example.run_json()
    assert result.code == 1, result.text
    assert example.gate(report)["milestone"] == "M1" and example.gate(report)["verdict"] == "FAIL"
    line = example.line("fp16-page:", relative="gates/rows/example/m1.yaml")
    assert f"gates/rows/example/m1.yaml:{line}:" in result.text
    assert "gates/rows/example/gate.yaml::page-bytes::fp16-page" in {i["nodeid"] for i in report["items"]}


def test_a_header_keeps_gates_of_its_own_beside_its_parts(example):
    example.write("gates/rows/example/gate.yaml", example.read().replace("gates:\n", "parts: [m1.yaml]\ngates:\n", 1))
    example.write("gates/rows/example/m1.yaml", PART.format(gates=example.gate_block("page-bytes-again")))
    result, report = example.run_json()
    assert result.code == 0, result.text
    assert {item["nodeid"].split("::")[1] for item in report["items"]} >= {"page-bytes", "page-bytes-again"}


@pytest.mark.parametrize("edit, needle, message", [
    (("row: EXAMPLE-ROW\nmilestone", "row: OTHER-ROW\nmilestone"), "row: OTHER-ROW", "names row 'OTHER-ROW'"),
    (("milestone: M1\ngates", "milestone: M9\ngates"), "milestone: M9", "milestone 'M9' is not a milestone of EXAMPLE-ROW"),
    (("  - id: page-bytes\n", "  - id: page-bytes\n    mystery: 1\n"), "mystery: 1", "unknown key 'mystery'"),
])
def test_a_part_files_mistake_is_reported_at_its_own_line(example, edit, needle, message):
    _split(example)
    example.edit(*edit, relative="gates/rows/example/m1.yaml")
    result = example.gates("list")
    assert result.code == 3, result.text
    line = example.line(needle, relative="gates/rows/example/m1.yaml")
    assert f"gates/rows/example/m1.yaml:{line}:" in result.text and message in result.text


def test_a_part_that_is_missing_or_repeats_a_gate_is_refused(example):
    moved = _split(example)
    example.edit("parts: [m1.yaml]", "parts: [m1.yaml, m2.yaml]")
    missing = example.gates("list")
    assert missing.code == 3 and "part 'gates/rows/example/m2.yaml' is not a file in the row's folder" in missing.text
    example.write("gates/rows/example/m2.yaml", PART.format(gates=moved))
    repeated = example.gates("list")
    assert repeated.code == 3
    assert f"gates/rows/example/m2.yaml:{example.line('id: page-bytes', relative='gates/rows/example/m2.yaml')}:" in repeated.text
    assert "duplicate gate id 'page-bytes' (first at gates/rows/example/m1.yaml:" in repeated.text


@pytest.mark.parametrize("route, verdict", [("also", "PASS"), ("also-by-reference", "FAIL")])
def test_a_case_expecting_an_error_reaches_upstream_only_by_reference(example, route, verdict):
    """A case with `raises` is never sent to a reference; `also-by-reference` drops it on the leg, so upstream's
    outcome (here a stand-in that accepts negative heads) judges the impl's error."""
    accepting = STAND_IN.replace("    return", "    if heads < 0:\n        return 0\n    return")
    _folded(example, stand_in=accepting, route="only")
    example.edit("        raises: {type: ValueError, match: \"heads must be >= 0\"}\n",
                 f"        raises: {{type: ValueError, match: \"heads must be >= 0\"}}\n        upstream: {route}\n")
    result, report = example.run_json()
    leg = example.gate(report, "page-bytes:upstream")
    assert leg["verdict"] == verdict, result.text
    assert example.gate(report)["verdict"] == "PASS"


@pytest.mark.parametrize("leg, message", [
    (LEG + "      covers: [EX-9.9]\n", "requirement 'EX-9.9' is not declared in spec/example.md"),
    (LEG + "      properties: {min_value_share: 2}\n", "expected a number in [0, 1], got 2"),
    (LEG + "      description: [not, text]\n", "expected a non-empty string"),
])
def test_a_legs_own_settings_are_checked_as_a_gates(example, leg, message):
    _folded(example, leg=leg)
    result = example.gates("list")
    assert result.code == 3, result.text
    assert message in result.text and f"gate.yaml:{example.line(leg.splitlines()[-1].strip())}:" in result.text
