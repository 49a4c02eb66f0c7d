"""Fixtures for the harness's own tests: a fresh copy of tests/example_project per test, and two front doors.

`example.gates(...)` runs the `gates` CLI in this process (cli.main) and `example.pytest(...)` runs pytest in
this process (pytester); both see the copied project. The copy has its own `gates` package, like a user's
project: around each run this repository's `gates` is set aside and the copy's modules are dropped afterwards,
so a later test (or run) imports its own, mutated copy.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch  # imported before any pytester snapshot of sys.modules: torch must never be dropped and imported again
import yaml

from tests.conftest import SRC

EXAMPLE = Path(__file__).resolve().parents[1] / "example_project"
GATE_FILE = "gates/rows/example/gate.yaml"
ROADMAP = "spec/roadmap.yaml"
COPIED = ("example_row", "gates", "spec", "pyproject.toml")


@dataclass(frozen=True)
class CliResult:
    """What one `gates ...` invocation returned and printed."""

    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def engine_env(*unset: str) -> dict[str, str]:
    """The environment of a command run in a project: this one without PYTEST_ADDOPTS and ``unset``, and on PYTHONPATH
    only this checkout's engine (SRC), not whichever one the environment installed; the project's own packages, such
    as its `gates`, never meet this repository's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH", *unset)}
    env["PYTHONPATH"] = str(SRC)
    return env


def log_beside(root: Path, name: str) -> Path:
    """A file in a folder beside the project ``root``, where a test's implementation may log what it does: its
    confined workers may write there (the temp folder), never in the project (docs/worker-protocol.md §2.2)."""
    folder = root.with_name(f"{root.name}-logs")
    folder.mkdir(exist_ok=True)
    return folder / name


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based number of the line holding the n-th occurrence of needle: the expected line, found by plain text search."""
    hits = [number for number, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert len(hits) >= occurrence, f"{needle!r} occurs on {len(hits)} line(s), wanted occurrence {occurrence}"
    return hits[occurrence - 1]


PROJECT_PACKAGES = ("example_row", "gates")  # top-level packages of the copied project


def _project_module(name: str) -> bool:
    return any(name == top or name.startswith(f"{top}.") for top in PROJECT_PACKAGES)


def drop_project_modules(root: Path) -> None:
    """Forget modules imported from a copied project (example_row, its gates package and their submodules)."""
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None) or ""
        if _project_module(name) or origin.startswith(str(root)):
            del sys.modules[name]


@contextlib.contextmanager
def project_modules(root: Path):
    """Run with the copy's packages importable under their names: this repository's `gates` is set aside, then put back."""
    saved = {name: module for name, module in sys.modules.items() if _project_module(name)}
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        drop_project_modules(root)
        sys.modules.update(saved)


class Example:
    """A mutable copy of the example project."""

    def __init__(self, root: Path, pytester: pytest.Pytester):
        self.root, self._pytester = root, pytester

    # files ------------------------------------------------------------------------------------------
    def read(self, relative: str = GATE_FILE) -> str:
        return (self.root / relative).read_text(encoding="utf-8")

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def edit(self, old: str, new: str, relative: str = GATE_FILE) -> str:
        """Replace the single occurrence of old; return the new text."""
        text = self.read(relative)
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {relative}"
        text = text.replace(old, new)
        self.write(relative, text)
        return text

    def line(self, needle: str, occurrence: int = 1, relative: str = GATE_FILE) -> int:
        return line_of(self.read(relative), needle, occurrence)

    def gate_block(self, gate_id: str, markers: str = "[cpu]") -> str:
        """A copy of the example's (original) gate under another id and markers, to append to `gates:`."""
        text = (EXAMPLE / GATE_FILE).read_text(encoding="utf-8")
        block = text[text.index("  - id: page-bytes"):]
        return block.replace("id: page-bytes", f"id: {gate_id}").replace("markers: [cpu]", f"markers: {markers}")

    def add_gate(self, gate_id: str, markers: str = "[cpu]") -> None:
        self.write(GATE_FILE, self.read() + self.gate_block(gate_id, markers))

    def set_roadmap(self, rows: dict[str, tuple[str, dict[str, str]]]) -> None:
        """rows: {ROW: (row state, {milestone: state})}."""
        document = {"rows": {row: {"title": f"{row} title", "state": state,
                                   "milestones": {ms: {"title": f"{ms} title", "state": s} for ms, s in milestones.items()}}
                             for row, (state, milestones) in rows.items()}}
        self.write(ROADMAP, yaml.safe_dump(document, sort_keys=False))

    @staticmethod
    def row_folder(row: str) -> str:
        return f"gates/rows/{row.lower().replace('-', '_')}"

    def add_row(self, row: str) -> None:
        """A second row, gated by a copy of the example row folder (its own gate file and helpers, same spec and package)."""
        self.set_roadmap({"EXAMPLE-ROW": ("DONE", {"M1": "DONE"}), row: ("DONE", {"M1": "DONE"})})
        folder = self.root / self.row_folder(row)
        shutil.copytree(self.root / "gates/rows/example", folder, ignore=shutil.ignore_patterns("__pycache__"))
        (folder / "gate.yaml").write_text(self.read().replace("row: EXAMPLE-ROW", f"row: {row}"), encoding="utf-8")

    # reports ----------------------------------------------------------------------------------------
    @staticmethod
    def row(report: dict[str, Any], row: str = "EXAMPLE-ROW") -> dict[str, Any]:
        return next(r for r in report["rows"] if r["row"] == row)

    @classmethod
    def gate(cls, report: dict[str, Any], gate: str = "page-bytes", row: str = "EXAMPLE-ROW") -> dict[str, Any]:
        return next(g for g in cls.row(report, row)["gates"] if g["gate"] == gate)

    # front doors ------------------------------------------------------------------------------------
    def gates(self, *args: str) -> CliResult:
        """`gates --root <copy> ARGS...` in this process."""
        from _vllm_gates.frontends import cli

        saved_path, saved_addopts = list(sys.path), os.environ.get("PYTEST_ADDOPTS")
        # the nested pytest.main would gc.collect() five times on exit (unraisable-exception plugin): ~1 s with torch loaded
        os.environ["PYTEST_ADDOPTS"] = f"{saved_addopts or ''} -p no:unraisableexception".strip()
        out, err = io.StringIO(), io.StringIO()
        try:
            with project_modules(self.root), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(["--root", str(self.root), *args])
        finally:
            sys.path[:] = saved_path
            if saved_addopts is None:
                os.environ.pop("PYTEST_ADDOPTS", None)
            else:
                os.environ["PYTEST_ADDOPTS"] = saved_addopts
        return CliResult(code, out.getvalue(), err.getvalue())

    def run_json(self, *args: str, name: str = "run.json") -> tuple[CliResult, dict[str, Any]]:
        """`gates run --json F ARGS...`; return the result and the parsed report."""
        target = self.root / "out" / name
        result = self.gates("run", "--json", str(target), *args)
        return result, json.loads(target.read_text(encoding="utf-8"))

    def pytest(self, *args: str) -> pytest.RunResult:
        """pytest ARGS... in this process, from the copy's root (its pyproject.toml)."""
        with project_modules(self.root):
            return self._pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)

    def outcomes(self, *args: str) -> dict[str, str]:
        """pytest ARGS... in this process; {node id: passed|failed|skipped} of every item that ran."""
        with project_modules(self.root):
            recorder = self._pytester.inline_run("-p", "no:cacheprovider", *args)
        passed, skipped, failed = recorder.listoutcomes()
        found = {r.nodeid: "passed" for r in passed}
        found.update({r.nodeid: "skipped" for r in skipped})
        found.update({r.nodeid: "failed" for r in failed})
        return found


