"""`gates mutate` (issue 28 items 2-5) on the example project: a mutant a gate kills is killed by the item that
rejected it, a line no gate reaches is not_covered, equivalent entries are honoured and stale ones reported, a
rerun reuses what was measured, and a mutant that exits or hangs is judged only as its gate (or the timeout) says.
"""
from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.project import Project
from _vllm_gates.mutation import mutate
from _vllm_gates.mutation.mutate_operators import Mutant, mutants
from _vllm_gates.run.mutation_evidence import read_mutation_report, row_strengths, sources_fingerprint

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
    plans: list[dict[str, Any]] = []
    real_session = mutate.Sessions._session

    def recorded(self: mutate.Sessions, gate_path: str, folder: Path, plan: dict[str, Any], *args: Any) -> str | None:
        plans.append(plan)
        return real_session(self, gate_path, folder, plan, *args)

    monkeypatch.setattr(mutate.Sessions, "_session", recorded)
    result = example.gates("mutate", "--changed-since", "HEAD")
    assert result.code == 0, result.text
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["schema"] == "vllm-gates/mutation/1" and report["changed_since"] == "HEAD"
    by_line = {(m["line"], m["operator"]): m for m in _mutants(report)}
    dropped = by_line[(example.line("raise ValueError", relative=IMPL), "drop statement")]
    assert dropped["status"] == "killed" and dropped["gates_run"] == ["page-bytes"]
    assert dropped["killed_by"]["gate"] == "page-bytes" and dropped["killed_by"]["item"] == "negative-heads"
    assert "did not raise" in dropped["killed_by"]["detail"] or "raise" in dropped["killed_by"]["detail"], dropped
    unreached_line = example.line("return count + 1", relative=IMPL)
    not_covered = [m for m in _mutants(report) if m["line"] == unreached_line]
    assert {m["operator"] for m in not_covered} >= {"return None", "arith + -> -", "constant +1"}
    assert {m["status"] for m in not_covered} == {"not_covered"}
    assert len(_mutants(report)) == 1 + len(not_covered)  # changed lines only
    row = report["rows"][0]
    assert (row["killed"], row["not_covered"], row["score"]) == (1, len(not_covered), 1 / len(_mutants(report)))
    assert row["gates"][0] == {"gate": "page-bytes", "killed": 1, "unique_kills": 1, "redundant": False}
    assert [plan["trace_gates"] for plan in plans] == [["page-bytes"]]  # other-gate imports no mutated file: not run
    assert not plans[0]["known_bads"]
    assert "gate other-gate: killed 0, unique 0  (ran against no mutant" in result.out
    assert row["known_bads"] == []  # changed lines only: the known-bads are left to a whole run
    assert "score" in result.out and "gate page-bytes: killed 1, unique 1" in result.out
    assert _git(example.root, "status", "--porcelain", "--untracked-files=all").split("\n")[:-1] == [
        f" M {IMPL}", " M gates/rows/example/gate.yaml", "?? build/mutants/python-compiles.json",  # the compile memo
        "?? reports/mutation.json"]  # the tree as the run found it: no mutant left in a file

    # declared equivalent (honoured) and stale (reported), on a rerun that must run nothing
    chosen = not_covered[0]
    return_line = example.line("    return 2 * block_size", relative=IMPL)  # not a changed line
    unchanged = next(m for m in mutants(IMPL, example.read(IMPL)) if m.line == return_line)
    example.write("gates/rows/example/equivalent_mutants.yaml",
                  f"- {{id: '{chosen['id']}', reason: a test, fingerprint: '{chosen['fingerprint']}'}}\n"
                  f"- {{id: 'unchanged', reason: outside the changed lines, fingerprint: '{unchanged.fingerprint}'}}\n"
                  f"- {{id: 'EXAMPLE-ROW:gone', reason: code removed, fingerprint: '{'0' * 64}'}}\n")

    def no_run(*args: Any) -> None:
        raise AssertionError("a rerun measured a mutant again")

    monkeypatch.setattr(mutate.Sessions, "judge", no_run)
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


