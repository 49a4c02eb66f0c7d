"""A target's ImportError read as a package not installed here (a skip) or the project's own module (an error)."""
from __future__ import annotations

from pathlib import Path

import pytest

from _vllm_gates.base.errors import DefinitionError, Location, Problem
from _vllm_gates.definitions.import_failures import missing_package, not_installed

pytestmark = pytest.mark.cpu


def refusal(message: str) -> DefinitionError:
    return DefinitionError([Problem(Location("--against", 1, 1), "reference m:taps", message)])


def test_an_import_error_names_a_missing_package_unless_the_module_is_the_projects(tmp_path: Path) -> None:
    (tmp_path / "row_pkg").mkdir()
    (tmp_path / "helper.py").write_text("")
    path = [str(tmp_path)]
    assert missing_package("ModuleNotFoundError", "No module named 'vllm.attention'", path) == \
        "ModuleNotFoundError: No module named 'vllm.attention'"
    assert missing_package("ImportError", "cannot import name 'Qwen3' from 'transformers' (x.py)", path) is not None
    assert missing_package("ImportError", "transformers is not installed (pip install -e '.[hf]')", path) == \
        "ImportError: transformers is not installed (pip install -e '.[hf]')"
    assert missing_package("ModuleNotFoundError", "No module named 'row_pkg.gone'", path) is None
    assert missing_package("ImportError", "cannot import name 'f' from 'helper' (helper.py)", path) is None
    assert missing_package("ValueError", "No module named 'vllm'", path) is None


def test_a_refused_import_is_not_installed_only_where_every_problem_says_so(tmp_path: Path) -> None:
    path = [str(tmp_path)]
    absent = ("cannot import module 'row.ref' for target 'row.ref:taps': ModuleNotFoundError: No module named "
              "'transformers'")
    assert not_installed(refusal(absent), path) == "ModuleNotFoundError: No module named 'transformers'"
    assert not_installed(refusal("target 'row.ref:taps': 'row.ref' has no attribute 'taps'"), path) is None
    syntax = "cannot import module 'row.ref' for target 'row.ref:taps': SyntaxError: invalid syntax (ref.py, line 3)"
    assert not_installed(refusal(syntax), path) is None
    both = DefinitionError([*refusal(absent).problems, *refusal("target 'x:y' is not callable").problems])
    assert not_installed(both, path) is None
