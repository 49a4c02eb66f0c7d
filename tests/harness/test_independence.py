"""Independence of the implementation and the oracles: `gates check-independence` and the import walker behind it."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.imports import absolute
from _vllm_gates.definitions.independence import violations

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = {"impl": ("oracles", "gates", "upstream", "vllm"), "oracles": ("impl", "gates", "upstream", "vllm"),
             "upstream": ("impl", "oracles", "gates")}  # upstream/ alone imports vllm, and never our code


def test_the_repository_declares_the_two_contracts():
    config = load_config(REPO)
    assert config is not None and dict(config.independence) == FORBIDDEN


def test_impl_and_oracles_do_not_import_each_other_or_gates():
    found, files = violations(REPO, FORBIDDEN)
    assert files >= 10, f"only {files} files under {REPO}/impl and {REPO}/oracles: wrong root?"
    assert not found, "independence broken:\n" + "\n".join(str(v) for v in found)


PLANTED = {
    "impl/__init__.py": "",
    "impl/helpers.py": "",
    "impl/ok.py": '''
        """Mentions oracles and gates in prose only."""
        import os
        import impl_extras
        from . import helpers
        from .v1 import deep
        from impl.v1 import deep as again
        NAME = "oracles.kv_allocation"
        print(NAME.import_module)
        ''',
    "impl/bad_absolute.py": "import oracles.kv_allocation as allocation\n",
    "impl/bad_from.py": "from gates.rows import helpers\n",
    "impl/bad_dynamic.py": 'import importlib\nlayout = importlib.import_module("oracles.layout")\n',
    "impl/bad_in_function.py": "def later():\n    from oracles import kv_budget\n    return kv_budget\n",
    "impl/bad_type_checking.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gates\n",
    "impl/v1/__init__.py": "from . import deep\n",
    "impl/v1/deep.py": "from .. import gates as not_the_gates_package\nfrom ...oracles import kv\n",
    "oracles/__init__.py": "",
    "oracles/ok.py": "import torch\nfrom oracles.kv_allocation import allocated_bytes\nfrom . import layout\n",
    "oracles/bad_impl.py": "from impl.v1 import kv_cache_interface\n",
    "oracles/bad_dunder.py": '__import__("impl")\n',
    "oracles/bad_bare_import_module.py": 'from importlib import import_module\nimport_module("gates.inputs")\n',
    "oracles/bad_relative_dynamic.py": 'import importlib\nimportlib.import_module("..impl.v1", package="oracles")\n',
    "oracles/sub/__init__.py": "from .. import layout\nfrom ... import impl\n",
}


def test_the_checker_catches_planted_violations(tmp_path):
    for relative, text in PLANTED.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    found, files = violations(tmp_path, FORBIDDEN)
    assert files == len(PLANTED)
    assert [str(v) for v in found] == [
        "impl/bad_absolute.py:1: imports oracles.kv_allocation",
        "impl/bad_dynamic.py:2: imports oracles.layout",
        "impl/bad_from.py:1: imports gates.rows",
        "impl/bad_from.py:1: imports gates.rows.helpers",
        "impl/bad_in_function.py:2: imports oracles",
        "impl/bad_in_function.py:2: imports oracles.kv_budget",
        "impl/bad_type_checking.py:3: imports gates",
        "impl/v1/deep.py:2: imports oracles",
        "impl/v1/deep.py:2: imports oracles.kv",
        "oracles/bad_bare_import_module.py:2: imports gates.inputs",
        "oracles/bad_dunder.py:1: imports impl",
        "oracles/bad_impl.py:1: imports impl.v1",
        "oracles/bad_impl.py:1: imports impl.v1.kv_cache_interface",
        "oracles/bad_relative_dynamic.py:2: imports impl.v1",
        "oracles/sub/__init__.py:2: imports impl",
    ]


@pytest.mark.parametrize("module,is_package,level,name,expected", [
    ("impl.v1.deep", False, 1, None, "impl.v1"),
    ("impl.v1.deep", False, 2, "gates", "impl.gates"),
    ("impl.v1.deep", False, 3, "oracles", "oracles"),
    ("impl.v1", True, 1, "deep", "impl.v1.deep"),
    ("impl", True, 2, "gates", "gates"),
    ("impl.ok", False, 0, "os", "os"),
])
def test_relative_imports_resolve_against_the_package(module, is_package, level, name, expected):
    assert absolute(module, is_package, level, name) == expected


def test_gates_check_independence_passes_here_and_names_a_planted_violation(tmp_path):
    gates = [sys.executable, "-m", "_vllm_gates.frontends.cli"]
    done = subprocess.run([*gates, "--root", str(REPO), "check-independence"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 violation(s)" in done.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.vllm-gates]\n", encoding="utf-8")
    for relative, text in {"impl/__init__.py": "", "impl/bad.py": "\n\nfrom oracles import truth\n", "oracles/__init__.py": ""}.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    done = subprocess.run([*gates, "--root", str(tmp_path), "check-independence"], capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "impl/bad.py:3: imports oracles" in done.stdout and "2 violation(s) in 3 file(s)" in done.stdout
