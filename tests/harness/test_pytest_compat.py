"""pytest_compat.py and the pytest11 entry work on the oldest pytest the project supports and on the installed one
(issue 27 item 4). The old pytest is pip-installed into a scratch folder that shadows the installed one on sys.path;
where pip cannot install it (no registry reachable), that leg is skipped and says so."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
PYPROJECT = HERE.parents[1] / "pyproject.toml"


def oldest_supported() -> str:
    """The lowest pytest the engine declares it supports (`pytest>=X` in pyproject.toml's dependencies)."""
    found = re.findall(r'"pytest>=([0-9.]+)"', PYPROJECT.read_text(encoding="utf-8"))
    assert len(found) == 1, f"one pytest>= requirement expected in {PYPROJECT}, found {found}"
    return found[0]


@pytest.fixture(scope="module")
def old_pytest(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("old-pytest")
    version = oldest_supported()
    try:
        installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                    "--no-warn-conflicts", "--no-compile", "--target", str(target), f"pytest=={version}"],
                                   capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip could not install pytest=={version} within 120 s")
    if installed.returncode != 0:
        last = (installed.stderr.strip().splitlines() or ["(nothing printed)"])[-1]
        pytest.skip(f"pip could not install pytest=={version} (no registry reachable?): {last}")
    return target


def _probe(tmp_path: Path, first_on_path: Path | None) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "GATES_"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([*([str(first_on_path)] if first_on_path else []), str(SRC)])
    ran = subprocess.run([sys.executable, str(HERE / "pytest_compat_probe.py"), str(tmp_path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return json.loads(ran.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("which", ["oldest", "installed"])
def test_compat_functions_and_entry_on_oldest_and_installed_pytest(tmp_path, request, which):
    first = request.getfixturevalue("old_pytest") if which == "oldest" else None
    found = _probe(tmp_path, first)
    if which == "oldest":
        assert Version(found["pytest"]) == Version(oldest_supported()) and found["pytest_file"].startswith(str(first)), found
    else:
        assert found["pytest"] == pytest.__version__, found
    assert found["markers"] == {"gpu and not dist": [False, True, False],
                                "(cpu or gpu) and not upstream": [True, False, False],
                                "not cpu": [True, False]}
    junit = found["junit"]
    assert junit["with"] == {"exit": 0, "writer_found": True} and junit["without"] == {"exit": 0, "writer_found": False}
    assert 'name="test_one"' in junit["xml"] and 'name="probe"' in junit["xml"] and "claim not met" in junit["xml"], junit["xml"]
    # the second of three runs fails: each run really runs the test again, and reports setup, call and teardown
    assert found["run_again"] == {"test_counts": [["passed"] * 3, ["passed", "failed", "passed"], ["passed"] * 3]}
    assert found["entry"] == {"unrelated": {"exit": 5, "refused": False, "engine": False},
                              "configured": {"exit": 4, "refused": True, "engine": True}}


def test_only_the_compat_module_imports_pytest_private_modules():
    """`_pytest.*` is reached through pytest_compat.py alone, where each use is one function tested on old pytest."""
    found = []
    for path in sorted((SRC / "_vllm_gates").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}: {name}" for name in names if name.split(".")[0] == "_pytest"]
    assert found and all(entry.startswith("pytest_compat.py:") for entry in found), found
