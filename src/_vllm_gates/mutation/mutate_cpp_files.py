"""Which C++ files a row's mutants come from, and which gates can reach each (docs/mutation-cpp.md). C++ has no line
tracer here, so reach is static: the files that register the row's operations (`GATES_*OPERATION("name", ...)`), and
every file defining a function they call, found through the headers they include, transitively. The protocol driver's
own files (a `driver/` folder) are never mutated: a row's score measures its own port code."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.builds import source_files
from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.mutation.cpp_lexer import tokens
from _vllm_gates.mutation.mutate_cpp import defined_functions

IMPLEMENTATION = "cpp"
PLUMBING = "driver"  # a folder of the protocol driver (drivers/cpp/src/driver): never mutated
_SOURCE = (".cpp", ".cc", ".cxx")
_HEADER = (".h", ".hpp", ".hh", ".hxx")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)
_REGISTRAR = re.compile(r"[A-Z_]*OPERATION")


@dataclass(frozen=True)
class _File:
    path: str  # repo-relative
    includes: tuple[str, ...]  # the project files its quoted includes name (repo-relative)
    names: frozenset[str]  # every identifier in it
    defines: frozenset[str]  # functions other files can call
    registers: tuple[str, ...]  # operation names it registers


class CppPort:
    """The C++ implementation's sources, read once: includes, identifiers, definitions and registered operations."""

    def __init__(self, files: dict[str, _File]):
        self.files = files
        self._reach: dict[str, set[str]] = {}
        self._included: dict[str, set[str]] = {}

    @classmethod
    def read(cls, config: Config) -> CppPort:
        impl = config.implementation(IMPLEMENTATION)
        if impl is None:
            raise GatesError(f"no implementation {IMPLEMENTATION!r} in [tool.vllm-gates.implementations]")
        paths = [config.relative(p) or p.as_posix() for p in source_files(impl, config.root)]
        texts = {p: (config.root / p).read_text(encoding="utf-8", errors="replace")
                 for p in paths if p.endswith(_SOURCE + _HEADER)}
        return cls({p: _read(p, text, texts) for p, text in texts.items()})

    def operation_files(self, operation: str) -> list[str]:
        return sorted(p for p, f in self.files.items() if operation in f.registers)

    def reach(self, start: str) -> set[str]:
        """The source files whose functions ``start`` can call (``start`` included): a file defining a name ``start``
        uses, declared in a header both include (so same-named helpers of other namespaces do not count)."""
        if start not in self._reach:
            reached = {start}
            todo = [start]
            while todo:
                current = self.files[todo.pop()]
                seen = self._headers(current.path)
                for path, other in self.files.items():
                    if path in reached or not path.endswith(_SOURCE) or not other.defines & current.names:
                        continue
                    shared = seen & (self._headers(path) | {h for h in other.includes})
                    if other.defines & current.names & set().union(*(self.files[h].names for h in shared)):
                        reached.add(path)
                        todo.append(path)
            self._reach[start] = reached
        return self._reach[start]

    def _headers(self, path: str) -> set[str]:
        """Every project header ``path`` includes, directly or through other headers."""
        if path not in self._included:
            seen: set[str] = set()
            todo = [path]
            while todo:
                for header in self.files[todo.pop()].includes:
                    if header not in seen and header in self.files:
                        seen.add(header)
                        todo.append(header)
            self._included[path] = seen
        return self._included[path]

    def mutable(self, path: str) -> bool:
        return path.endswith(_SOURCE) and PLUMBING not in Path(path).parts[:-1]

    def files_for(self, gate_file: GateFile) -> list[str]:
        found: set[str] = set()
        for operation in _operations(gate_file):
            for start in self.operation_files(operation):
                found |= self.reach(start)
        return sorted(p for p in found if self.mutable(p))

    def gates_reaching(self, gate_file: GateFile, file: str) -> list[str]:
        reach = {op: set().union(*(self.reach(f) for f in self.operation_files(op))) for op in _operations(gate_file)}
        return [g.id for g in gate_file.gates if g.operation and file in reach.get(g.operation, set())]


def cpp_files_for_row(config: Config, gate_file: GateFile) -> list[str]:
    """The C++ source files (repo-relative, sorted) that implement the row's operations, the driver's plumbing left
    out: the files registering the gates' `operation:` names and every file whose functions they reach."""
    return _port(config).files_for(gate_file)


def gates_reaching(config: Config, gate_file: GateFile, file: str) -> list[str]:
    """The ids of the row's gates (gate-file order) whose operation's handler lives in ``file`` or reaches its code."""
    return _port(config).gates_reaching(gate_file, file)


def _operations(gate_file: GateFile) -> list[str]:
    return sorted({g.operation for g in gate_file.gates if g.operation})


_READ: dict[tuple[object, ...], CppPort] = {}  # the last port read, keyed by its sources' paths, sizes and times


def _port(config: Config) -> CppPort:
    impl = config.implementation(IMPLEMENTATION)
    key = (str(config.root), *((str(p), p.stat().st_mtime_ns, p.stat().st_size)
                               for p in (source_files(impl, config.root) if impl else [])))
    if key not in _READ:
        _READ.clear()
        _READ[key] = CppPort.read(config)
    return _READ[key]


def _read(path: str, text: str, known: dict[str, str]) -> _File:
    toks = tokens(text)
    registers = tuple(toks[i + 2].text[1:-1] for i in range(len(toks) - 2) if _REGISTRAR.fullmatch(toks[i].text)
                      and toks[i + 1].text == "(" and toks[i + 2].kind == "string")
    includes = tuple(sorted({p for name in _INCLUDE.findall(text) for p in _resolve(path, name, known)}))
    defines = frozenset(defined_functions(text)) if path.endswith(_SOURCE) else frozenset()
    return _File(path, includes, frozenset(t.text for t in toks if t.kind == "ident"), defines, registers)


def _resolve(path: str, name: str, known: dict[str, str]) -> list[str]:
    """The project files a quoted include names: beside the including file first, else any source ending in it."""
    beside = os.path.normpath(Path(path).parent / name).replace(os.sep, "/")
    if beside in known:
        return [beside]
    suffix = "/" + name.lstrip("./")
    return [p for p in known if p.endswith(suffix)]
