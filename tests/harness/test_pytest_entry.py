"""The `pytest11` entry is inert where the project does not configure vllm-gates, and engages the engine where it
does (issue 27 item 4): the engine's modules stay out of unrelated pytest sessions."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.base.tomlsource import SECTION
from _vllm_gates.base.tomlsource import TOOL_KEY as ENGINE_TOOL_KEY
from _vllm_gates.definitions.config import load_config
from _vllm_gates.frontends.pytest_entry import ENGINE_READ_LIMIT, TOOL_KEY, engine_wanted

SRC = Path(__file__).resolve().parents[2] / "src"
SPY = '''import sys

def pytest_sessionfinish(session):
    names = sorted(m for m in sys.modules if m.split(".")[0] in ("_vllm_gates", "vllm_gates"))
    print("\\nENGINE-MODULES " + " ".join(names))
'''
BROKEN = '[tool.vllm-gates]\nroadmap = 3\n'  # the engine refuses it: a usage error proves the engine was loaded


def _pytest(project: Path, *args: str, autoload: bool = True) -> subprocess.CompletedProcess[str]:
    """pytest in ``project`` (no conftest of this repository above it), with a plugin that lists the engine's modules."""
    spy = project.parent / "spy"
    spy.mkdir(exist_ok=True)
    (spy / "gates_spy.py").write_text(SPY, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "GATES_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(spy), str(SRC)])
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "gates_spy", "-s", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=120)


def _engine_modules(ran: subprocess.CompletedProcess[str]) -> list[str]:
    lines = [line for line in ran.stdout.splitlines() if line.startswith("ENGINE-MODULES")]
    assert len(lines) == 1, ran.stdout + ran.stderr
    return lines[0].split()[1:]


def test_the_entry_names_the_table_as_the_engine_does():
    """The entry keeps its own copy of the table's key (it imports no other engine module): the two must agree."""
    assert ENGINE_TOOL_KEY == TOOL_KEY and SECTION == f"tool.{TOOL_KEY}"


def test_an_unrelated_project_imports_the_entry_alone(tmp_path):
    project = tmp_path / "unrelated"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.other]\nvllm-gates = "not this table"\n', encoding="utf-8")
    (project / "test_one.py").write_text("def test_one():\n    pass\n", encoding="utf-8")
    ran = _pytest(project)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    from _vllm_gates.run.features import FEATURES

    # the entry, and the feature host with the features' modules for their options: none of the engine besides
    assert _engine_modules(ran) == sorted(["_vllm_gates", "_vllm_gates.frontends", "_vllm_gates.frontends.pytest_entry", "_vllm_gates.run",
                                          "_vllm_gates.run.features", *FEATURES])


@pytest.mark.parametrize("how, args, loaded", [
    ("entry point", (), True),
    ("entry point blocked", ("-p", "no:vllm_gates"), False),
    ("a conftest's pytest_plugins, autoload off", (), True),
])
def test_a_configured_project_engages_the_engine(tmp_path, how, args, loaded):
    project = tmp_path / "gated"
    project.mkdir()
    (project / "pyproject.toml").write_text(BROKEN, encoding="utf-8")
    autoload = "autoload off" not in how
    if not autoload:  # registered after the initial conftests' hook: the entry decides at pytest_configure
        (project / "conftest.py").write_text('pytest_plugins = ["_vllm_gates.frontends.pytest_entry"]\n', encoding="utf-8")
    ran = _pytest(project, *args, autoload=autoload)
    refused = "vllm-gates configuration" in ran.stdout + ran.stderr
    assert (ran.returncode == pytest.ExitCode.USAGE_ERROR and refused) is loaded, ran.stdout + ran.stderr
    if not loaded:
        assert ran.returncode == pytest.ExitCode.NO_TESTS_COLLECTED and "_vllm_gates.frontends.plugin" not in _engine_modules(ran)


def _pyprojects() -> dict[str, bytes | None]:
    limit_filler = b"#" * (ENGINE_READ_LIMIT + 1) + b"\n"  # a comment: valid TOML without the table, over the limit
    return {
        "none": None,
        "no table": b'[tool.black]\nline-length = 100\n',
        "the table": b'[tool.vllm-gates]\n',
        "a dotted key": b'tool.vllm-gates.roadmap = "spec/roadmap.yaml"\n',
        "a quoted key": b'[tool."vllm-gates"]\n',
        "tool not a table": b'tool = 3\n',
        "the table not a table": b'[tool]\nvllm-gates = 3\n',
        "malformed TOML": b'[tool.black\n',
        "not UTF-8": b'[tool.black]\nname = "\xff"\n',
        "over the limit": limit_filler,
    }


@pytest.mark.parametrize("case", sorted(_pyprojects()))
def test_the_entry_engages_exactly_where_the_engine_would_act(tmp_path, case):
    """Inert means: the engine, had it loaded, would have found no configuration (not an error either)."""
    content = _pyprojects()[case]
    if content is not None:
        (tmp_path / "pyproject.toml").write_bytes(content)
    try:
        engine_acts = load_config(tmp_path) is not None
    except DefinitionError:
        engine_acts = True
    assert engine_wanted(tmp_path) is engine_acts


def test_a_folder_named_pyproject_is_no_configuration(tmp_path):
    (tmp_path / "pyproject.toml").mkdir()
    assert engine_wanted(tmp_path) is False and load_config(tmp_path) is None

