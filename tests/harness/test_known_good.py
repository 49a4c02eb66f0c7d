"""Known-goods (docs/gate-files.md, "Known-goods"): implementations other than the impl that a gate must pass,
judged as the impl is; a gate that rejects one is TOO TIGHT, an ERROR in `gates run` and `gates audit` alike."""
from __future__ import annotations

import pytest

from tests.harness.test_audit_evidence import FROM_EVIDENCE, RAN_HERE

pytestmark = pytest.mark.cpu

KNOWN_BAD_LAST = "      accepts-negative: .known_bad:accepts_negative\n"
KNOWN_GOOD = '''"""Toy known-goods: page bytes by other arithmetic, and one port that is wrong where heads > 3."""


def _check(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> None:
    for name, value in (("block_size", block_size), ("heads", heads), ("head_size", head_size), ("dtype_bytes", dtype_bytes)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")


def page_bytes_by_sum(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:
    _check(block_size, heads, head_size, dtype_bytes)
    key = sum(head_size * dtype_bytes for _ in range(block_size * heads))
    return key + key


def off_for_big_heads(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:
    _check(block_size, heads, head_size, dtype_bytes)
    return 2 * block_size * heads * head_size * dtype_bytes + (1 if heads > 3 else 0)


def off_everywhere(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:
    _check(block_size, heads, head_size, dtype_bytes)
    return 2 * block_size * heads * head_size * dtype_bytes + 1
'''


def _with_known_good(example, entries: str) -> int:
    """The example gate with ``entries`` under `known_good:` (after its known-bads); the line of the first entry."""
    example.write("gates/rows/example/known_good.py", KNOWN_GOOD)
    example.edit(KNOWN_BAD_LAST, KNOWN_BAD_LAST + "    known_good:\n" + entries)
    return example.line(entries.splitlines()[0])


def _audit_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("EXAMPLE-ROW") and " page-bytes " in line)


def test_a_known_good_the_gate_passes_is_counted_in_the_run_and_the_audit(example):
    _with_known_good(example, "      by-sum: .known_good:page_bytes_by_sum\n")
    ran, report = example.run_json()
    assert ran.code == 0, ran.text
    gate = example.gate(report)
    assert (gate["verdict"], gate["known_good_passed"], gate["known_good_total"]) == ("PASS", 1, 1)
    item = next(i for i in report["items"] if i["kind"] == "known_good")
    assert item["name"] == "known_good[by-sum]" and item["outcome"] == "passed" and item["checks"] > 2
    header = next(line for line in ran.out.splitlines() if line.startswith("row "))
    assert "known-bad  known-good" in header
    audit = example.gates("audit")
    assert audit.code == 0, audit.text
    assert "known-good" in audit.out and _audit_line(audit.out).endswith("3/3 rejected  1/1 passed")


def test_junit_names_the_known_good_item_and_each_claim_how_many_passed(example):
    import xml.etree.ElementTree as ET

    _with_known_good(example, "      by-sum: .known_good:page_bytes_by_sum\n")
    target = example.root / "out" / "junit.xml"
    ran = example.gates("run", "--junit", str(target))
    assert ran.code == 0, ran.text
    cases = ET.parse(target).getroot().findall(".//testcase")
    assert "known_good[by-sum]" in [c.get("name") for c in cases]
    claims = [c for c in cases if c.get("name") == "claim[DONE]"]
    found = [(p.get("name"), p.get("value")) for c in claims for p in c.findall(".//property")]
    assert found.count(("known_good[page-bytes]", "1/1 passed")) == 2, found


def test_the_tables_show_no_known_good_column_where_no_gate_declares_one(example):
    ran, report = example.run_json()
    assert ran.code == 0 and example.gate(report)["known_good_total"] == 0
    assert "known-good" not in ran.out
    assert "known-good" not in example.gates("audit").out


def test_a_gate_that_rejects_a_known_good_on_an_example_is_too_tight_in_run_and_audit(example):
    line = _with_known_good(example, "      big-heads: .known_good:off_for_big_heads\n")
    expected = f"gates/rows/example/gate.yaml:{line}: TOO TIGHT: gate page-bytes rejects known-good big-heads on a generated example"
    audit = example.gates("audit")
    assert audit.code == 3, audit.text
    assert expected in audit.out and "ERROR" in _audit_line(audit.out) and "0/1 passed" in _audit_line(audit.out)
    assert "the known-good disagrees with the oracle" in audit.out
    ran, report = example.run_json()
    assert ran.code == 3, ran.text
    gate = example.gate(report)
    assert gate["verdict"] == "ERROR" and gate["reason"].startswith(expected), gate["reason"]
    assert (gate["known_good_passed"], gate["known_good_total"]) == (0, 1)
    assert not example.row(report)["claim"]["claim_met"]
    item = next(i for i in report["items"] if i["kind"] == "known_good")
    assert item["outcome"] == "error"
    shown = ran.out[ran.out.index("TOO TIGHT"):]
    assert "heads: 4" in shown or "heads: 5" in shown, "the report shows the example that rejected it"
    assert "known-good: 1" in shown and "oracle    : 0" in shown and "known_good[big-heads]" in shown


