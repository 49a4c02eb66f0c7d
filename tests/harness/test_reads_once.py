"""One snapshot of the project per run (issue 27 item 2): a run reads pyproject.toml and the roadmap once each,
through the `gates` command (which hands its snapshot to the pytest run it starts) and through plain pytest; under
`pytest -n 2` the controller reads each once and so does each worker (a separate process), none more.

Every open in every process of the run is counted (read_counter/sitecustomize.py), not calls of one reader: a
second reader added anywhere in the engine raises the count. Before the snapshot, `gates run` read pyproject.toml
five times and the roadmap twice.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = pytest.mark.cpu

COUNTER = Path(__file__).resolve().parent / "read_counter"


def _watched(root: Path) -> list[str]:
    return [str(root / "pyproject.toml"), str(root / "spec" / "roadmap.yaml")]


def _counts(log: Path) -> Counter[tuple[str, str]]:
    """The opens a log holds, by (process, file name): `main:PID` for a process that is no xdist worker."""
    lines = log.read_text(encoding="utf-8").split() if log.exists() else []
    found: Counter[tuple[str, str]] = Counter()
    for pid, process, name in zip(lines[::3], lines[1::3], lines[2::3]):
        found[(process if process != "main" else f"main:{pid}", name)] += 1
    return found


@contextlib.contextmanager
def _counting_here(root: Path) -> Iterator[Path]:
    """Count the engine's opens of the watched files in this process; yields the log."""
    spec = importlib.util.spec_from_file_location("read_counter", COUNTER / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    counter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(counter)
    log = root / "out" / "reads.log"
    log.parent.mkdir(exist_ok=True)
    log.unlink(missing_ok=True)
    counter.start(_watched(root), str(log))
    try:
        yield log
    finally:
        counter.stop()


def _reads_in_subprocess(root: Path, *command: str) -> Counter[tuple[str, str]]:
    """Run ``command`` in ``root`` (its xdist workers too, each a process); the engine's opens, by process and file."""
    log = root / "out" / "reads.log"
    log.parent.mkdir(exist_ok=True)
    outer = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}  # when this test is an xdist worker
    env = {**outer, "CI": "1", "VLLM_GATES_COUNT_LOG": str(log), "VLLM_GATES_COUNT_FILES": os.pathsep.join(_watched(root)),
           "PYTHONPATH": os.pathsep.join([str(COUNTER), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, *command], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return _counts(log)


def _one_process(found: Counter[tuple[str, str]]) -> dict[str, int]:
    """The reads of the one process a run in this process made (named `main:PID`, or `gwN` when this test itself runs
    in an xdist worker); a second process is a failure."""
    table = _per_process(found)
    assert len(table) == 1, table
    return next(iter(table.values()))


def _per_process(found: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for (process, name), count in found.items():
        table.setdefault(process, {})[name] = count
    return table


def test_gates_run_reads_the_configuration_and_the_roadmap_once(example):
    with _counting_here(example.root) as log:
        assert example.gates("run", "--json", str(example.root / "out" / "first.json")).code == 0
    assert _one_process(_counts(log)) == {"pyproject.toml": 1, "roadmap.yaml": 1}
    # --changed-since and --evidence are resolved once, by the command, and handed to its pytest run
    subprocess.run(["git", "init", "-q"], cwd=example.root, check=True)
    subprocess.run(["git", "add", "example_row", "gates", "spec", "pyproject.toml"], cwd=example.root, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base"], cwd=example.root, check=True)
    example.write("example_row/impl.py", example.read("example_row/impl.py") + "# changed\n")
    with _counting_here(example.root) as log:
        result = example.gates("run", "--changed-since", "HEAD", "--evidence", str(example.root / "out" / "first.json"),
                               "--json", str(example.root / "out" / "run.json"))
    assert result.code == 0, result.text
    assert _one_process(_counts(log)) == {"pyproject.toml": 1, "roadmap.yaml": 1}
    report = json.loads(example.read("out/run.json"))
    assert report["meta"]["changed_since"] == "HEAD" and example.row(report)["claim"]["claim_met"], report["meta"]


def test_plain_pytest_reads_the_configuration_and_the_roadmap_once(example):
    with _counting_here(example.root) as log:
        example.pytest().assert_outcomes(passed=7)
    assert _one_process(_counts(log)) == {"pyproject.toml": 1, "roadmap.yaml": 1}


def test_each_process_of_an_xdist_run_reads_them_once(example):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (pip install -e '.[test]')")
    found = _per_process(_reads_in_subprocess(example.root, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2"))
    once = {"pyproject.toml": 1, "roadmap.yaml": 1}
    assert sorted(found) == ["gw0", "gw1", next(p for p in found if p.startswith("main:"))], found
    assert all(reads == once for reads in found.values()), found  # the controller once; each worker once, to collect