def _copy_example(target: Path) -> None:
    for name in COPIED:
        source = EXAMPLE / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        else:
            shutil.copy(source, target / name)


@pytest.fixture(scope="session", autouse=True)
def _warm_imports(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run the example once (green, then failing) before any test.

    pytester restores sys.modules after each test, so whatever a first run imports lazily (hypothesis's engine and
    shrinker, pytest's junitxml, ...) would otherwise be imported again in every test: seconds each.
    """
    root = tmp_path_factory.mktemp("warm")
    _copy_example(root)
    warm = Example(root, None)  # type: ignore[arg-type]
    warm.gates("run", "--json", str(root / "r.json"), "--markdown", str(root / "r.md"), "--junit", str(root / "r.xml"))
    warm.gates("audit")
    warm.edit("    return 2 * block_size", "    return (1 if heads == 4 else 0) + 2 * block_size", "example_row/impl.py")
    warm.gates("run", "--profile", "ci")


@pytest.fixture
def example(pytester: pytest.Pytester) -> Example:
    """A fresh copy of tests/example_project in pytester's tmp dir (the current directory)."""
    _copy_example(pytester.path)
    drop_project_modules(pytester.path)
    return Example(pytester.path, pytester)


@pytest.fixture
def no_cuda() -> None:
    """For tests that assert what happens on a machine without a CUDA device."""
    if torch.cuda.is_available():
        pytest.skip("asserts the behaviour of a machine without CUDA")