def test_a_known_good_rejected_by_named_cases_names_every_case(example):
    example.edit("      fp16-page:\n", "      fp16-page:\n        input: {block_size: 2, heads: 2, head_size: 2, dtype_bytes: 2}\n"
                                       "        expect: 32\n      fp16-page-2:\n")
    _with_known_good(example, "      off-by-one: .known_good:off_everywhere\n")
    audit = example.gates("audit")
    assert audit.code == 3, audit.text
    assert ("TOO TIGHT: gate page-bytes rejects known-good off-by-one on case 'fp16-page' (and 2 more: fp16-page-2, "
            "properties): the known-good does not return the expected value") in audit.out


def test_a_known_good_is_run_by_its_own_case_selection(example):
    _with_known_good(example, "      by-sum: .known_good:page_bytes_by_sum\n")
    picked = example.gates("run", "EXAMPLE-ROW", "--gate", "page-bytes", "--case", "known_good[by-sum]")
    assert picked.code == 0, picked.text
    assert "partial: 1 of " in picked.out
    wrong = example.gates("run", "EXAMPLE-ROW", "--gate", "page-bytes", "--case", "known_good[nope]")
    assert wrong.code == 2 and "known_good[by-sum]" in wrong.text


@pytest.mark.parametrize(("entry", "why"), [
    ("      accepts-negative: .known_good:page_bytes_by_sum\n", "(the same name, at gates/rows/example/gate.yaml:"),
    ("      still-wrong: .known_bad:accepts_negative\n",
     "(the same target gates.rows.example.known_bad:accepts_negative, at gates/rows/example/gate.yaml:"),
])
def test_a_known_good_that_is_also_a_known_bad_is_a_definition_error_at_its_line(example, entry, why):
    line = _with_known_good(example, entry)
    name = entry.split(":")[0].strip()
    listed = example.gates("list")
    assert listed.code == 3, listed.text
    assert f"gates/rows/example/gate.yaml:{line}:7: gates[0].known_good.{name}: known-good '{name}' is also known-bad " \
           f"'accepts-negative' {why}" in listed.text, listed.text
    ran = example.gates("run")
    assert ran.code == 3 and f"gate.yaml:{line}" in ran.text and "is also known-bad" in ran.text


@pytest.mark.parametrize(("target", "missing"), [(".known_good:no_such_function", "no_such_function"),
                                                  (".no_such_module:page_bytes", "no_such_module")])
def test_a_known_good_that_is_not_found_is_a_definition_error_at_its_line(example, target, missing):
    line = _with_known_good(example, f"      ghost: {target}\n")
    ran, report = example.run_json()
    assert ran.code == 3, ran.text
    assert f"gates/rows/example/gate.yaml:{line}:" in ran.text and "gate page-bytes.known_good.ghost" in ran.text
    assert missing in ran.text
    assert example.gate(report)["verdict"] == "ERROR"


def test_a_known_good_with_another_signature_is_refused_naming_both(example):
    example.write("gates/rows/example/known_good.py", KNOWN_GOOD + "\n\ndef by_bytes(size):\n    return size\n")
    example.edit(KNOWN_BAD_LAST, KNOWN_BAD_LAST + "    known_good:\n      bytes: .known_good:by_bytes\n")
    ran = example.gates("run")
    assert ran.code == 3
    assert "'.known_good:by_bytes' takes (size) but the impl 'example_row.impl:page_bytes' takes" in ran.text, ran.text


def test_the_audit_from_evidence_reuses_known_good_results(example):
    _with_known_good(example, "      by-sum: .known_good:page_bytes_by_sum\n")
    ran, _ = example.run_json()
    assert ran.code == 0, ran.text
    reused = example.gates("audit", "--evidence", str(example.root / "out" / "run.json"))
    assert reused.code == 0, reused.text
    assert FROM_EVIDENCE in reused.out and RAN_HERE not in reused.out and " passed in " not in reused.out
    assert _audit_line(reused.out).endswith("1/1 passed")


def test_the_audit_from_evidence_runs_a_known_good_added_since(example):
    ran, _ = example.run_json()
    assert ran.code == 0, ran.text
    _with_known_good(example, "      big-heads: .known_good:off_for_big_heads\n")
    reused = example.gates("audit", "--evidence", str(example.root / "out" / "run.json"))
    assert reused.code == 3, reused.text
    assert RAN_HERE in reused.out and "TOO TIGHT" in reused.out


def test_check_independence_names_a_known_good_that_reaches_a_contract_package(example):
    """A known-good is an implementation of its own: one that imports the impl, even through another module, is
    named at its entry by `gates check-independence`."""
    example.edit("[tool.vllm-gates]\n", "[tool.vllm-gates]\nindependence = {example_row = [\"gates\"]}\n", "pyproject.toml")
    example.write("gates/rows/example/helpers.py", "from example_row.impl import page_bytes\n")
    example.write("gates/rows/example/leaky.py", "from .helpers import page_bytes\n\n\ndef leaky(block_size, heads, head_size, dtype_bytes):\n"
                                                  "    return page_bytes(block_size, heads, head_size, dtype_bytes)\n")
    line = _with_known_good(example, "      by-sum: .known_good:page_bytes_by_sum\n      leaky: .leaky:leaky\n") + 1
    checked = example.gates("check-independence")
    assert checked.code == 1, checked.text
    assert (f"gates/rows/example/gate.yaml:{line}: imports example_row.impl  (contract: known-good leaky of gate "
            "page-bytes must not import example_row)") in checked.out, checked.out
    assert "by-sum" not in checked.out and "1 violation(s)" in checked.out