def _judge(example: Example, source: str, timeout: float) -> dict[str, Any]:
    """Sessions.judge on one hand-written mutant of the impl (its whole text ``source``), on the line of page_bytes'
    return, which the gate executes unmutated."""
    config = load_config(example.root)
    gate_file = Project(config).gate_file("EXAMPLE-ROW")
    line = example.line("    return 2 * block_size", relative=IMPL)
    judged: list[dict[str, Any]] = []
    (example.root / "work").mkdir()
    sessions = mutate.Sessions(config, example.root / "work", 0)
    chosen = [Mutant(IMPL, line, "hand", 0, source, "", "f" * 64)]
    first = sessions.judge("EXAMPLE-ROW", "gates/rows/example/gate.yaml", [IMPL], sessions.python_specs("EXAMPLE-ROW", [IMPL], chosen),
                           chosen, ["page-bytes"], False, timeout, lambda mutant, outcome: judged.append(outcome.to_data()))
    assert first["passing"]["page-bytes"] and first["known_bads"] == []
    [outcome] = judged
    return outcome


def _body(example: Example, body: str) -> str:
    return example.read(IMPL).replace("    return 2 * block_size", f"    {body}\n    return 2 * block_size")


def test_an_exiting_mutant_is_killed_by_the_gate_that_reports_it(example: Example) -> None:
    killed = _judge(example, _body(example, "import os; os._exit(0)"), 30)
    assert killed["status"] == "killed" and killed["killed_by"]["gate"] == "page-bytes" and killed["killed_by"]["item"] == "fp16-page"
    assert "exit" in killed["killed_by"]["detail"], killed


def test_a_hanging_mutant_times_out_and_the_next_session_judges_the_rest(example: Example) -> None:
    config = load_config(example.root)
    gate_file = Project(config).gate_file("EXAMPLE-ROW")
    line = example.line("    return 2 * block_size", relative=IMPL)
    hanging = Mutant(IMPL, line, "hand", 0, _body(example, "while True: pass"), "", "1" * 64)
    dropped = Mutant(IMPL, line, "hand", 1, example.read(IMPL).replace("    return 2 * block_size", "    return None  #"), "", "2" * 64)
    judged: dict[int, dict[str, Any]] = {}
    (example.root / "work").mkdir()
    sessions = mutate.Sessions(config, example.root / "work", 0)
    sessions.judge("EXAMPLE-ROW", "gates/rows/example/gate.yaml", [IMPL], sessions.python_specs("EXAMPLE-ROW", [IMPL], [hanging, dropped]),
                   [hanging, dropped], ["page-bytes"], False, 3, lambda mutant, outcome: judged.setdefault(mutant.index, outcome.to_data()))
    assert judged[0]["status"] == "timed_out" and judged[0]["killed_by"] is None
    assert judged[1]["status"] == "killed"  # judged by a second session, which reused the first pass
    assert len(list((example.root / "work").rglob("baseline.json"))) == 1


def test_a_mutant_that_does_not_import_is_not_compiling(example: Example) -> None:
    judged = _judge(example, example.read(IMPL) + "\nraise ImportError('mutated module-level code')\n", 30)
    assert judged["status"] == "not_compiling" and judged["killed_by"] is None


def test_a_mutant_no_item_tells_apart_survives(example: Example) -> None:
    survived = _judge(example, _body(example, "_unused = 1"), 30)
    assert survived["status"] == "survived" and survived["gates_run"] == ["page-bytes"] and survived["killing_gates"] == []


def test_usage_errors_name_the_flag(example: Example) -> None:
    unknown = example.gates("mutate", "--impl", "rust")
    assert unknown.code == 2 and "--impl rust: unknown implementation (known: python" in unknown.err, unknown.err
    assert "--budget -1" in example.gates("mutate", "--budget", "-1").err
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


LIMIT = 3
"""A constant's docstring: a bare string statement, not mutated either."""


@dataclass(frozen=True)
class Box:
    size: int = 2
