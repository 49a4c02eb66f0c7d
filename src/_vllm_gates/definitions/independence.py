"""Independence contracts (`[tool.vllm-gates] independence`): a package never imports the packages it must not, and
a gate's known-good imports none of the contracts' packages (docs/gate-files.md, "Known-goods").

By default `impl` imports neither `oracles` nor `gates`, and `oracles` neither `impl` nor `gates`. Every import
form counts: `import a.b`, `from a import b`, relative imports (resolved against the file's package, including
ones that climb above the top-level package), imports inside functions or `if TYPE_CHECKING:`, and
`importlib.import_module("...")` / `__import__("...")` with a string literal (all found by _vllm_gates.definitions.imports).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from _vllm_gates.definitions.imports import imports_in, module_of
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.definitions.sources import ImportGraph, target_modules


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


def known_good_violations(graph: ImportGraph, gate_files: Iterable[GateFile], packages: Iterable[str]) -> list[Violation]:
    """A known-good is an implementation of its own: neither its module nor any project module that it imports,
    directly or not, may belong to a contract's package (the impl, the oracles, upstream). One violation per
    known-good and package, at the known-good's entry, naming the deepest such module it reaches."""
    forbidden = frozenset(packages)
    found: list[Violation] = []
    for gate_file in gate_files:
        for gate in gate_file.gates:
            for good in gate.known_good:
                reached = graph.closure(target_modules([good.target]))
                for package in sorted(forbidden & {name.split(".")[0] for name in reached}):
                    deepest = max((name for name in reached if name.split(".")[0] == package), key=lambda n: (n.count("."), n))
                    found.append(Violation(good.location.path, good.location.line, deepest,
                                           f"known-good {good.name} of gate {gate.id}"))
    return sorted(found)
