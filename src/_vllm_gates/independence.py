"""Independence contracts (`[tool.vllm-gates] independence`): a package never imports the packages it must not.

By default `impl` imports neither `oracles` nor `gates`, and `oracles` neither `impl` nor `gates`. Every import
form counts: `import a.b`, `from a import b`, relative imports (resolved against the file's package, including
ones that climb above the top-level package), imports inside functions or `if TYPE_CHECKING:`, and
`importlib.import_module("...")` / `__import__("...")` with a string literal.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

DYNAMIC_IMPORTERS = {"import_module", "__import__"}


@dataclass(frozen=True, order=True)
class Violation:
    """One import that a contract forbids: where, and what it imports."""

    path: str  # relative to the scanned root
    line: int
    imported: str  # the absolute module name the line imports
    package: str = ""  # the contract's package

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


def violations(root: Path, packages: Mapping[str, Iterable[str]]) -> tuple[list[Violation], int]:
    """Every forbidden import under root/<package> for each package; and how many files were read."""
    found: list[Violation] = []
    files = 0
    for package, forbidden_names in packages.items():
        forbidden = frozenset(forbidden_names)
        for path in sorted((root / package).rglob("*.py")):
            files += 1
            module, is_package = module_of(root, path)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for line, imported in imports_in(tree, module, is_package):
                if imported.split(".")[0] in forbidden:
                    found.append(Violation(path.relative_to(root).as_posix(), line, imported, package))
    return sorted(set(found)), files
