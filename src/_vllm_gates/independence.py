"""Independence contracts (`[tool.vllm-gates] independence`): a package never imports the packages it must not.

By default `impl` imports neither `oracles` nor `gates`, and `oracles` neither `impl` nor `gates`. Every import
form counts: `import a.b`, `from a import b`, relative imports (resolved against the file's package, including
ones that climb above the top-level package), imports inside functions or `if TYPE_CHECKING:`, and
`importlib.import_module("...")` / `__import__("...")` with a string literal (all found by _vllm_gates.imports).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from _vllm_gates.imports import imports_in, module_of


@dataclass(frozen=True, order=True)
class Violation:
    """One import that a contract forbids: where, and what it imports."""

    path: str  # relative to the scanned root
    line: int
    imported: str  # the absolute module name the line imports
    package: str = ""  # the contract's package

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported}"


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
            for imported in imports_in(tree, module, is_package):
                if imported.name.split(".")[0] in forbidden:
                    found.append(Violation(path.relative_to(root).as_posix(), imported.line, imported.name, package))
    return sorted(set(found)), files
