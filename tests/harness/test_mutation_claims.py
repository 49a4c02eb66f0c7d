"""Claims can require strength (issue 28 item 5): a milestone's `mutation: S` is validated in the roadmap, and
`gates verdict --mutation F` refuses DONE unless the row's mutation run on today's sources scored at least S."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.run.mutation_evidence import MUTATION_SCHEMA, sources_fingerprint

pytestmark = pytest.mark.cpu

ROADMAP = "spec/roadmap.yaml"
MUTATED = ("example_row/impl.py",)


def _require(example, score: str) -> None:
    example.edit('M1: {title: "page bytes", state: DONE}', f'M1: {{title: "page bytes", state: DONE, mutation: {score}}}', ROADMAP)


def _mutation_report(example, killed: int, counted: int, fingerprint: str | None = None) -> str:
    survivors = counted - killed
    mutants = [{"id": f"EXAMPLE-ROW:example_row/impl.py:{n}:number_replacer:0", "file": "example_row/impl.py", "line": n,
                "operator": "number_replacer", "diff": "", "status": "killed" if n < killed else "survived",
                "killed_by": {"gate": "page-bytes", "item": "properties"} if n < killed else None, "gates_run": ["page-bytes"], "fingerprint": f"{n:064x}"} for n in range(counted)]
    row: dict[str, Any] = {"row": "EXAMPLE-ROW", "generated": counted + 1, "killed": killed, "survived": survivors,
                           "timed_out": 0, "not_covered": 0, "equivalent": 1, "not_compiling": 0,
                           "score": killed / counted, "gates": [], "mutants": mutants,
                           "sources_fingerprint": fingerprint or sources_fingerprint(example.root, MUTATED)}
    path = example.root / "out" / "mutation.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"schema": MUTATION_SCHEMA, "impl": "python", "engine": "test", "seed": None, "started": "",
                                "seconds": 1.0, "changed_since": None, "rows": [row]}), encoding="utf-8")
    return str(path)


def _verdict(example, *extra: str) -> tuple[int, dict[str, Any], str]:
    out = example.root / "out" / "verdict.json"
    result = example.gates("verdict", "--evidence", str(example.root / "out" / "run.json"), "--json", str(out), *extra)
    report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    return result.code, report, result.out + result.err


def _m1(report: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in report["rows"][0]["milestones"] if m["milestone"] == "M1")


def test_a_milestone_requiring_099_is_refused_done_naming_the_score(example):
    _require(example, "0.99")
    assert example.run_json()[0].code == 0, "gates run does not judge mutation: without a report"
    code, report, out = _verdict(example, "--mutation", _mutation_report(example, 186, 200))
    assert code == 1
    assert not _m1(report)["claim_met"] and not report["rows"][0]["claim"]["claim_met"]
    assert _m1(report)["reason"] == "M1 claims DONE with mutation >= 0.99; the mutation run scored 0.93 (killed 186 of 200)"
    assert "the mutation run scored 0.93 (killed 186 of 200)" in out


def test_gates_run_and_pytest_judge_mutation_when_given_a_report(example):
    _require(example, "0.99")
    report = _mutation_report(example, 186, 200)
    result, judged = example.run_json("--mutation", report)
    assert result.code == 1 and "the mutation run scored 0.93 (killed 186 of 200)" in _m1(judged)["reason"]
    outcome = example.pytest("-m", "cpu", f"--gates-mutation={report}")
    assert outcome.ret == 1 and "the mutation run scored 0.93" in outcome.stdout.str()


def test_a_score_that_meets_the_requirement_keeps_done(example):
    _require(example, "0.9")
    example.run_json()
    code, report, _ = _verdict(example, "--mutation", _mutation_report(example, 186, 200))
    assert code == 0 and _m1(report)["claim_met"]


def test_without_a_mutation_report_or_on_other_sources_done_is_refused(example):
    _require(example, "0.5")
    example.run_json()
    code, report, _ = _verdict(example)
    assert code == 1 and "no mutation report was given (--mutation F" in _m1(report)["reason"]
    code, report, _ = _verdict(example, "--mutation", _mutation_report(example, 200, 200, fingerprint="f" * 64))
    assert code == 1 and "measured other sources" in _m1(report)["reason"] and "example_row/impl.py" in _m1(report)["reason"]


def test_a_milestone_without_mutation_ignores_the_report(example):
    example.run_json()
    code, report, _ = _verdict(example, "--mutation", _mutation_report(example, 1, 200))
    assert code == 0 and _m1(report)["claim_met"]


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2", "true", "'0.9'", ".nan"])
def test_a_mutation_value_outside_0_1_is_a_definition_error_at_its_line(example, value):
    _require(example, value)
    result = example.gates("list")
    assert result.code == 3
    line = example.line("mutation:", relative=ROADMAP)
    assert f"{ROADMAP}:{line}:" in result.err and "rows.EXAMPLE-ROW.milestones.M1.mutation" in result.err
    assert "expected a mutation score in (0, 1]" in result.err


@pytest.mark.parametrize("content, message", [
    (None, "cannot read it"),
    ("{not json", "not a JSON mutation report"),
    ('{"schema": "vllm-gates/run/3"}', f"schema 'vllm-gates/run/3', expected {MUTATION_SCHEMA!r}"),
    (json.dumps({"schema": MUTATION_SCHEMA, "rows": [{"row": "EXAMPLE-ROW"}]}), "rows[0]: missing field 'sources_fingerprint'"),
    (json.dumps({"schema": MUTATION_SCHEMA, "rows": [{"row": "EXAMPLE-ROW", "sources_fingerprint": "f", "generated": 2,
                                                      "killed": 1, "equivalent": 0, "not_compiling": 0, "score": 0.5,
                                                      "mutants": [{"id": "m"}]}]}), "rows[0]: mutants[0]: missing field 'file'"),
    (json.dumps({"schema": MUTATION_SCHEMA, "families": ["precision"], "rows": []}),
     "measured with --family precision: its scores count only those families' mutants, not a row's"),
])
def test_an_unusable_mutation_report_is_a_usage_error_naming_it(example, content, message):
    path = Path(example.root / "out" / "m.json")
    path.parent.mkdir(exist_ok=True)
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = example.gates("run", "--mutation", str(path))  # checked before anything runs, as `gates verdict` checks it
    assert result.code == 2 and f"--mutation {path}: {message}" in result.err
