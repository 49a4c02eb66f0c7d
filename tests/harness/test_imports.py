"""The one import scanner (issue 27 item 3): every form independence contracts count, and the subset a gate's inputs
follow (no import calls with a string, no relative import above the top package)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from _vllm_gates.definitions.imports import Import, imports_in
from _vllm_gates.definitions.sources import ModuleFile, _imported_names

FORMS = {
    "import a.b, c": [Import(1, "a.b"), Import(1, "c")],
    "from a import b": [Import(1, "a"), Import(1, "a.b")],  # b may be a submodule
    "from star import *": [Import(1, "star")],
    "from . import sibling": [Import(1, "pkg"), Import(1, "pkg.sibling")],
    "from ..top import x": [Import(1, "top"), Import(1, "top.x")],
    "def f():\n    if TYPE_CHECKING:\n        import late": [Import(3, "late")],
    "try:\n    import fast\nexcept ImportError:\n    import slow": [Import(2, "fast"), Import(4, "slow")],
    "importlib.import_module('dyn.mod')": [Import(1, "dyn.mod", dynamic=True)],
    "__import__(name='dyn')": [Import(1, "dyn", dynamic=True)],
    "import_module('.rel', 'anchor.pkg')": [Import(1, "anchor.pkg.rel", dynamic=True)],
    "import_module('.rel')": [Import(1, "pkg.rel", dynamic=True)],
    "import_module(name)": [],  # not a literal: cannot be known
    "from ...above import x": [Import(1, "above", climbs=True), Import(1, "above.x", climbs=True)],
    "from ... import x": [Import(1, "x", climbs=True)],
}


@pytest.mark.parametrize("code", FORMS)
def test_every_import_form_is_found(code):
    assert imports_in(ast.parse(code), "pkg.mod", False) == FORMS[code]


def test_a_package_init_resolves_relative_imports_against_itself():
    assert imports_in(ast.parse("from .sub import x"), "pkg", True) == [Import(1, "pkg.sub"), Import(1, "pkg.sub.x")]


def test_a_relative_import_in_a_top_level_module_climbs():
    assert imports_in(ast.parse("from . import x"), "mod", False) == [Import(1, "x", climbs=True)]
    assert imports_in(ast.parse("from .y import x"), "mod", False) == [Import(1, "y"), Import(1, "y.x")]


def test_a_gates_inputs_follow_static_imports_inside_the_top_package(tmp_path: Path):
    path = tmp_path / "mod.py"
    path.write_text("\n".join(FORMS))
    assert _imported_names(ModuleFile("pkg.mod", path, False)) == {
        "a.b", "c", "a", "star", "pkg", "pkg.sibling", "top", "top.x", "late", "fast", "slow"}
