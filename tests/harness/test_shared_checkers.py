"""Collection resolves every gate file's targets in one shared checker per role, not three workers per file, and a
run ends each file's workers after its last item (issue 15: collection near plain pytest; hundreds of rows).

Another row's code in the shared checker cannot change a verdict or a listing: a problem it reports is checked again
in the file's own worker, and in a run each worker checks its file's targets itself before any call. Each test
builds a project of three rows whose subject modules log the process that imports them (and which of the processes
logged before are still alive), and runs pytest in a fresh process.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.conftest import engine_env, log_beside

pytestmark = pytest.mark.cpu

ROWS = 3
PYPROJECT = """[tool.vllm-gates]
roadmap = "spec/roadmap.yaml"
rows = ["gates/rows/*/gate.yaml"]
specs = ["spec/*.md"]
allowed-roots = ["pkg", "gates"]

[tool.pytest.ini_options]
pythonpath = ["."]
"""
GATE = """row: R-{i}
title: row {i}
spec: spec/s.md
gates:
  - id: g
    milestone: M1
    covers: [S-1.1]
    markers: [cpu]
    impl: pkg.row{i}:{impl}
    cases:
      c0: {{input: {{n: 1}}, expect: 2}}
    known_bad:
      plus-one: pkg.row{i}:{known}
"""
MODULE = """import os
_log = {log!r}


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_before = sorted({{int(line.split()[0]) for line in open(_log)}}) if os.path.exists(_log) else []
with open(_log, "a") as log:
    log.write(f"{{os.getpid()}} row{i} " + ",".join(str(p) for p in _before if p != os.getpid() and _alive(p)) + "\\n")
{extra}
def page(n):
    return 2 * n


def page_plus_one(n):
    return 2 * n + 1


def page_any(*args, **kwargs):
    return -1
"""


def _project(root: Path, extra: dict[int, str] | None = None, impl: dict[int, str] | None = None,
             known: dict[int, str] | None = None) -> Path:
    """Three rows R-0..R-2; ``extra``: code run when row i's module is imported; ``impl``, ``known``: row i's impl
    and known-bad names."""
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "spec").mkdir()
    (root / "spec" / "s.md").write_text("# S\n\n- **S-1.1** pages are counted\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "gates" / "rows").mkdir(parents=True)
    for folder in (root / "gates", root / "gates" / "rows"):
        (folder / "__init__.py").write_text("")
    roadmap = ["rows:"]
    for i in range(ROWS):
        roadmap += [f"  R-{i}:", f"    title: row {i}", "    state: DONE", "    milestones:", "      M1: {title: pages, state: DONE}"]
        folder = root / "gates" / "rows" / f"r{i}"
        folder.mkdir()
        (folder / "__init__.py").write_text("")
        (folder / "gate.yaml").write_text(GATE.format(i=i, impl=(impl or {}).get(i, "page"),
                                                      known=(known or {}).get(i, "page_plus_one")))
        (root / "pkg" / f"row{i}.py").write_text(MODULE.format(i=i, extra=(extra or {}).get(i, ""), log=str(_log(root))))
    (root / "spec" / "roadmap.yaml").write_text("\n".join(roadmap) + "\n")
    return root


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = engine_env()
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def _log(root: Path) -> Path:
    """Where the rows' modules log their imports: beside the project, where the impl's confined workers may write."""
    return log_beside(root, "imports.log")


def _imports(root: Path) -> list[tuple[str, str, set[str]]]:
    """Each import of a row's module: (pid, row, the pids logged before that were still alive then)."""
    found = []
    for line in _log(root).read_text().splitlines():
        pid, row, *alive = line.split()
        found.append((pid, row, set(alive[0].split(",")) if alive else set()))
    return found


def _importers(root: Path) -> dict[str, set[str]]:
    """The processes that imported each row's module: {pid: rows}."""
    found: dict[str, set[str]] = {}
    for pid, row, _ in _imports(root):
        found.setdefault(pid, set()).add(row)
    return found


def _listed(result: subprocess.CompletedProcess[str]) -> set[str]:
    return {line for line in result.stdout.splitlines() if line.startswith("gates/rows/")}


EVERY_ITEM = {f"gates/rows/r{i}/gate.yaml::g::{name}" for i in range(ROWS) for name in ("c0", "known_bad[plus-one]", "audit")}