'''


def test_the_operator_families_in_a_fixed_order() -> None:
    from _vllm_gates.mutation.mutate_operators import mutants

    found = mutants("m.py", SNIPPET)
    assert [(m.line, m.operator) for m in found] == [(m.line, m.operator) for m in mutants("m.py", SNIPPET)]
    assert [m.line for m in found] == sorted(m.line for m in found)
    operators = {m.operator for m in found}
    assert operators >= {"arith * -> //", "arith += -> -=", "compare > -> >=", "compare == -> !=", "compare is not -> is",
                         "boolean and -> or", "boolean drop not", "constant +1", "constant -1", "constant 0",
                         "negate condition", "drop statement", "return None", "index +1", "index -1"}
    assert not any(m.line in (1, 5, 15) for m in found)  # docstrings
    assert {m.operator for m in found if m.line == 14} == {"constant +1", "constant -1", "constant 0", "drop statement"}
    assert not any(m.line == 18 for m in found)  # a class's decorators, as a function's
    assert {m.operator for m in found if m.line == 20} == {"constant +1", "constant -1", "constant 0", "drop statement"}
    assert {m.operator for m in found if m.line == 4} == {"constant +1", "constant -1", "constant 0"}  # the default,
    assert all("(items: list[int], limit: int = " in m.source for m in found)  # never the annotations
    for mutant in found:
        changed = [line for line in mutant.diff.splitlines()[2:] if line[:1] in "+-"]
        assert len(changed) == 2 and compile(mutant.source, "m.py", "exec")
    assert len({m.fingerprint for m in found}) == len(found)
    shifted = mutants("m.py", "\n\n" + SNIPPET)  # the same code two lines down keeps its fingerprints
    assert [m.fingerprint for m in shifted] == [m.fingerprint for m in found]


@pytest.mark.parametrize("file", ["impl/v1/kv_cache_interface.py", "impl/distributed/gloo_world.py", "impl/capi/convert.py"])
def test_compiling_the_spliced_statement_keeps_the_mutants_a_whole_file_compile_keeps(file: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A splice is checked by compiling its top-level statement after the file's __future__ imports, not the whole
    file (most of generating's time): the same mutants, in the same order, as compiling each mutated file."""
    from _vllm_gates.mutation import mutate_operators

    text = (Path(__file__).resolve().parents[2] / file).read_text(encoding="utf-8")
    fast = mutants(file, text)
    monkeypatch.setattr(mutate_operators, "_top_level", lambda tree: defaultdict(lambda: (1, len(text.splitlines()))))
    monkeypatch.setattr(mutate_operators, "_future_imports", lambda tree, raw: "")  # the whole file has its own
    assert [(m.line, m.operator, m.index, m.source, m.fingerprint) for m in fast] == \
        [(m.line, m.operator, m.index, m.source, m.fingerprint) for m in mutants(file, text)]
    assert len(fast) > 100


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
    # each known-bad with the case (or the properties' example) that rejected it first, and what that check said
    assert [(k["name"], k["killed_by"]["gate"], k["killed_by"]["item"]) for k in row["known_bads"]] == [
        ("drops-factor-two", "page-bytes", "fp16-page"), ("wrong-for-big-heads", "page-bytes", "negative-heads"),
        ("accepts-negative", "page-bytes", "negative-heads")]
    assert all(k["killed_by"]["detail"] for k in row["known_bads"])
    assert "known-bad page-bytes/accepts-negative: rejected by page-bytes negative-heads" in result.out


def test_each_mutant_gets_a_new_impl_worker_and_the_oracle_answers_once(example: Example, tmp_path: Path) -> None:
    """The impl's worker is new for each mutant (it imported the mutated file); the oracle is asked only in the first
    pass: the mutants reuse its answers (the gate's oracle memo), so its worker is never restarted for them."""
    log = tmp_path / "pids.txt"  # outside the project, where the impl's sandbox lets it write
    example.edit("def counted_page_bytes(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:\n",
                 "def counted_page_bytes(block_size: int, heads: int, head_size: int, dtype_bytes: int) -> int:\n"
                 f"    import os; open({str(log)!r}, 'a').write(f'oracle {{os.getpid()}}\\n')\n", "example_row/oracle.py")
    marker = f"    import os; open({str(log)!r}, 'a').write(f'impl {{os.getpid()}}\\n')\n"
    line = example.line("    return 2 * block_size", relative=IMPL)
    sources = [_body(example, f"_unused = {n}").replace("    return 2 * block_size", marker + "    return 2 * block_size", 1)
               for n in range(3)]
    config = load_config(example.root)
    (example.root / "work").mkdir()
    judged: list[dict[str, Any]] = []
    sessions = mutate.Sessions(config, example.root / "work", 0)
    chosen = [Mutant(IMPL, line, "hand", n, text, "", str(n) * 64) for n, text in enumerate(sources)]
    sessions.judge("EXAMPLE-ROW", "gates/rows/example/gate.yaml", [IMPL], sessions.python_specs("EXAMPLE-ROW", [IMPL], chosen),
                   chosen, ["page-bytes"], False, 30, lambda mutant, outcome: judged.append(outcome.to_data()))
    assert [outcome["status"] for outcome in judged] == ["survived"] * 3
    seen: dict[str, set[str]] = {}
    for role, pid in (line.split() for line in log.read_text(encoding="utf-8").splitlines()):
        seen.setdefault(role, set()).add(pid)
    calls = [line.split()[0] for line in log.read_text(encoding="utf-8").splitlines()]
    assert len(seen["impl"]) == 3 and len(seen["oracle"]) == 1, seen  # the unmutated impl never logs (no marker)
    # the impl reaches the marker in each mutant's fp16-page case and 50 examples (negative-heads raises before it);
    # the oracle answers only in the first pass (3 x 50 more otherwise)
    assert calls.count("impl") == 3 * 51 and calls.count("oracle") <= 52, (calls.count("impl"), calls.count("oracle"))


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_stopped_run_ends_its_session_and_keeps_what_it_measured(example: Example, signal_name: str) -> None:
    """Stopping `gates mutate` (kill, Ctrl-C) ends its session and that session's workers, which run in their own
    process group, and exits 130 (issue 28: an interrupted run keeps what it measured)."""
    import os
    import signal
    import sys
    import time

    example.edit("    return 2 * block_size", "    import time; time.sleep(60)\n    return 2 * block_size", IMPL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    process = subprocess.Popen([sys.executable, "-m", "_vllm_gates.frontends.cli", "mutate", "--timeout", "120", "--json", "out/m.json"],
                               cwd=example.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(example.root.glob("out/m.json")) and time.monotonic() < deadline:  # written once the row starts
        time.sleep(0.2)
    time.sleep(3)  # the session has started and sleeps in the first pass
    process.send_signal(getattr(signal, signal_name))
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    left = subprocess.run(["pgrep", "-f", str(example.root)], capture_output=True, text=True).stdout.split()
    assert [pid for pid in left if int(pid) != os.getpid()] == [], "processes of the run were left running"


def test_first_kill_stops_a_mutant_at_its_first_killing_gate(example: Example) -> None:
    """--first-kill: a mutant two gates would kill is judged by one of them (the cheaper first), and a report measured
    the other way is not reused."""
    example.write("gates/rows/example/gate.yaml", example.read() + example.gate_block("twin-gate"))
    full = example.gates("mutate", "--max-mutants", "6", "--seed", "2", "--json", "out/m.json")
    assert full.code == 0, full.text
    both = [m for m in _mutants(json.loads((example.root / "out" / "m.json").read_text(encoding="utf-8")))
            if len(m["killing_gates"]) == 2]
    assert both, "no mutant killed by both gates: the sample does not test --first-kill"
    fast = example.gates("mutate", "--max-mutants", "6", "--seed", "2", "--json", "out/m.json", "--first-kill")
    assert fast.code == 0 and "nothing in it is reused" in fast.out, fast.text
    report = json.loads((example.root / "out" / "m.json").read_text(encoding="utf-8"))
    again = {m["id"]: m for m in _mutants(report)}
    assert report["first_kill"] is True
    for mutant in both:
        assert again[mutant["id"]]["status"] == "killed" and len(again[mutant["id"]]["killing_gates"]) == 1


def test_a_line_only_a_gate_that_cannot_run_here_reaches_is_not_run_here(example: Example) -> None:
    """A file only a gpu-marked gate imports, on a machine without CUDA: its mutants are not_run_here (with why),
    not not_covered, and the score counts only what this machine can judge."""
    example.write("example_row/device_only.py", "def device_bytes(block_size, heads, head_size, dtype_bytes):\n"
                                                "    return 2 * block_size * heads * head_size * dtype_bytes\n")
    block = example.gate_block("on-device", markers="[gpu]").replace("impl: example_row.impl:page_bytes",
                                                                    "impl: example_row.device_only:device_bytes")
    example.write("gates/rows/example/gate.yaml", example.read() + block)
    result = example.gates("mutate", "--json", "out/m.json")
    assert result.code == 0, result.text
    row = json.loads((example.root / "out" / "m.json").read_text(encoding="utf-8"))["rows"][0]
    device = [m for m in row["mutants"] if m["file"] == "example_row/device_only.py"]
    assert device and {m["status"] for m in device} == {"not_run_here"}, {m["status"] for m in device}
    assert "gate on-device (gpu:" in device[0]["detail"]
    assert row["not_run_here"] == len(device) and row["score"] == row["killed"] / (
        row["generated"] - row["equivalent"] - row["not_compiling"] - row["not_run_here"])
    assert row["score_counting_not_run_here"] == row["killed"] / (row["generated"] - row["equivalent"] - row["not_compiling"])
    assert "counting those not run here as survivors" in result.out
    assert f"not run here {len(device)}" in result.out


def test_changed_lines_only_a_gate_that_cannot_run_here_reaches_are_not_run_here(example: Example) -> None:
    """--changed-since on a file only a gpu gate imports, without CUDA: no error, its mutants are not_run_here."""
    example.write("example_row/device_only.py", "def device_bytes(block_size, heads, head_size, dtype_bytes):\n"
                                                "    return 2 * block_size * heads * head_size * dtype_bytes\n")
    block = example.gate_block("on-device", markers="[gpu]").replace("impl: example_row.impl:page_bytes",
                                                                    "impl: example_row.device_only:device_bytes")
    example.write("gates/rows/example/gate.yaml", example.read() + block)
    _commit(example)
    example.edit("    return 2 * block_size", "    return 2 *  block_size", "example_row/device_only.py")
    result = example.gates("mutate", "--changed-since", "HEAD", "--json", "out/m.json")
    assert result.code == 0, result.text
    row = json.loads((example.root / "out" / "m.json").read_text(encoding="utf-8"))["rows"][0]
    assert row["mutants"] and {m["status"] for m in row["mutants"]} == {"not_run_here"}


def test_a_drawn_score_is_shown_to_one_decimal_with_its_standard_error():
    """89.8% of a 200-mutant draw is never printed as 90%, and says how far a draw of that size may be from the
    population's score (one standard error, finite-population corrected)."""
    from _vllm_gates.mutation.mutate_report import MutationRowReport, summary_lines

    statuses = ["killed"] * 150 + ["survived"] * 17 + ["not_run_here"] * 33
    report = MutationRowReport("R", "s", "g", [], mutants=[{"status": s, "operator": "arith + -> -"} for s in statuses], population=2218)
    assert abs(report.standard_error() - (150 / 167 * 17 / 167 / 167 * 2018 / 2217) ** 0.5) < 1e-12
    line = summary_lines(report, 10.0)[0]
    assert "score 89.8% ± 2.2% (one standard error: 200 drawn of 2218)" in line, line
    assert "(75.0% counting those not run here as survivors)" in line
    whole = MutationRowReport("R", "s", "g", [], mutants=[{"status": s, "operator": "arith + -> -"} for s in statuses], population=200)
    assert whole.standard_error() is None and "score 89.8% (75.0%" in summary_lines(whole, 10.0)[0]
