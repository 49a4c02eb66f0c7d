"""`gates mutate` (issue 28 items 2-5) on the example project: a mutant a gate kills is killed by the item that
rejected it, a line no gate reaches is not_covered, equivalent entries are honoured and stale ones reported, a
rerun reuses what was measured, and a mutant that exits or hangs is judged only as its gate (or the timeout) says.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates import mutate
from _vllm_gates.config import load_config
from _vllm_gates.mutate_operators import Mutant
from _vllm_gates.mutation_evidence import read_mutation_report, row_strengths, sources_fingerprint
from _vllm_gates.project import Project

from .conftest import Example

IMPL = "example_row/impl.py"
RAISE_LINE = '            raise ValueError(f"{name} must be >= 0, got {value}")'
UNREACHED = "\n\ndef unreached(count: int) -> int:\n    return count + 1\n"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def _commit(example: Example) -> None:
    """The copy as a git repository, committed: what --changed-since compares with."""
    _git(example.root, "init", "-q")
    _git(example.root, "add", "-A")
    _git(example.root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "copy")


def _mutants(report: dict[str, Any]) -> list[dict[str, Any]]:
    return report["rows"][0]["mutants"]


def test_killed_not_covered_equivalent_stale_and_resume(example: Example, monkeypatch: pytest.MonkeyPatch) -> None:
    _commit(example)
    example.edit(RAISE_LINE, RAISE_LINE + "  # changed", IMPL)  # one changed line a gate reaches: drop statement
    example.write(IMPL, example.read(IMPL) + UNREACHED)  # a function no gate calls
    other = example.gate_block("other-gate").replace("impl: example_row.impl:page_bytes",
                                                     "impl: example_row.oracle:counted_page_bytes")
    example.write("gates/rows/example/gate.yaml", example.read() + other)  # imports no mutated file: never run
    report_path = example.root / "reports" / "mutation.json"
    runs: list[list[str]] = []
    real_run = mutate.Runner.run

    def recorded(self: mutate.Runner, node_ids: list[str], *args: Any) -> mutate.GateRun:
        runs.append(node_ids)
        return real_run(self, node_ids, *args)

    monkeypatch.setattr(mutate.Runner, "run", recorded)
    result = example.gates("mutate", "--changed-since", "HEAD")
    assert result.code == 0, result.text
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["schema"] == "vllm-gates/mutation/1" and report["changed_since"] == "HEAD"
    by_line = {(m["line"], m["operator"]): m for m in _mutants(report)}
    dropped = by_line[(example.line("raise ValueError", relative=IMPL), "drop statement")]
    assert dropped["status"] == "killed" and dropped["gates_run"] == ["page-bytes"]
    assert dropped["killed_by"] == {"gate": "page-bytes", "item": "negative-heads"}
    unreached_line = example.line("return count + 1", relative=IMPL)
    not_covered = [m for m in _mutants(report) if m["line"] == unreached_line]
    assert {m["operator"] for m in not_covered} >= {"return None", "arith + -> -", "constant +1"}
    assert {m["status"] for m in not_covered} == {"not_covered"}
    assert len(_mutants(report)) == 1 + len(not_covered)  # changed lines only
    row = report["rows"][0]
    assert (row["killed"], row["not_covered"], row["score"]) == (1, len(not_covered), 1 / len(_mutants(report)))
    assert row["gates"][0] == {"gate": "page-bytes", "killed": 1, "unique_kills": 1, "redundant": False}
    assert not [i for ids in runs for i in ids if "::other-gate::" in i and "known_bad" not in i]
    assert "gate other-gate: killed 0, unique 0  (ran against no mutant" in result.out
    assert row["known_bads"] == []  # changed lines only: the known-bads are left to a whole run
    assert "score" in result.out and "gate page-bytes: killed 1, unique 1" in result.out
    assert _git(example.root, "status", "--porcelain", "--untracked-files=all").split("\n")[:-1] == [
        f" M {IMPL}", " M gates/rows/example/gate.yaml", "?? reports/mutation.json"]  # the tree as the run found it: no mutant left in a file

    # declared equivalent (honoured) and stale (reported), on a rerun that must run nothing
    chosen = not_covered[0]
    example.write("gates/rows/example/equivalent_mutants.yaml",
                  f"- {{id: '{chosen['id']}', reason: a test, fingerprint: '{chosen['fingerprint']}'}}\n"
                  f"- {{id: 'EXAMPLE-ROW:gone', reason: code removed, fingerprint: '{'0' * 64}'}}\n")

    def no_run(*args: Any) -> None:
        raise AssertionError("a rerun measured a mutant again")

    monkeypatch.setattr(mutate.Runner, "run", no_run)
    again = example.gates("mutate", "--changed-since", "HEAD")
    assert again.code == 0, again.text
    rerun = {m["id"]: m for m in _mutants(json.loads(report_path.read_text(encoding="utf-8")))}
    assert rerun[chosen["id"]]["status"] == "equivalent"
    assert rerun[dropped["id"]]["status"] == "killed"
    stale = json.loads(report_path.read_text(encoding="utf-8"))["rows"][0]["stale_equivalents"]
    assert [s["id"] for s in stale] == ["EXAMPLE-ROW:gone"]
    assert "stale equivalent entry EXAMPLE-ROW:gone" in again.out


def test_a_survivor_is_printed_with_its_diff_and_stubs(example: Example) -> None:
    _commit(example)
    example.edit("    return 2 * block_size", "    _ = None\n    return 2 * block_size", IMPL)  # dropping it changes nothing
    example.edit("expect: 32", "expect: 33")  # a case that fails with no mutant: never a kill, reported
    result = example.gates("mutate", "--changed-since", "HEAD", "--json", "out/m.json")
    report = json.loads((example.root / "out" / "m.json").read_text(encoding="utf-8"))
    [survivor] = _mutants(report)
    line = example.line("_ = None", relative=IMPL)
    assert result.code == 0 and (survivor["status"], survivor["line"]) == ("survived", line)
    assert survivor["gates_run"] == ["page-bytes"] and survivor["killing_gates"] == []
    assert f"SURVIVED {IMPL}:{line} (drop statement), passed by: page-bytes" in result.out
    assert "-    _ = None" in result.out and "+    pass" in result.out
    assert "a case for gate page-bytes (gates/rows/example/gate.yaml" in result.out
    assert f'fingerprint: "{survivor["fingerprint"]}"' in result.out
    assert report["rows"][0]["gates"] == [{"gate": "page-bytes", "killed": 0, "unique_kills": 0, "redundant": True}]
    assert report["rows"][0]["unmutated_failures"] == {"page-bytes": ["fp16-page"]}
    assert "gate page-bytes: 1 item(s) fail without any mutant, never counted as kills: fp16-page" in result.out
    # the report is what `mutation:` claims read: the same sources fingerprint of the tree as it is, the same score
    strength = row_strengths(read_mutation_report(example.root / "out" / "m.json", "out/m.json"), "out/m.json")["EXAMPLE-ROW"]
    assert strength.sources_fingerprint == sources_fingerprint(example.root, strength.files) == report["rows"][0]["sources_fingerprint"]
    assert (strength.score, report["rows"][0]["files"]) == (0.0, [IMPL])


def _judge(example: Example, body: str, timeout: float) -> dict[str, Any]:
    """judge_mutant on a hand-written mutant of the impl whose page_bytes body is ``body``."""
    config = load_config(example.root)
    project = Project(config)
    gate_file = project.gate_file("EXAMPLE-ROW")
    source = example.read(IMPL).replace("    return 2 * block_size", f"    {body}\n    return 2 * block_size")
    runner = mutate.Runner(config, example.root / "work", 0)
    mutant = Mutant(IMPL, 8, "hand", 0, source, "", "f" * 64)
    return mutate.judge_mutant(runner, "gates/rows/example/gate.yaml", gate_file, mutant, ["page-bytes"],
                               {"page-bytes": {"fp16-page"}}, timeout)


def test_an_exiting_mutant_is_killed_by_the_gate_that_reports_it(example: Example) -> None:
    (example.root / "work").mkdir()
    assert _judge(example, "import os; os._exit(0)", 30)["killed_by"] == {"gate": "page-bytes", "item": "fp16-page"}


def test_a_hanging_mutant_times_out(example: Example) -> None:
    (example.root / "work").mkdir()
    judged = _judge(example, "while True: pass", 3)
    assert judged["status"] == "timed_out" and judged["killed_by"] is None


def test_a_mutant_that_does_not_import_is_not_compiling(example: Example) -> None:
    (example.root / "work").mkdir()
    example.write(IMPL, example.read(IMPL) + "\nraise ImportError('mutated module-level code')\n")
    config = load_config(example.root)
    gate_file = Project(config).gate_file("EXAMPLE-ROW")
    mutant = Mutant(IMPL, 1, "hand", 0, example.read(IMPL), "", "e" * 64)
    example.write(IMPL, example.read(IMPL).replace("\nraise ImportError('mutated module-level code')\n", ""))
    judged = mutate.judge_mutant(mutate.Runner(config, example.root / "work", 0), "gates/rows/example/gate.yaml",
                                 gate_file, mutant, ["page-bytes"], {"page-bytes": {"fp16-page"}}, 30)
    assert judged["status"] == "not_compiling"


def test_usage_errors_name_the_flag(example: Example) -> None:
    assert "--impl cpp" in example.gates("mutate", "--impl", "cpp").err
    assert "--max-mutants 0" in example.gates("mutate", "--max-mutants", "0").err
    example.write("out/run.json", '{"schema": "vllm-gates/report/1"}')  # a run's report, say: never overwritten
    clobber = example.gates("mutate", "--json", "out/run.json")
    assert clobber.code == 3 and "--json" in clobber.err and "not overwritten" in clobber.err, clobber.err
    assert example.read("out/run.json") == '{"schema": "vllm-gates/report/1"}'
    example.edit('sources: ["example_row/*.py"]', 'sources: ["example_row/oracle.py"]')
    refused = example.gates("mutate")
    assert refused.code == 3 and "name no Python file of the implementation" in refused.err


SNIPPET = '''"""A docstring: not mutated."""


def f(items: list[int], limit: int = 3) -> int | None:
    """Nor is this one."""
    total = 0
    for item in items[1:limit]:
        if item > 2 and not item == 5:
            total += item * 2
    assert total >= 0
    return total if items[0] is not None else None
'''


def test_the_operator_families_in_a_fixed_order() -> None:
    from _vllm_gates.mutate_operators import mutants

    found = mutants("m.py", SNIPPET)
    assert [(m.line, m.operator) for m in found] == [(m.line, m.operator) for m in mutants("m.py", SNIPPET)]
    assert [m.line for m in found] == sorted(m.line for m in found)
    operators = {m.operator for m in found}
    assert operators >= {"arith * -> //", "arith += -> -=", "compare > -> >=", "compare == -> !=", "compare is not -> is",
                         "boolean and -> or", "boolean drop not", "constant +1", "constant -1", "constant 0",
                         "negate condition", "drop statement", "return None", "index +1", "index -1"}
    assert not any(m.line in (1, 5) for m in found)  # docstrings
    assert {m.operator for m in found if m.line == 4} == {"constant +1", "constant -1", "constant 0"}  # the default,
    assert all("(items: list[int], limit: int = " in m.source for m in found)  # never the annotations
    for mutant in found:
        changed = [line for line in mutant.diff.splitlines()[2:] if line[:1] in "+-"]
        assert len(changed) == 2 and compile(mutant.source, "m.py", "exec")
    assert len({m.fingerprint for m in found}) == len(found)
    shifted = mutants("m.py", "\n\n" + SNIPPET)  # the same code two lines down keeps its fingerprints
    assert [m.fingerprint for m in shifted] == [m.fingerprint for m in found]


def test_an_oracle_view_in_the_row_folder_does_not_hide_the_impl(example: Example) -> None:
    """CAPI-ABI's `oracle: .subjects:unchanged` calls the impl: only oracles outside the gate files' folder exclude."""
    example.write("gates/rows/example/views.py", "from example_row.impl import page_bytes\n\n\n"
                                                 "def unchanged(**kwargs):\n    return page_bytes(**kwargs)\n")
    config = load_config(example.root)
    assert mutate.mutable_files(config, Project(config).gate_file("EXAMPLE-ROW")) == [IMPL]
    example.edit("oracle: example_row.oracle:counted_page_bytes", "oracle: .views:unchanged")
    config = load_config(example.root)
    assert mutate.mutable_files(config, Project(config).gate_file("EXAMPLE-ROW")) == ["example_row/__init__.py", IMPL]


def test_a_whole_run_lists_each_known_bad_with_the_item_that_rejected_it(example: Example) -> None:
    result = example.gates("mutate", "--max-mutants", "1", "--json", "out/m.json")
    row = json.loads((example.root / "out" / "m.json").read_text(encoding="utf-8"))["rows"][0]
    assert result.code == 0 and row["generated"] == 1
    assert [(k["name"], k["killed_by"]) for k in row["known_bads"]] == [
        (name, {"gate": "page-bytes", "item": f"known_bad[{name}]"})
        for name in ("drops-factor-two", "wrong-for-big-heads", "accepts-negative")]
    assert "known-bad page-bytes/accepts-negative: rejected by page-bytes known_bad[accepts-negative]" in result.out