def test_a_listing_resolves_every_file_in_one_checker_per_role_and_a_run_in_each_files_own(tmp_path):
    root = _project(tmp_path)
    listed = _pytest(root, "--collect-only")
    assert _listed(listed) == EVERY_ITEM, listed.stdout + listed.stderr
    importers = _importers(root)
    assert len(importers) == 2, importers  # the impl checker and the known-bad checker
    assert all(rows == {"row0", "row1", "row2"} for rows in importers.values()), importers
    _log(root).unlink()
    ran = _pytest(root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    importers = _importers(root)  # the two shared checkers, then each file's own impl and known-bad worker
    assert sorted(len(rows) for rows in importers.values()) == [1] * (2 * ROWS) + [ROWS, ROWS], importers


def test_a_row_that_breaks_the_shared_checker_cannot_break_another_rows_listing(tmp_path):
    poison = ("import importlib\n_real = importlib.import_module\n"
              "def _refuse(name, *args, **kwargs):\n"
              "    if name.startswith('pkg.row') and name != 'pkg.row0':\n"
              "        raise ImportError('poisoned by row 0')\n"
              "    return _real(name, *args, **kwargs)\n"
              "importlib.import_module = _refuse\n")
    root = _project(tmp_path, extra={0: poison})
    listed = _pytest(root, "--collect-only")
    assert _listed(listed) == EVERY_ITEM, listed.stdout + listed.stderr
    assert "poisoned" not in listed.stdout


def test_a_row_that_ends_the_shared_checker_is_refused_alone(tmp_path):
    root = _project(tmp_path, extra={0: "os._exit(3)\n"})
    listed = _pytest(root, "--collect-only")
    names = _listed(listed)
    assert "gates/rows/r0/gate.yaml::definition[g]" in names, listed.stdout
    assert EVERY_ITEM - names == {f"gates/rows/r0/gate.yaml::g::{n}" for n in ("c0", "known_bad[plus-one]", "audit")}
    ran = _pytest(root)  # a listing shows no problem's text; the run's collection words the same refusal
    assert "exited with status 3" in ran.stdout, ran.stdout


def test_a_target_that_does_not_resolve_is_listed_as_a_definition_error_as_a_run_collects_it(tmp_path):
    root = _project(tmp_path, impl={2: "no_such_page"})
    listed, ran = _pytest(root, "--collect-only"), _pytest(root)
    assert "gates/rows/r2/gate.yaml::definition[g]" in _listed(listed), listed.stdout
    assert "'pkg.row2' has no attribute 'no_such_page'" in ran.stdout, ran.stdout
    assert ran.returncode != 0


def test_a_run_ends_each_files_workers_after_its_last_item(tmp_path):
    root = _project(tmp_path)
    ran = _pytest(root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    importers = _importers(root)
    shared = {pid for pid, rows in importers.items() if len(rows) == ROWS}
    own = {f"row{i}": {pid for pid, rows in importers.items() if rows == {f"row{i}"}} for i in range(ROWS)}
    assert len(shared) == 2 and all(len(pids) == 2 for pids in own.values()), importers
    for pid, row, alive in _imports(root):
        if pid in own["row2"]:  # row 0's workers and the shared checkers have ended by the time row 2's start
            assert not alive & (shared | own["row0"]), (pid, alive, importers)


def test_a_target_the_shared_checker_passed_for_another_rows_patch_is_refused_by_the_files_own_worker(tmp_path):
    """Row 0's module, imported first in the shared checker, makes row 1's known-bad look as if it took the impl's
    parameters; row 1's own known-bad worker, where row 0 never ran, refuses it before any call: ERROR, not PASS."""
    patch = ("import inspect\nimport pkg.row1\n"
             "pkg.row1.page_any.__signature__ = inspect.signature(pkg.row1.page)\n")
    root = _project(tmp_path, extra={0: patch}, known={1: "page_any"})
    listed = _pytest(root, "--collect-only")
    assert _listed(listed) == EVERY_ITEM, listed.stdout  # the listing took the shared checker's word
    ran = _pytest(root)
    assert ran.returncode != 0
    verdicts = {line.split()[0]: line.split()[-2] for line in ran.stdout.splitlines() if line.startswith("R-") and "  g  " in line}
    assert verdicts == {"R-0": "PASS", "R-1": "ERROR", "R-2": "PASS"}, ran.stdout
    assert ("R-1::g: ERROR: definition error: gates/rows/r1/gate.yaml:13:7: known-bad plus-one pkg.row1:page_any: worker known-bad of "
            "gates/rows/r1/gate.yaml refused the gate file's targets, which the shared checker had resolved: "
            "'pkg.row1:page_any' takes (args, kwargs) but the impl 'pkg.row1:page' takes (n)") in ran.stdout, ran.stdout
