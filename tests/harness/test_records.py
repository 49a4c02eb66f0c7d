"""One item's record from the item to the verdict (records.py): ``ItemRecord`` crosses pytest-xdist by one
``to_data``/``from_data`` pair and arrives equal; an item's run-report entry is written and read by one pair; every
reader names a malformed field and its value."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from _vllm_gates.results.outcomes import ItemOutcome, NotImplementedBy
from _vllm_gates.results.records import ItemIdentity, ItemKind, ItemRecord, ItemResult, RecordError
from _vllm_gates.run import xdist_run

pytestmark = pytest.mark.cpu

FULL = ItemRecord(12, "case 'big': differs", False, 9, 2, "big", 0.25, {"where": "case 'big'", "output": "result[0]",
                                                                         "dtype": "float32"}, 3,
                  {"policy": "allclose", "level": 0.01, "cases": ["a"], "examples": 2, "answers": [], "figures": [],
                   "notes": [], "unit": "share"})
IDENTITY = ItemIdentity("ROW", "g1", "M1", ItemKind.KNOWN_BAD, 17)


@pytest.mark.parametrize("record", [FULL, ItemRecord(0, harness_error=True), ItemRecord(3)])
def test_a_record_crosses_json_and_arrives_equal(record):
    assert ItemRecord.from_data(json.loads(json.dumps(record.to_data()))) == record


def test_an_identity_crosses_json_and_arrives_equal():
    assert ItemIdentity.from_data(json.loads(json.dumps(IDENTITY.to_data()))) == IDENTITY


@pytest.mark.parametrize("change, named", [
    ({"checks": "12"}, "field 'checks' must be a count, got '12'"),
    ({"checks": True}, "field 'checks' must be a count, got True"),
    ({"values": -1}, "field 'values' must not be negative, got -1"),
    ({"harness_error": 0}, "field 'harness_error' must be true or false, got 0"),
    ({"tolerance_used": "0.5"}, "field 'tolerance_used' must be a number or null, got '0.5'"),
    ({"tolerance_at": {"where": 3}}, "field 'tolerance_at' must map strings to strings, got {'where': 3}"),
    ({"surplus": 1}, "unknown field 'surplus' (value 1)"),
])
def test_a_malformed_record_is_refused_naming_the_field_and_value(change, named):
    with pytest.raises(RecordError, match="^sent: ") as refused:
        ItemRecord.from_data({**FULL.to_data(), **change}, "sent")
    assert named in str(refused.value)


def test_a_record_missing_a_field_or_not_a_mapping_is_refused():
    data = FULL.to_data()
    del data["excused"]
    with pytest.raises(RecordError, match="missing field 'excused'"):
        ItemRecord.from_data(data)
    with pytest.raises(RecordError, match=r"expected a mapping, got \[1, 2\]"):
        ItemRecord.from_data([1, 2])
    with pytest.raises(RecordError, match="field 'kind' must be one of case, .*, got 'kase'"):
        ItemIdentity.from_data({**IDENTITY.to_data(), "kind": "kase"})


def _report(nodeid: str = "g.yaml::ROW::g1::known_bad[off]", properties: list | None = None) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, user_properties=properties if properties is not None else [])


def test_xdist_attaches_the_record_and_the_controller_reads_back_the_same_one():
    report = _report()
    cause = NotImplementedBy("cpp", "no 'kv-plan'")
    xdist_run.attach(report, IDENTITY, FULL, cause)  # type: ignore[arg-type]
    sent = json.loads(json.dumps(report.user_properties))  # what crosses between the processes is plain data
    assert xdist_run.payload_of(_report(properties=sent)) == (IDENTITY, FULL, cause)  # type: ignore[arg-type]


def test_a_malformed_record_from_an_xdist_worker_names_the_item_and_field():
    report = _report()
    xdist_run.attach(report, IDENTITY, FULL, None)  # type: ignore[arg-type]
    report.user_properties[0][1]["record"]["checks"] = None
    with pytest.raises(RecordError, match=r"known_bad\[off\]: the record an xdist worker sent: field 'checks' must be a count, got None"):
        xdist_run.payload_of(report)  # type: ignore[arg-type]


def _result(outcome: ItemOutcome, reason: str = "") -> ItemResult:
    return ItemResult("g.yaml::ROW::g1::known_bad[off]", "ROW", "g1", "M1", "known_bad", "known_bad[off]", outcome, reason,
                      0.1234567, None, FULL)


def test_a_result_carries_the_record_and_derives_what_reports_show():
    passed, failed = _result(ItemOutcome.PASSED), _result(ItemOutcome.FAILED, "mismatch")
    assert passed.record is FULL and passed.checks == 12 and passed.values == 9 and passed.excused == 3
    assert passed.detail == FULL.rejected_by and passed.tolerance_used == 0.25 and passed.tolerance_at == FULL.tolerance_at
    assert failed.detail == "mismatch" and failed.tolerance_used is None and failed.tolerance_at is None


def test_a_run_report_entry_keeps_its_fields_order_and_reads_back():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "src/_vllm_gates/definitions/schema/run.schema.json").read_text(encoding="utf-8"))
    for result in (_result(ItemOutcome.PASSED), _result(ItemOutcome.SKIPPED, "not implemented by 'cpp'")):
        entry = result.to_report()
        assert list(entry) == ["nodeid", "row", "gate", "milestone", "kind", "name", "outcome", "checks", "detail", "duration",
                               "values", "agreed_errors", "tolerance_used", "tolerance_at", "excused", "strength"]
        assert entry["duration"] == 0.123457
        jsonschema.validate(entry, schema["properties"]["items"]["items"])
        again = ItemResult.from_report(json.loads(json.dumps(entry)))
        assert again.to_report() == entry
        assert (again.outcome, again.detail, again.checks) == (result.outcome, result.detail, result.checks)


def test_a_malformed_run_report_entry_is_refused_naming_the_field():
    entry = _result(ItemOutcome.PASSED).to_report()
    with pytest.raises(RecordError, match="item 3: field 'outcome' must be one of passed, .*, got 'fine'"):
        ItemResult.from_report({**entry, "outcome": "fine"}, "item 3")
    with pytest.raises(RecordError, match="field 'checks' must be a count, got 1.5"):
        ItemResult.from_report({**entry, "checks": 1.5})
