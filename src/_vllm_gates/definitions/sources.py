"""What a gate's verdict depends on, found without importing anything: the project files its targets import.

Each target's module is located on the project's search path, parsed with `ast`, and its imports followed while they
stay inside the project (docs/evidence.md, "Inputs of a gate"). Packages bring their `__init__.py` files, whose
code runs on every import below them. Imports made at run time from strings (`importlib.import_module`) are not
seen: a gate file declares those under `sources:`.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.imports import imports_in
from _vllm_gates.definitions.model import GateFile, TargetRef


def import_graph(config: Config) -> ImportGraph:
    """The graph of a project: modules are looked for under its root, then under its pytest `pythonpath` entries."""
    search = [config.root] + [config.root / entry for entry in config.pythonpath]
    return ImportGraph(config.root, tuple(dict.fromkeys(p.resolve() for p in search)))


@dataclass(frozen=True)
class ModuleFile:
    """A module of the project: its dotted name, its file, and whether it is a package (its `__init__.py`)."""

    name: str
    path: Path
    package: bool


@dataclass
class ImportGraph:
    """Modules of one project located on its search path, with the project modules each imports (cached)."""

    root: Path
    search: tuple[Path, ...]
    _located: dict[str, ModuleFile | None] = field(default_factory=dict)
    _imports: dict[str, frozenset[str]] = field(default_factory=dict)

    def locate(self, name: str) -> ModuleFile | None:
        """The project file of module ``name``; None when it is not the project's (the standard library, torch)."""
        if name not in self._located:
            self._located[name] = self._find(name)
        return self._located[name]

    def _find(self, name: str) -> ModuleFile | None:
        parts = name.split(".")
        for base in self.search:
            package = base.joinpath(*parts, "__init__.py")
            if package.is_file():
                return ModuleFile(name, package, True)
            module = base.joinpath(*parts[:-1], parts[-1] + ".py")
            if module.is_file():
                return ModuleFile(name, module, False)
        return None

    def imports(self, module: ModuleFile) -> frozenset[str]:
        """Dotted names ``module`` imports (absolute, relative ones resolved), each with its parent packages."""
        if module.name not in self._imports:
            self._imports[module.name] = frozenset(_with_parents(_imported_names(module)))
        return self._imports[module.name]

    def closure(self, names: set[str]) -> dict[str, ModuleFile]:
        """Every project module reachable from ``names`` by imports, parent packages included, by name."""
        found: dict[str, ModuleFile] = {}
        pending = sorted(_with_parents(names))
        while pending:
            name = pending.pop()
            if name in found:
                continue
            module = self.locate(name)
            if module is None:
                continue
            found[name] = module
            pending.extend(n for n in self.imports(module) if n not in found)
        return found


def _with_parents(names: set[str] | frozenset[str]) -> set[str]:
    return {".".join(name.split(".")[:i]) for name in names for i in range(1, name.count(".") + 2)}


def _imported_names(module: ModuleFile) -> set[str]:
    """Names from `import a.b` and `from a import b` (as `a` and `a.b`: b may be a submodule), relative ones resolved;
    not import calls with a string, nor relative imports that climb above the top package. A file that does not
    parse contributes nothing more (its worker reports the syntax error)."""
    try:
        tree = ast.parse(module.path.read_bytes(), filename=str(module.path))
    except (SyntaxError, ValueError, OSError):
        return set()
    return {found.name for found in imports_in(tree, module.name, module.package) if not found.dynamic and not found.climbs}


def target_modules(refs: list[TargetRef]) -> set[str]:
    """The modules that a gate's targets live in (relative targets resolved against their anchor package)."""
    from _vllm_gates.wire.standins import __name__ as engine_standins

    return {ref.module for ref in refs if ref.module != engine_standins}


def gate_source_files(graph: ImportGraph, refs: list[TargetRef]) -> list[Path]:
    """The project files the given targets import, directly or not, in path order."""
    return sorted({m.path for m in graph.closure(target_modules(refs)).values()})


def row_source_files(graph: ImportGraph, gate_file: GateFile) -> list[Path]:
    """The project files any gate of a row imports."""
    refs = [ref for gate in gate_file.gates for ref in gate.targets()]
    return gate_source_files(graph, refs)
