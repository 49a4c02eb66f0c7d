"""`gates mutate` at the speed of review (docs/mutation.md): a rerun reuses each verdict whose mutant and gates are
unchanged, and re-judges exactly what a changed gate file killed or reaches; a report of another tree or engine is
ignored, said once; `--since` writes GitHub annotations; the report in the mutation-testing-report-schema; one mutant
per line; a --budget for the Python port.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable

import jsonschema
import pytest

from _vllm_gates.mutation import mutate
from _vllm_gates.mutation.mutate_operators import mutants
from _vllm_gates.results.mutation_records import Kill, MutantVerdict

from .conftest import Example
from .test_mutate import IMPL, SNIPPET, _commit

pytestmark = pytest.mark.cpu

TWICE = "example_row/twice.py"
PART = "gates/rows/example/extra.yaml"
SCHEMA = Path(__file__).parent / "data" / "mutation-testing-report-schema.json"


def _report(example: Example, name: str = "out/m.json") -> dict[str, Any]:
    return json.loads((example.root / name).read_text(encoding="utf-8"))


def _two_gate_files(example: Example) -> None:
    """A second gate, twice-gate, in a part file of its own, judging a second impl file that page-bytes never imports."""
    example.write(TWICE, '"""A second toy impl."""\n\n\ndef twice_bytes(block_size, heads, head_size, dtype_bytes):\n'
                         '    if heads < 0:\n        raise ValueError(f"heads must be >= 0, got {heads}")\n'
                         '    return 2 * block_size * heads * head_size * dtype_bytes\n')
    block = example.gate_block("twice-gate").replace("impl: example_row.impl:page_bytes", "impl: example_row.twice:twice_bytes")
    block = block[:block.index("    known_bad:")]
    example.write(PART, "row: EXAMPLE-ROW\nmilestone: M1\ngates:\n" + block)
    example.edit("gates:\n", "parts: [extra.yaml]\ngates:\n")


def _recording(monkeypatch: pytest.MonkeyPatch, judged: list[str], fake: bool) -> None:
    """Sessions.judge records the ids it is handed; with ``fake`` it judges them without running a gate, every other
    one killed by page-bytes, the others survived."""
    real = mutate.Sessions.judge

    def judge(self: mutate.Sessions, row: str, gate_path: str, watch: list[str], specs: list[dict[str, Any]],
              chosen: list[Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        judged.extend(spec["id"] for spec in specs)
        if not fake:
            return real(self, row, gate_path, watch, specs, chosen, *args, **kwargs)
        found: Callable[[Any, MutantVerdict], None] = args[3]  # after trace_gates, known_bads, timeout
        for number, mutant in enumerate(chosen):
            killed = Kill("page-bytes", "fp16-page", "planted") if number % 2 == 0 else None
            found(mutant, MutantVerdict("killed" if killed else "survived", killed,
                                        ("page-bytes",) if killed else (), ("page-bytes",)))
        return {"failing": {}, "known_bads": []}

    monkeypatch.setattr(mutate.Sessions, "judge", judge)


def test_a_rerun_judges_nothing_and_a_changed_gate_file_rejudges_what_its_gate_killed_or_reaches(
        example: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    _two_gate_files(example)
    first = example.gates("mutate", "--json", "out/m.json")
    assert first.code == 0, first.text
    measured = _report(example)["rows"][0]
    by_file = {file: {m["id"] for m in measured["mutants"] if m["file"] == file} for file in (IMPL, TWICE)}
    assert by_file[IMPL] and by_file[TWICE] and measured["reused"] == 0
    assert {g for m in measured["mutants"] if m["file"] == TWICE for g in m["killing_gates"]} == {"twice-gate"}

    judged: list[str] = []
    _recording(monkeypatch, judged, fake=False)
    again = example.gates("mutate", "--json", "out/m.json")
    assert again.code == 0 and judged == [], again.text
    rerun = _report(example)["rows"][0]
    assert rerun["reused"] == rerun["generated"] == measured["generated"]
    assert [(m["id"], m["status"], m["killing_gates"]) for m in rerun["mutants"]] == [
        (m["id"], m["status"], m["killing_gates"]) for m in measured["mutants"]]
    assert f"{measured['generated']} verdicts reused from the earlier report" in again.out

    example.write(PART, example.read(PART) + "# reworded\n")  # one gate file changed: its gate's mutants only
    changed = example.gates("mutate", "--json", "out/m.json")
    assert changed.code == 0, changed.text
    assert set(judged) == by_file[TWICE] and len(judged) == len(by_file[TWICE])
    after = _report(example)["rows"][0]
    assert after["reused"] == len(by_file[IMPL])
    assert after["gate_fingerprints"]["page-bytes"] == measured["gate_fingerprints"]["page-bytes"]
    assert after["gate_fingerprints"]["twice-gate"] != measured["gate_fingerprints"]["twice-gate"]


@pytest.mark.parametrize("key, said", [("tree", "measured on another tree"),
                                       ("engine_fingerprint", "measured by another engine version")])
def test_a_report_of_another_tree_or_engine_is_ignored_and_said_once(example: Example, monkeypatch: pytest.MonkeyPatch,
                                                                     key: str, said: str) -> None:
    judged: list[str] = []
    _recording(monkeypatch, judged, fake=True)
    assert example.gates("mutate", "--json", "out/m.json").code == 0
    everything = list(judged)
    report = _report(example)
    assert report[key]
    example.write("out/m.json", json.dumps({**report, key: "planted: " + report[key]}))
    judged.clear()
    result = example.gates("mutate", "--json", "out/m.json")
    assert result.code == 0 and result.out.count(said) == 1 and "nothing in it is reused" in result.out, result.out
    assert judged == everything and _report(example)["rows"][0]["reused"] == 0
    assert _report(example)[key] == report[key]  # the new report is this tree's and engine's again


def test_since_writes_survivors_as_github_annotations_and_the_shared_schema_report(example: Example) -> None:
    _commit(example)
    example.edit("    return 2 * block_size", "    _ = None\n    return 2 * block_size", IMPL)  # dropping it changes nothing
    line = example.line("_ = None", relative=IMPL)
    result = example.gates("mutate", "--since", "HEAD", "--json", "out/m.json", "--annotations", "out/ann.txt",
                           "--schema-report", "out/schema.json")
    assert result.code == 0, result.text
    assert _report(example)["changed_since"] == "HEAD"
    [annotation] = example.read("out/ann.txt").splitlines()
    assert annotation.startswith(f"::warning file={IMPL},line={line},title=Mutant survived (EXAMPLE-ROW)::drop statement "
                                 f"survived every gate that ran it (page-bytes)"), annotation
    assert "`pass`" in annotation and _report(example)["rows"][0]["mutants"][0]["fingerprint"] in annotation

    shared = _report(example, "out/schema.json")
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert list(validator.iter_errors(shared)) == []
    assert list(validator.iter_errors({**shared, "files": {IMPL: {"language": "python", "source": "", "mutants": [
        {"id": "x", "mutatorName": "m", "location": {"start": {"line": 1, "column": 1}}, "status": "survived"}]}}}))
    [(name, entry)] = shared["files"].items()
    assert (name, entry["language"], entry["source"]) == (IMPL, "python", example.read(IMPL))
    [mutant] = entry["mutants"]
    indent = len("    ")
    assert mutant["status"] == "Survived" and mutant["mutatorName"] == "statement" and mutant["replacement"] == "pass"
    assert mutant["location"] == {"start": {"line": line, "column": indent + 1}, "end": {"line": line, "column": indent + 9}}
    assert mutant["coveredBy"] == ["EXAMPLE-ROW::page-bytes"] and mutant["killedBy"] == []
    assert shared["testFiles"]["row EXAMPLE-ROW"]["tests"] == [{"id": "EXAMPLE-ROW::page-bytes", "name": "page-bytes"}]
    assert shared["thresholds"] == {"high": 90, "low": 80}

    again = example.gates("mutate", "--changed-since", "HEAD", "--json", "out/m.json", "--annotations", "-")
    assert again.code == 0 and annotation in again.out.splitlines(), again.out  # the old name still works
    clash = example.gates("mutate", "--json", "out/m.json", "--schema-report", "out/m.json")
    assert clash.code == 2 and "--schema-report out/m.json: is the --json report" in clash.err, clash.err
    folder = example.gates("mutate", "--json", "out/m.json", "--annotations", "out")
    assert folder.code == 2 and "--annotations out: is a folder" in folder.err, folder.err


def test_one_mutant_per_line_is_drawn_with_the_seed() -> None:
    found = mutants("m.py", SNIPPET)
    lines = {(m.file, m.line) for m in found}
    drawn = mutate.one_per_line(found, 0)
    assert sorted((m.file, m.line) for m in drawn) == sorted(lines)  # each line once
    assert drawn == [m for m in found if m in drawn]  # in generated order
    assert drawn == mutate.one_per_line(found, 0)
    assert any(mutate.one_per_line(found, seed) != drawn for seed in range(1, 6))  # the seed draws


def test_per_line_scores_the_draw_with_its_standard_error(example: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    judged: list[str] = []
    _recording(monkeypatch, judged, fake=True)
    result = example.gates("mutate", "--per-line", "1", "--json", "out/m.json")
    assert result.code == 0, result.text
    row = _report(example)["rows"][0]
    every = mutants(IMPL, example.read(IMPL))
    assert row["sampling"] == "per-line" and row["population"] == len(every)
    assert row["generated"] == len({m.line for m in every}) < len(every) and len(judged) == row["generated"]
    assert "± " in result.out and f"(one standard error: one per line, {row['generated']} drawn of {len(every)})" in result.out
    assert row["score_standard_error"] > 0
    assert example.gates("mutate", "--per-line", "2").code == 2


def test_a_budget_stops_the_python_row_and_scores_what_was_judged(example: Example) -> None:
    result = example.gates("mutate", "--budget", "0.001", "--json", "out/m.json")
    assert result.code == 0, result.text
    row = _report(example)["rows"][0]
    population = len(mutants(IMPL, example.read(IMPL)))
    assert 1 <= row["generated"] < population and row["unjudged"] == population - row["generated"], row
    assert f"{row['unjudged']} mutants not judged" in result.out and "not judged (--budget spent)" in result.out
    assert row["score"] == row["killed"] / row["generated"]
    left = subprocess.run(["pgrep", "-f", str(example.root)], capture_output=True, text=True).stdout.split()
    assert [pid for pid in left if int(pid) != os.getpid()] == [], "the stopped session left processes running"


def test_a_compile_memo_gives_the_same_mutants_without_compiling_them_again(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from _vllm_gates.mutation import mutate_incremental
    from _vllm_gates.mutation.mutate_incremental import CompileMemo

    plain = [(m.id("R"), m.fingerprint, m.diff) for m in mutants("m.py", SNIPPET)]
    memo = CompileMemo(tmp_path / "memo.json")
    assert [(m.id("R"), m.fingerprint, m.diff) for m in mutants("m.py", SNIPPET, compiling=memo.compiles)] == plain
    memo.save()
    calls: list[str] = []
    monkeypatch.setattr(mutate_incremental, "compiles", lambda file, text: calls.append(file) or True)
    again = CompileMemo(tmp_path / "memo.json")
    assert [(m.id("R"), m.fingerprint, m.diff) for m in mutants("m.py", SNIPPET, compiling=again.compiles)] == plain
    assert calls == []  # every answer came from the memo
    document = json.loads((tmp_path / "memo.json").read_text(encoding="utf-8"))
    (tmp_path / "memo.json").write_text(json.dumps({**document, "python": "another Python"}), encoding="utf-8")
    mutants("m.py", SNIPPET, compiling=CompileMemo(tmp_path / "memo.json").compiles)
    assert len(calls) >= len(plain)  # another Python's answers are not trusted: compiled again
