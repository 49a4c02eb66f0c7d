"""`--collect-only` resolves every gate file's targets in one shared checker per role, not three workers per file
(issue 15: collection near plain pytest), and another row's code in that checker cannot change what is listed.

Each test builds a project of three rows whose subject modules log the process that imports them, and runs pytest in a
fresh process. Whatever the shared checker reports as a problem is checked again in the file's own worker.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
      plus-one: pkg.row{i}:page_plus_one
"""
MODULE = """import os
with open(os.path.join(os.path.dirname(__file__), "..", "imports.log"), "a") as log:
    log.write(f"{{os.getpid()}} row{i}\\n")
{extra}
def page(n):
    return 2 * n


def page_plus_one(n):
    return 2 * n + 1
"""


def _project(root: Path, extra: dict[int, str] | None = None, impl: dict[int, str] | None = None) -> Path:
    """Three rows R-0..R-2; ``extra``: code run when row i's module is imported; ``impl``: row i's impl name."""
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
        (folder / "gate.yaml").write_text(GATE.format(i=i, impl=(impl or {}).get(i, "page")))
        (root / "pkg" / f"row{i}.py").write_text(MODULE.format(i=i, extra=(extra or {}).get(i, "")))
    (root / "spec" / "roadmap.yaml").write_text("\n".join(roadmap) + "\n")
    return root


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def _importers(root: Path) -> dict[str, set[str]]:
    """The processes that imported each row's module: {pid: rows}."""
    found: dict[str, set[str]] = {}
    for line in (root / "imports.log").read_text().splitlines():
        pid, row = line.split()
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
    (root / "imports.log").unlink()
    ran = _pytest(root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    importers = _importers(root)
    assert len(importers) == 2 * ROWS and all(len(rows) == 1 for rows in importers.values()), importers


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
