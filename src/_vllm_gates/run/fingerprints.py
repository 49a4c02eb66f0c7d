"""The fingerprint of a gate: a hash of everything its verdict depends on (docs/evidence.md, "Fingerprints").

Its inputs are files of the project (the gate file, its spec, pyproject.toml, the row folder, the declared
`sources:`, every project file its targets import) and three values: the row's roadmap entry, the harness
version and the implementation judged. Each input is named and hashed, so that a stale fingerprint can say
which input changed.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from _vllm_gates.definitions.config import CONFIG_FILE, Config
from _vllm_gates.definitions.model import Gate, GateFile, Row
from _vllm_gates.definitions.patterns import declared_files, files_matching, folder_pattern
from _vllm_gates.definitions.sources import ImportGraph, gate_source_files, import_graph


@dataclass(frozen=True)
class GateFingerprint:
    """One gate's inputs (name -> sha256) and the fingerprint over all of them."""

    row: str
    gate: str
    inputs: Mapping[str, str]
    fingerprint: str


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Fingerprinter:
    """Fingerprints of a project's gates; each file is read and hashed once."""

    def __init__(self, config: Config, impl: str = "python", graph: ImportGraph | None = None):
        from vllm_gates import __version__

        self.config, self.impl, self.version = config, impl, __version__
        self.graph = graph or import_graph(config)
        self._files: dict[str, str] = {}
        if config.source is not None:  # the pyproject.toml this configuration was read from, not read again
            self._files[CONFIG_FILE] = _digest(config.source.encode("utf-8"))
        self._relative: dict[Path, str] = {}
        self._root: Path | None = None

    def file(self, relative: str) -> str:
        """The sha256 of a project file; "missing" when there is none."""
        if relative not in self._files:
            path = self.config.root / relative
            try:
                self._files[relative] = _digest(path.read_bytes())
            except OSError:
                self._files[relative] = "missing"
        return self._files[relative]

    def implementation(self) -> str:
        """A hash of the implementation judged: its name and settings, and for an external one its build identity
        (sources, build commands, build environment)."""
        if "implementation" not in self._files:
            from _vllm_gates.definitions.builds import identity

            impl = self.config.implementation(self.impl)
            if impl is None or not impl.external:
                text = json.dumps({"name": self.impl, "settings": impl.settings if impl else ()}, sort_keys=True)
                self._files["implementation"] = _digest(self.impl.encode() if impl is None or not impl.settings else text.encode())
            else:
                self._files["implementation"] = identity(impl, self.config.root)
        return self._files["implementation"]

    def harness(self) -> str:
        """A hash of the engine's own files (its version names a release; its files say what actually ran)."""
        if "harness" not in self._files:
            import _vllm_gates
            import vllm_gates

            engine = [Path(_vllm_gates.__file__).parent, Path(vllm_gates.__file__).parent]
            files = sorted(p for folder in engine for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".json"))
            self._files["harness"] = _digest(b"".join(_digest(p.read_bytes()).encode() for p in files))
        return self._files["harness"]

    def relative(self, path: Path) -> str:
        """The project-relative name of a file (resolved once per path: every gate of a row names the same files)."""
        found = self._relative.get(path)
        if found is None:
            if self._root is None:
                self._root = self.config.root.resolve()
            found = self._relative[path] = path.resolve().relative_to(self._root).as_posix()
        return found

    def gate(self, gate_file: GateFile, gate: Gate, row: Row | None) -> GateFingerprint:
        """The fingerprint of one gate of ``gate_file``; ``row`` is its roadmap entry (None: not in the roadmap)."""
        files = {gate_file.path, gate_file.spec, CONFIG_FILE}
        files.update(files_matching(self.config.root, folder_pattern(gate_file.folder)) if gate_file.folder else ())
        files.update(declared_files(self.config.root, gate_file.sources))
        files.update(self.relative(p) for p in gate_source_files(self.graph, gate.targets()))
        inputs = {f"file:{name}": self.file(name) for name in sorted(files)}
        entry = json.dumps(asdict(row), sort_keys=True) if row is not None else "not in the roadmap"
        inputs[f"roadmap:{gate_file.row}"] = _digest(entry.encode())  # the entry, not the file: other rows may change
        inputs[f"harness:vllm-gates {self.version}"] = self.harness()
        inputs[f"impl:{self.impl}"] = self.implementation()
        text = "\n".join(f"{name}\0{value}" for name, value in sorted(inputs.items()))
        return GateFingerprint(gate_file.row, gate.id, inputs, _digest(text.encode()))


def changed_inputs(recorded: Mapping[str, str], now: Mapping[str, str], limit: int = 5) -> str:
    """What differs between two sets of inputs, as text: "file:impl/x.py changed; file:impl/y.py added"."""
    changes = [f"{name} changed" for name in sorted(recorded.keys() & now.keys()) if recorded[name] != now[name]]
    changes += [f"{name} added" for name in sorted(now.keys() - recorded.keys())]
    changes += [f"{name} removed" for name in sorted(recorded.keys() - now.keys())]
    shown = "; ".join(changes[:limit])
    return shown + (f"; and {len(changes) - limit} more" if len(changes) > limit else "") if changes else "nothing"
