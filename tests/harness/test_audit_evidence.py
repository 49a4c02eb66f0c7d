"""`gates audit --evidence F`: a run's report already holds every gate's audit stand-in and known-bad verdicts; the
audit takes them from it where the gate's fingerprint is unchanged and runs only the gates it cannot (issue 15)."""
from __future__ import annotations

import pytest

from tests.harness.test_audit import LENIENT, NEGATIVE_HEADS_CASE, ORACLE_LINE

pytestmark = pytest.mark.cpu

RAN_HERE = "running their audit here"
FROM_EVIDENCE = "not run again"


def _row_line(out: str, gate: str = "page-bytes") -> str:
    return next(line for line in out.splitlines() if line.startswith("EXAMPLE-ROW") and f" {gate} " in line)


def test_the_audit_of_a_judged_run_comes_from_its_report_and_runs_nothing(example):
    ran, _ = example.run_json()
    assert ran.code == 0, ran.text
    fresh = example.gates("audit")
    reused = example.gates("audit", "--evidence", str(example.root / "out" / "run.json"))
    assert reused.code == 0, reused.text
    assert FROM_EVIDENCE in reused.out and RAN_HERE not in reused.out
    assert " passed in " not in reused.out, "pytest ran no item"
    assert _row_line(reused.out) == _row_line(fresh.out)
    assert _row_line(reused.out).endswith("3/3 rejected")


def test_a_known_bad_the_run_did_not_reject_fails_the_audit_from_evidence(example):
    example.write("example_row/lenient.py", LENIENT)
    example.edit(ORACLE_LINE, ORACLE_LINE + "    compare: example_row.lenient:anything_goes\n")
    example.edit(NEGATIVE_HEADS_CASE, "")
    ran, _ = example.run_json()
    assert ran.code == 1
    reused = example.gates("audit", "--evidence", str(example.root / "out" / "run.json"))
    assert reused.code == 1, reused.text
    assert RAN_HERE not in reused.out and _row_line(reused.out).endswith("0/3 rejected")


def test_only_the_gates_changed_since_the_run_are_audited_here(example):
    example.add_row("SECOND-ROW")
    ran, _ = example.run_json()
    assert ran.code == 0, ran.text
    known_bad = example.root / example.row_folder("SECOND-ROW") / "known_bad.py"
    known_bad.write_text(known_bad.read_text(encoding="utf-8") + "\n# changed after the run\n", encoding="utf-8")
    reused = example.gates("audit", "--evidence", str(example.root / "out" / "run.json"))
    assert reused.code == 0, reused.text
    before, after = reused.out.split(RAN_HERE)
    assert "from evidence" in before and "1 gate(s) audited there" in before and "EXAMPLE-ROW " in before
    assert "SECOND-ROW" not in before, "its known-bad changed after the run: its verdicts are stale"
    assert "no usable evidence for 1 gate(s)" in before
    assert "SECOND-ROW " in after and "EXAMPLE-ROW " not in after
    assert _row_line(before).endswith("3/3 rejected")


def test_a_stale_known_bad_makes_its_gate_run_here(example):
    ran, _ = example.run_json()
    assert ran.code == 0
    known_bad = (example.root / "gates" / "rows" / "example" / "known_bad.py")
    known_bad.write_text(known_bad.read_text(encoding="utf-8") + "\n# changed after the run\n", encoding="utf-8")
    reused = example.gates("audit", "--evidence", str(example.root / "out" / "run.json"))
    assert reused.code == 0, reused.text
    assert RAN_HERE in reused.out and FROM_EVIDENCE not in reused.out
    assert " passed in " in reused.out, "the stale gate's audit items ran"


def test_evidence_of_another_implementation_is_not_used(example):
    ran, _ = example.run_json()
    assert ran.code == 0
    path = example.root / "out" / "run.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"impl": "python"', '"impl": "cpp"'), encoding="utf-8")
    reused = example.gates("audit", "--evidence", str(path))
    assert reused.code == 0, reused.text
    assert RAN_HERE in reused.out and FROM_EVIDENCE not in reused.out


def test_an_unreadable_evidence_file_is_a_usage_error_naming_it(example):
    missing = example.root / "out" / "nowhere.json"
    result = example.gates("audit", "--evidence", str(missing))
    assert result.code == 2
    assert f"--evidence {missing}: cannot read it" in result.err
    bad = example.write("out/bad.json", '{"schema": "something else"}')
    result = example.gates("audit", "--evidence", str(bad))
    assert result.code == 2 and "expected 'vllm-gates/run/" in result.err
