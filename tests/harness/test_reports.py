"""Reports: deterministic JSON under the ci profile, atomic writes, the Markdown summary and pytest's JUnit XML."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest

from _vllm_gates.results import reports

pytestmark = pytest.mark.cpu

WRONG_FOR_FOUR_HEADS = ("    return 2 * block_size", "    return (1 if heads == 4 else 0) + 2 * block_size", "example_row/impl.py")


def _without_durations(value):
    if isinstance(value, dict):
        return {k: _without_durations(v) for k, v in value.items() if k != "duration"}
    if isinstance(value, list):
        return [_without_durations(v) for v in value]
    return value


@pytest.mark.parametrize("variant", ["green", "property-fails"])
def test_two_ci_runs_give_identical_json_but_for_durations(example, variant):
    if variant == "property-fails":
        example.edit(*WRONG_FOR_FOUR_HEADS)
    first, one = example.run_json("--profile", "ci", name="one.json")
    second, two = example.run_json("--profile", "ci", name="two.json")
    assert first.code == second.code == (0 if variant == "green" else 1)
    assert any("duration" in item for item in one["items"])
    assert _without_durations(one) == _without_durations(two)
    assert one["meta"]["profile"] == "ci"


def test_json_report_is_complete_and_replaces_the_old_file_atomically(example):
    target = example.root / "out" / "run.json"
    example.write("out/run.json", "{ not json: from an earlier, interrupted run")
    result, report = example.run_json()
    assert result.code == 0
    assert report["schema"] == "vllm-gates/run/3"
    assert report["exit_code"] == 0
    assert report["checks"] == sum(g["checks"] for r in report["rows"] for g in r["gates"]) > 0
    assert [i["nodeid"] for i in report["items"]] == sorted(i["nodeid"] for i in report["items"])
    assert len(report["items"]) == 7
    assert sorted(p.name for p in target.parent.iterdir()) == ["run.json"], "no temporary file is left behind"


def test_write_atomic_leaves_the_old_file_when_the_rename_fails(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text('{"old": true}\n', encoding="utf-8")

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        reports.write_atomic(target, '{"new": true}\n')
    assert json.loads(target.read_text(encoding="utf-8")) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_write_atomic_creates_the_folder(tmp_path):
    target = tmp_path / "deep" / "er" / "report.md"
    reports.write_atomic(target, "# hi\n")
    assert target.read_text(encoding="utf-8") == "# hi\n"


@pytest.mark.parametrize("variant,line", [
    ("green", "| EXAMPLE-ROW | ✅ PASS | DONE | met |"),
    ("property-fails", "| EXAMPLE-ROW | ❌ FAIL | DONE | **not met** |"),
])
def test_markdown_has_a_verdict_line_per_row(example, variant, line):
    if variant == "property-fails":
        example.edit(*WRONG_FOR_FOUR_HEADS)
    target = example.root / "out" / "summary.md"
    result = example.gates("run", "--markdown", str(target))
    text = target.read_text(encoding="utf-8")
    assert text.startswith(f"## vllm-gates: exit {result.code}\n")
    assert line in text.splitlines()
    assert "| EXAMPLE-ROW | M1 | page-bytes |" in text
    if variant == "property-fails":
        assert "### Why" in text and "- EXAMPLE-ROW: claims DONE but the verdict is FAIL" in text


def test_junit_xml_lists_the_gate_items_and_the_claims(example):
    target = example.root / "out" / "junit.xml"
    result = example.gates("run", "--junit", str(target))
    assert result.code == 0
    root = ET.parse(target).getroot()
    cases = root.findall(".//testcase")
    assert sorted(c.get("name") for c in cases) == sorted([
        "fp16-page", "negative-heads", "properties", "audit",
        "known_bad[drops-factor-two]", "known_bad[wrong-for-big-heads]", "known_bad[accepts-negative]",
        "claim[DONE]", "claim[DONE]"])
    claims = sorted(c.get("classname") for c in cases if c.get("name") == "claim[DONE]")
    assert claims == ["vllm-gates.EXAMPLE-ROW.(row)", "vllm-gates.EXAMPLE-ROW.M1"]
    assert all(c.find("failure") is None and c.find("error") is None for c in cases)
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("9", "0", "0")


def test_junit_xml_records_failures(example):
    example.edit(*WRONG_FOR_FOUR_HEADS)
    target = example.root / "out" / "junit.xml"
    assert example.gates("run", "--junit", str(target), "--profile", "ci").code == 1
    failed = [(c.get("classname"), c.get("name")) for c in ET.parse(target).getroot().iter("testcase") if c.find("failure") is not None]
    assert failed == [("gates.rows.example.gate.yaml.page-bytes", "properties"),
                      ("vllm-gates.EXAMPLE-ROW.M1", "claim[DONE]"), ("vllm-gates.EXAMPLE-ROW.(row)", "claim[DONE]")]
