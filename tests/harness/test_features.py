"""The feature host (docs/architecture.md, "Adding a feature"): each feature's options declared once for `gates run`
and pytest, its report passes run in their declared order, its module light to import; and `GateRun` written only
from its own module."""
from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from _vllm_gates.run import features
from _vllm_gates.run.features import FEATURES, ReportPass, RunOption, hookimpl, options, report_passes
from _vllm_gates.run.session import GateRun

ENGINE = Path(__file__).resolve().parents[2] / "src" / "_vllm_gates"
MUTATORS = {"add", "append", "extend", "update", "setdefault", "pop", "popitem", "clear", "remove", "discard", "insert"}
OWN_STATE = {"stash"}  # a feature's own keys: the one field features write into (never assign)


def _is_run(node: ast.AST) -> bool:
    """``run``, ``self.run``, ``x.run`` or ``gate_run(...)``: the names a GateRun goes by outside its module."""
    if isinstance(node, ast.Name):
        return node.id == "run"
    if isinstance(node, ast.Attribute):
        return node.attr == "run"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "gate_run"


def gate_run_writes(source: str, fields: set[str]) -> list[tuple[int, str]]:
    """Each line of ``source`` assigning, deleting or mutating in place a field of a GateRun: (line, field)."""
    found = []

    def field_of(target: ast.AST) -> str | None:
        while isinstance(target, ast.Subscript):  # run.meta[key] = ..., run.items_left[where] -= 1
            target = target.value
        if isinstance(target, ast.Attribute) and target.attr in fields and _is_run(target.value):
            return target.attr
        return None

    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            targets = [node.func.value]
        for target in targets:
            for part in ast.walk(target) if isinstance(target, ast.Tuple) else [target]:
                name = field_of(part)
                if name is not None and name not in OWN_STATE:
                    found.append((node.lineno, name))
    return found


def test_only_its_own_module_writes_a_gate_run() -> None:
    fields = {f.name for f in dataclasses.fields(GateRun)}
    writes = {path.name: gate_run_writes(path.read_text(encoding="utf-8"), fields)
              for path in sorted(ENGINE.glob("*.py")) if path.name != "session.py"}
    assert {name: found for name, found in writes.items() if found} == {}


@pytest.mark.parametrize("line", [
    "run.interrupted = 'SIGINT'", "self.run.other_failures += 1", "run.meta['seed'] = 1", "run.notes += ['x']",
    "run.collected_files.add(path)", "run.broken.update(found)", "run.items_left[where] -= 1", "del run.items_left[k]",
    "gate_run(config).seed = None", "run.requested_rows, run.evidence = rows, []",
])
def test_the_check_finds_each_kind_of_write(line: str) -> None:
    fields = {f.name for f in dataclasses.fields(GateRun)}
    assert gate_run_writes(line, fields), line


def test_the_check_leaves_reads_methods_and_the_stash_alone() -> None:
    fields = {f.name for f in dataclasses.fields(GateRun)}
    source = "x = run.meta.get('seed')\nrun.tell('note')\nrun.stash[KEY] = 1\nself.audit = True\nother.notes.append(1)\n"
    assert gate_run_writes(source, fields) == []


def test_each_feature_option_is_declared_once_for_both_front_doors() -> None:
    from _vllm_gates.frontends.cli import parser
    from _vllm_gates.frontends.pytest_entry import pytest_addoption

    declared = [option.name for option in options("cli") + options("pytest")]
    cli_flags = {flag for action in parser()._subparsers._group_actions[0].choices["run"]._actions  # type: ignore[union-attr]
                 for flag in action.option_strings}
    added: list[str] = []
    group = types.SimpleNamespace(addoption=lambda *names, **_: added.extend(names))
    pytest_addoption(types.SimpleNamespace(getgroup=lambda *_: group))  # type: ignore[arg-type]
    assert {f"--{option.name}" for option in options("cli")} <= cli_flags
    assert {f"--gates-{option.name}" for option in options("pytest")} <= set(added)
    assert {"examples-db", "examples-db-read-only", "evidence", "mutation", "shard", "shard-durations"} <= set(declared)
    assert len(added) == len(set(added))  # no option added twice (by the entry and by a feature)


def test_a_run_option_reaches_pytest_as_written() -> None:
    one = RunOption("thing", "a thing", metavar="F")
    many = RunOption("things", "things", metavar="F", repeat=True)
    assert (one.pytest_args("a"), one.pytest_args(None), one.dest, one.pytest_dest) == (
        ["--gates-thing=a"], [], "thing", "gates_thing")
    assert many.pytest_args(["a", "b"]) == ["--gates-things=a", "--gates-things=b"]


def test_the_report_passes_run_in_their_declared_order() -> None:
    assert [step.name for step in report_passes()] == [
        "mutation claims", "operation counts", "claims hints", "evidence offered", "fingerprints", "unknown rows", "partial selection",
        "interrupted"]


def test_two_passes_with_one_order_are_refused() -> None:
    clash = types.ModuleType("clash")
    clash.gates_report_passes = hookimpl(lambda: [ReportPass(300, "clash", lambda report, judging: report)])  # type: ignore[attr-defined]
    features.host().register(clash, "clash")
    try:
        with pytest.raises(ValueError, match="'evidence offered' and 'clash' both declare order 300|'clash' and 'evidence offered' both declare order 300"):
            report_passes()
    finally:
        features.host().unregister(clash)


def test_a_feature_module_imports_only_the_host_at_its_top() -> None:
    """The pytest entry imports every feature in every pytest session (their options): nothing else of the engine."""
    probe = ("import sys, importlib\n"
             f"for name in {list(FEATURES)!r}:\n    importlib.import_module(name)\n"
             "print(sorted(m for m in sys.modules if m.startswith('_vllm_gates')))")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == repr(sorted(["_vllm_gates", "_vllm_gates.run", "_vllm_gates.run.features", *FEATURES]))


def test_a_new_feature_is_its_module_and_a_registration(example) -> None:
    """A feature written after the host: an option for both front doors, its state in the run's stash, a note under
    the row table and a report pass after every other, with no edit to plugin, session or cli."""
    seen: list[tuple[Any, Any]] = []
    key = pytest.StashKey[str]()
    demo = types.ModuleType("feature_demo")
    option = RunOption("demo-note", "a note said under the row table", metavar="TEXT")
    demo.gates_add_options = hookimpl(lambda: [option])  # type: ignore[attr-defined]
    demo.gates_plan_run = hookimpl(lambda plan, args, project: dataclasses.replace(  # type: ignore[attr-defined]
        plan, pytest_args=plan.pytest_args + tuple(option.pytest_args(getattr(args, option.dest)))))

    def configure(run: Any, config: Any) -> None:
        run.stash[key] = config.getoption(option.pytest_dest)
        run.tell(f"demo says {run.stash[key]}")

    demo.gates_configure = hookimpl(configure)  # type: ignore[attr-defined]
    demo.gates_report_passes = hookimpl(lambda: [ReportPass(800, "demo", lambda report, judging: seen.append(  # type: ignore[attr-defined]
        (report, judging)) or report)])
    features.host().register(demo, "feature_demo")
    try:
        ran = example.gates("run", "--demo-note", "hello")
    finally:
        features.host().unregister(demo)
    assert ran.code == 0, ran.out + ran.err
    assert "demo says hello" in ran.out
    ((report, judging),) = seen
    assert [row.row for row in report.rows] == [row.row for row in judging.run.report.rows]
    assert judging.run.stash[key] == "hello"
