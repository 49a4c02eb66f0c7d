"""What lets a `gates mutate` rerun reuse an earlier verdict mutant by mutant (docs/mutation.md, "Incremental reruns"):
the tree and engine a report was measured with, and each gate's fingerprint over what it runs besides the mutated files.

A killed mutant is reused while its fingerprint and the gates that killed it are unchanged; any other measured one
while its fingerprint and every gate that can reach its file (and every gate that ran it) are unchanged.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.definitions.sources import ImportGraph, gate_source_files
from _vllm_gates.mutation.mutate_operators import compiles
from _vllm_gates.mutation.mutate_report import EQUIVALENTS_FILE
from _vllm_gates.results.reports import write_atomic
from _vllm_gates.run.fingerprints import Fingerprinter

ANY_GATE = ("killed",)  # statuses whose reuse asks only for the killing gates to be unchanged
NOTHING_RUN = ("not_compiling",)  # the mutated module did not import: no gate's change can alter that


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tree_identity(root: Path) -> str:
    """Which project a report belongs to, not its contents: the repository's first commits when the project is a git
    checkout (every clone agrees), else the project folder's resolved path."""
    done = subprocess.run(["git", "-C", str(root), "rev-list", "--max-parents=0", "HEAD"], capture_output=True, text=True)
    if done.returncode == 0 and done.stdout.strip():
        return "git:" + ",".join(sorted(done.stdout.split()))
    return "folder:" + str(root.resolve())


def engine_identity(config: Config, generator: str) -> str:
    """The mutant generator's name and a hash of the engine's own files (fingerprints.Fingerprinter.harness)."""
    return f"{generator}; engine {Fingerprinter(config).harness()}"


def gate_fingerprints(config: Config, gate_file: GateFile, mutated: Iterable[str], graph: ImportGraph,
                      impl: str) -> dict[str, str]:
    """Each gate of the row by id: the sha256 of its definition file, the row's gate file, the row folder's data files,
    the project files its targets import except the ``mutated`` ones, the engine's settings and the implementation."""
    maker = Fingerprinter(config, impl, graph)
    root = config.root.resolve()
    left_out = {os.path.realpath(root / f) for f in mutated}
    folder = config.root / (gate_file.folder or str(Path(gate_file.path).parent))
    definitions = {gate_file.path, *(g.location.path for g in gate_file.gates)}
    data = sorted(p.relative_to(config.root).as_posix() for p in folder.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".py", ".pyc")
                  and p.name != EQUIVALENTS_FILE and p.relative_to(config.root).as_posix() not in definitions)
    settings = {f.name: repr(getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in ("root", "source")}
    common = [f"settings\0{_digest(json.dumps(settings, sort_keys=True))}", f"impl:{impl}\0{maker.implementation()}",
              f"file:{gate_file.path}\0{maker.file(gate_file.path)}", *(f"file:{name}\0{maker.file(name)}" for name in data)]
    found = {}
    for gate in gate_file.gates:
        imported = sorted(maker.relative(p) for p in gate_source_files(graph, gate.targets())
                          if os.path.realpath(p) not in left_out)
        own = [f"file:{name}\0{maker.file(name)}" for name in dict.fromkeys([gate.location.path, *imported])]
        found[gate.id] = _digest("\n".join(common + own))
    return found


def reaching_gates(config: Config, gate_file: GateFile, files: Iterable[str], graph: ImportGraph) -> dict[str, list[str]]:
    """Each file by the gates whose impl side imports it (found statically, as `gates affected` does): the gates that
    may execute its lines, whether or not they did when it was last judged."""
    real = {os.path.realpath(config.root / f): f for f in files}
    found: dict[str, list[str]] = {f: [] for f in real.values()}
    for gate in gate_file.gates:
        for path in gate_source_files(graph, [r for r in (gate.impl, gate.build_impl) if r]):
            file = real.get(os.path.realpath(path))
            if file is not None:
                found[file].append(gate.id)
    return found


def verdict_holds(record: Mapping[str, Any], reaching: Iterable[str], then: Mapping[str, str], now: Mapping[str, str]) -> bool:
    """Whether an earlier verdict still stands: the gates it depends on (the killing ones for a kill, else every gate
    that reaches its file or ran it) each exist now with the fingerprint they had when it was judged."""
    status = record.get("status")
    if status in NOTHING_RUN:
        depends: list[str] = []
    elif status in ANY_GATE:
        depends = list(record.get("killing_gates") or [])
        if not depends:  # a kill that names no gate cannot be checked
            return False
    else:
        depends = [*reaching, *(record.get("gates_run") or [])]
    return all(gate in now and then.get(gate) == now[gate] for gate in depends)


class CompileMemo:
    """Which mutated texts compile, remembered between runs under build/ by their sha256 and the Python version, so
    that a rerun generates a row's mutants without compiling each again (most of the generating time)."""

    KEEP = 100_000  # entries kept from earlier runs besides this run's; past it only this run's are saved

    def __init__(self, path: Path):
        self.path = path
        self.used: dict[str, bool] = {}  # this run's answers
        self.known: dict[str, bool] = {}  # an earlier run's
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            document = None
        if isinstance(document, dict) and document.get("python") == sys.version and isinstance(document.get("texts"), dict):
            self.known = {k: v for k, v in document["texts"].items() if isinstance(k, str) and isinstance(v, bool)}

    def compiles(self, file: str, text: str) -> bool:
        key = _digest(file + "\0" + text)
        if key not in self.used:
            self.used[key] = self.known[key] if key in self.known else compiles(file, text)
        return self.used[key]

    def save(self) -> None:
        """This run's answers, with the earlier ones while they are few enough; a folder that cannot be written is
        left without a memo (the next run compiles again)."""
        texts = {**self.known, **self.used} if len(self.known) + len(self.used) <= self.KEEP else dict(self.used)
        if texts == self.known:
            return
        try:
            write_atomic(self.path, json.dumps({"python": sys.version, "texts": texts}) + "\n")
        except OSError:
            pass
