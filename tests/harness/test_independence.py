"""Independence of the implementation and the oracles, enforced by walking their imports with `ast`.

`impl` never imports `oracles` or `gates`; `oracles` never imports `impl` or `gates` (design.md, "The house").
Every import form counts: `import a.b`, `from a import b`, relative imports (`from . import x`, `from ..pkg import y`,
resolved against the file's package, including ones that climb above the top-level package), imports inside
functions or `if TYPE_CHECKING:`, and `importlib.import_module("...")` / `__import__("...")` with a string literal.
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = {"impl": frozenset({"oracles", "gates"}), "oracles": frozenset({"impl", "gates"})}
DYNAMIC_IMPORTERS = {"import_module", "__import__"}


@dataclass(frozen=True, order=True)
class Violation:
    path: str  # relative to the scanned root
    line: int
    imported: str  # the absolute module name the line imports

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported}"


def module_of(root: Path, path: Path) -> tuple[str, bool]:
    """The dotted module name of a file under root, and whether it is a package (__init__.py)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Resolve `from <level dots><name>` written in `module`; climbing above the top level leaves a top-level name."""
    if level == 0:
        return name or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    keep = len(package) - (level - 1)
    base = package[:keep] if keep > 0 else []
    return ".".join(base + ([name] if name else []))


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def imports_in(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module) for every module the tree imports; for `from m import a`, both m and m.a."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = absolute(module, is_package, node.level, node.module)
            if target:
                found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{alias.name}" if target else alias.name) for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            name = _string(node.args[0]) if node.args else _string(next((k.value for k in node.keywords if k.arg == "name"), None))
            if called not in DYNAMIC_IMPORTERS or not name:
                continue
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                anchor = _string(next((k.value for k in node.keywords if k.arg == "package"), None))
                if anchor is None and len(node.args) > 1:
                    anchor = _string(node.args[1])
                found.append((node.lineno, absolute(anchor, True, level, name.lstrip(".") or None) if anchor
                              else absolute(module, is_package, level, name.lstrip(".") or None)))
            else:
                found.append((node.lineno, name))
    return found


def violations(root: Path, packages: dict[str, frozenset[str]] = FORBIDDEN) -> tuple[list[Violation], int]:
    """Every forbidden import under root/<package> for each package; and how many files were read."""
    found: list[Violation] = []
    files = 0
    for package, forbidden in packages.items():
        for path in sorted((root / package).rglob("*.py")):
            files += 1
            module, is_package = module_of(root, path)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for line, imported in imports_in(tree, module, is_package):
                if imported.split(".")[0] in forbidden:
                    found.append(Violation(path.relative_to(root).as_posix(), line, imported))
    return sorted(set(found)), files


def test_impl_and_oracles_do_not_import_each_other_or_gates():
    found, files = violations(REPO)
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
    "impl/bad_from.py": "from gates.harness import api\n",
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
    found, files = violations(tmp_path)
    assert files == len(PLANTED)
    assert [str(v) for v in found] == [
        "impl/bad_absolute.py:1: imports oracles.kv_allocation",
        "impl/bad_dynamic.py:2: imports oracles.layout",
        "impl/bad_from.py:1: imports gates.harness",
        "impl/bad_from.py:1: imports gates.harness.api",
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
