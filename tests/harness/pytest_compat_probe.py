"""Runs the engine's pytest-facing pieces on whichever pytest is first on sys.path and prints what they did, one
JSON object (tests/harness/test_pytest_compat.py runs it on pytest 8.0.0 and on the installed pytest).

Usage: python pytest_compat_probe.py WORKDIR (with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1: only what it names loads)
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import pytest

from _vllm_gates.run.pytest_compat import junit_writer, marker_expression, run_again

EXPRESSIONS = {"gpu and not dist": [[], ["gpu"], ["gpu", "dist"]], "(cpu or gpu) and not upstream": [["cpu"], ["upstream", "cpu"], ["dist"]],
               "not cpu": [[], ["cpu"]]}


class JunitProbe:
    """Adds one failing test case to the session's JUnit XML, as session.py adds a claim, and notes whether it could."""

    def __init__(self) -> None:
        self.writer_found: bool | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        write = junit_writer(session.config)
        self.writer_found = write is not None
        if write is not None:
            for when, outcome in (("call", "failed"), ("teardown", "passed")):
                write(pytest.TestReport(nodeid="vllm-gates::probe", location=("vllm-gates", 0, "probe"), keywords={},
                                        outcome=outcome, longrepr="claim not met" if when == "call" else None, when=when,
                                        duration=0.0))


def _quiet_main(args: list[str], plugins: list[object]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = int(pytest.main(args, plugins=plugins))
    return code, out.getvalue()


def _junit(work: Path) -> dict[str, object]:
    project = work / "junit"
    project.mkdir()
    (project / "test_one.py").write_text("def test_one():\n    pass\n", encoding="utf-8")
    found = {}
    for name, extra in (("with", ["--junitxml", str(work / "out.xml")]), ("without", [])):
        probe = JunitProbe()
        code, _ = _quiet_main([str(project), "-q", "-p", "no:cacheprovider", *extra], [probe])
        found[name] = {"exit": code, "writer_found": probe.writer_found}
    found["xml"] = (work / "out.xml").read_text(encoding="utf-8")
    return found


def _entry(work: Path) -> dict[str, object]:
    """The entry registers the engine where the rootdir's pyproject.toml configures vllm-gates, and not elsewhere."""
    found = {}
    for name, pyproject in (("unrelated", "[tool.black]\n"), ("configured", "[tool.vllm-gates]\nroadmap = 3\n")):
        project = work / name
        project.mkdir()
        (project / "pyproject.toml").write_text(pyproject, encoding="utf-8")
        code, out = _quiet_main([str(project), "--rootdir", str(project), "-p", "_vllm_gates.frontends.pytest_entry", "-p", "no:cacheprovider"], [])
        found[name] = {"exit": code, "refused": "vllm-gates configuration" in out, "engine": "_vllm_gates.frontends.plugin" in sys.modules}
    return found


class RunAgainProbe:
    """Runs each collected item three times from its own run loop, as `gates mutate`'s session does, noting outcomes."""

    def __init__(self) -> None:
        self.outcomes: dict[str, list[list[str]]] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        for item in session.items:
            self.outcomes[item.name] = [[r.outcome for r in run_again(item)] for _ in range(3)]
        return True


def _run_again(work: Path) -> dict[str, object]:
    project = work / "again"
    project.mkdir()
    (project / "test_again.py").write_text("calls = []\n\ndef test_counts():\n    calls.append(1)\n"
                                           "    assert len(calls) != 2\n", encoding="utf-8")
    probe = RunAgainProbe()
    _quiet_main([str(project), "-q", "-p", "no:cacheprovider"], [probe])
    return probe.outcomes


def main(work: Path) -> None:
    markers = {text: [marker_expression(text)(set(names)) for names in cases] for text, cases in EXPRESSIONS.items()}
    result = {"pytest": pytest.__version__, "pytest_file": pytest.__file__, "markers": markers, "junit": _junit(work),
              "entry": _entry(work),
              "run_again": _run_again(work)}
    print(json.dumps(result))


if __name__ == "__main__":
    assert os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"), "run with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"
    main(Path(sys.argv[1]))
