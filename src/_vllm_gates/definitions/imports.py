"""The one scanner of Python imports, used by independence contracts and by a gate's inputs
(one reading, so the two never disagree).

It reads a parsed module and names every module it imports, as an absolute dotted name: `import a.b`, `from a
import b` (as `a` and `a.b`: b may be a submodule), relative imports resolved against the module's package,
imports anywhere in the file (in functions, under `if TYPE_CHECKING:`), and `importlib.import_module("...")` /
`__import__("...")` with a string literal. Each import says whether it is such a call and whether it climbs above
the top-level package, so a caller can leave those out.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__"})


@dataclass(frozen=True)
class Import:
    """One module imported on ``line``; ``dynamic``: named in an import call; ``climbs``: a relative import that
    climbs above the top-level package (resolved to a top-level name)."""

    line: int
    name: str
    dynamic: bool = False
    climbs: bool = False


def module_of(root: Path, path: Path) -> tuple[str, bool]:
    """The dotted module name of a file under root, and whether it is a package (__init__.py)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _keep(module: str, is_package: bool, level: int) -> tuple[list[str], int]:
    """The package parts of ``module`` and how many of them `level` dots keep (negative: climbed above the top)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    package = [part for part in package if part]
    return package, len(package) - (level - 1)


def absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Resolve `from <level dots><name>` written in `module`; climbing above the top level leaves a top-level name."""
    if level == 0:
        return name or ""
    package, keep = _keep(module, is_package, level)
    base = package[:keep] if keep > 0 else []
    return ".".join(base + ([name] if name else []))


def climbs(module: str, is_package: bool, level: int, name: str | None) -> bool:
    """Whether `from <level dots><name>` written in `module` climbs above the top-level package."""
    if level == 0:
        return False
    _, keep = _keep(module, is_package, level)
    return keep < 0 or (keep == 0 and not name)


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _from_import(node: ast.ImportFrom, module: str, is_package: bool) -> list[Import]:
    """`from m import a, b`: m and m.a, m.b (`*` names nothing more)."""
    target = absolute(module, is_package, node.level, node.module)
    climbed = climbs(module, is_package, node.level, node.module)
    found = [Import(node.lineno, target, climbs=climbed)] if target else []
    found += [Import(node.lineno, f"{target}.{alias.name}" if target else alias.name, climbs=climbed)
              for alias in node.names if alias.name != "*"]
    return found


def _import_call(node: ast.Call, module: str, is_package: bool) -> Import | None:
    """`import_module("m")`, `import_module(".m", "pkg")`, `__import__("m")`: the module named by a literal."""
    func = node.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    name = _string(node.args[0]) if node.args else _string(next((k.value for k in node.keywords if k.arg == "name"), None))
    if called not in DYNAMIC_IMPORTERS or not name:
        return None
    if not name.startswith("."):
        return Import(node.lineno, name, dynamic=True)
    level, rest = len(name) - len(name.lstrip(".")), name.lstrip(".") or None
    anchor = _string(next((k.value for k in node.keywords if k.arg == "package"), None))
    if anchor is None and len(node.args) > 1:
        anchor = _string(node.args[1])
    where, package = (anchor, True) if anchor else (module, is_package)
    return Import(node.lineno, absolute(where, package, level, rest), dynamic=True, climbs=climbs(where, package, level, rest))


def imports_in(tree: ast.AST, module: str, is_package: bool) -> list[Import]:
    """Every module ``tree`` (the code of ``module``) imports, in the order ast.walk meets them."""
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found += _from_import(node, module, is_package)
        elif isinstance(node, ast.Call):
            call = _import_call(node, module, is_package)
            if call is not None:
                found.append(call)
    return found
