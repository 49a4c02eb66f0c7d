"""Each report file has one typed reader: a run report (report_files.RunReportFile, read back as the verdicts and
item results that wrote it) and a mutation report (mutation_records); a malformed record is named by its field and
value, and what a reader reads back writes the same document again."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from _vllm_gates.frontends import cli
from _vllm_gates.results.mutation_records import Kill, KnownBadVerdict, MutantEntry, MutantVerdict, MutationReport
from _vllm_gates.results.records import RecordError
from _vllm_gates.results.report_files import RunReportFile
from _vllm_gates.results.reports import to_json
from _vllm_gates.results.verdicts import RunReport, Verdict

pytestmark = pytest.mark.cpu

DATA = Path(__file__).parent / "data"


def test_a_run_report_read_back_writes_the_same_document(example):
    result, document = example.run_json()
    assert result.code == 0
    report = RunReportFile.from_data(document, "run.json")
    assert report.rows and report.items and all(isinstance(g.verdict, Verdict) for g in report.gates())
    again = to_json(RunReport(report.rows, report.items, report.interrupted), report.exit_code, dict(report.meta),
                    dict(report.evidence))
    assert json.loads(json.dumps(again)) == document


def test_a_report_written_before_later_fields_reads_with_their_defaults():
    report = RunReportFile.from_data(json.loads((DATA / "run-report.json").read_text(encoding="utf-8")), "old.json")
    gate = report.gates()[0]
    assert gate.tolerance_used is None and gate.known_good_total == 0 and report.items[0].strength is None


@pytest.mark.parametrize("change, named", [
    (lambda d: d["rows"][0]["gates"][0].update(verdict="GREEN"), "rows[0]: gates[0]: verdict: expected one of PASS"),
    (lambda d: d["rows"][0]["gates"][0].update(checks="12"), "rows[0]: gates[0]: checks: expected int, got '12'"),
    (lambda d: d["rows"][0]["claim"].update(surplus=1), "rows[0]: claim: unknown field 'surplus' (value 1)"),
    (lambda d: d["items"][0].pop("outcome"), "items[0]: missing field 'outcome'"),
])
def test_a_malformed_run_report_names_the_field_and_value(change, named):
    document = json.loads((DATA / "run-report.json").read_text(encoding="utf-8"))
    change(document)
    with pytest.raises(RecordError, match="^old.json: ") as refused:
        RunReportFile.from_data(document, "old.json")
    assert named in str(refused.value)


def test_an_evidence_file_with_a_malformed_gate_is_a_usage_error_naming_it(example, capsys):
    result, document = example.run_json()
    document["rows"][0]["gates"][0]["simulated"] = "no"
    path = example.root / "out" / "bad.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    refused = example.gates("verdict", "--evidence", str(path))
    assert refused.code == 2
    assert f"--evidence {path}: malformed run report: rows[0]: gates[0]: simulated: expected bool, got 'no'" in refused.err


VERDICTS = [MutantVerdict("killed", Kill("g1", "case[a]", "differs"), ("g1", "g2"), ("g1", "g2", "g3"), seconds=0.5),
            MutantVerdict("not_compiling", detail="error: expected ';'"), MutantVerdict("timed_out"),
            MutantVerdict("not_run_here", detail="only gpu gates reach it")]


@pytest.mark.parametrize("verdict", VERDICTS)
def test_a_mutant_verdict_crosses_json_and_arrives_equal(verdict):
    entry = MutantEntry("R:f.py:3:op:0", "f.py", 3, "op", "-a\n+b\n", "f" * 64, verdict)
    assert MutantEntry.from_data(json.loads(json.dumps(entry.to_data())), "m") == entry
    known = KnownBadVerdict("g1", "off-by-one", "passed", verdict.killed_by)
    assert KnownBadVerdict.from_data(json.loads(json.dumps(known.to_data())), "k") == known


@pytest.mark.parametrize("data, named", [
    ({"status": "alive"}, "field 'status' must be one of killed, survived"),
    ({"status": "killed", "killed_by": None}, "field 'killed_by' is None for status 'killed'"),
    ({"status": "survived", "gates_run": "g1"}, "field 'gates_run' must be a list of texts, got 'g1'"),
    ({"status": "killed", "killed_by": {"gate": 3, "item": "x"}}, "killed_by: field 'gate' must be a text, got 3"),
])
def test_a_malformed_mutant_verdict_is_refused_naming_the_field(data, named):
    with pytest.raises(RecordError, match="^done event: ") as refused:
        MutantVerdict.from_data(data, "done event")
    assert named in str(refused.value)


def test_the_checked_in_mutation_report_reads_and_its_rows_count():
    report = MutationReport.from_data(json.loads((DATA / "mutation-report.json").read_text(encoding="utf-8")), "m.json")
    row = report.rows[0]
    assert row.counts["killed"] == sum(m.verdict.status == "killed" for m in row.mutants)
    assert row.counted == row.generated - row.counts["equivalent"] - row.counts["not_compiling"] - row.counts["not_run_here"]
    assert row.files == tuple(sorted({m.file for m in row.mutants}))  # written before `files` was recorded


def test_gates_report_refuses_a_named_malformed_mutation_report(tmp_path, capsys):
    document = json.loads((DATA / "mutation-report.json").read_text(encoding="utf-8"))
    document["rows"][0]["mutants"][0]["line"] = "20"
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps(document), encoding="utf-8")
    code = cli.main(["report", "--html", str(tmp_path / "r.html"), "--run", str(DATA / "run-report.json"), "--mutation", str(bad)])
    assert code == 2
    assert f"--mutation malformed: {bad}: rows[0]: mutants[0]: field 'line' must be a line number, got '20'" in capsys.readouterr().err
