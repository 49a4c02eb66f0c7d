"""The pytest plugin: collects gates/rows/*.yaml into items, registers cpu/gpu/dist, skips gpu without CUDA."""
from __future__ import annotations

import fnmatch
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import pytest

from gates.harness.checks import ResolvedGate
from gates.harness.gatefile import load_gate_file, peek_row_id
from gates.harness.items import AuditItem, CaseItem, DefinitionErrorItem, PropertiesItem, known_bad_items
from gates.harness.model import MARKERS, Gate, Roadmap
from gates.harness.profiles import default_profile_name, register_profiles
from gates.harness.roadmap import load_roadmap
from gates.harness.targets import DEFAULT_ALLOWED_ROOTS, TargetError, check_same_signature, resolve
from gates.harness.yamlsource import DefinitionError, Location, Problem

MARKER_HELP = {
    "cpu": "runs on any machine (unmarked tests count as cpu)",
    "gpu": "needs a CUDA device; skipped with a reason when none is present",
    "dist": "starts several processes (torch.distributed); deselect with -m 'not dist'",
}

register_profiles()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("gates_files", "glob patterns, relative to the rootdir, of gate files", type="linelist", default=["gates/rows/*.yaml"])
    parser.addini("gates_roadmap", "the roadmap file, relative to the rootdir", default="spec/roadmap.yaml")
    parser.addini("gates_allowed_roots", "top-level packages that gate targets may name", type="linelist", default=list(DEFAULT_ALLOWED_ROOTS))
    group = parser.getgroup("gates", "vllm-gates")
    group.addoption("--gates-audit", action="store_true", default=False,
                    help="run every gate against a wrong-everywhere stand-in and its known-bad entries only")


def pytest_configure(config: pytest.Config) -> None:
    for name in MARKERS:
        config.addinivalue_line("markers", f"{name}: {MARKER_HELP[name]}")
    try:
        chosen = config.getoption("hypothesis_profile")
    except ValueError:
        chosen = None
    if not chosen:
        from hypothesis import settings

        settings.load_profile(default_profile_name())


class GateSession:
    """Per-run state: the rootdir, the roadmap (loaded once) and the allowed import roots."""

    def __init__(self, config: pytest.Config):
        self.root = Path(config.rootpath)
        self.patterns = [str(p) for p in config.getini("gates_files")]
        self.roadmap_path = self.root / str(config.getini("gates_roadmap"))
        self.allowed_roots = tuple(str(r) for r in config.getini("gates_allowed_roots"))
        self.audit = bool(config.getoption("gates_audit"))
        self._roadmap: tuple[Roadmap | None, list[Problem]] | None = None
        self.row_files: dict[str, str] = {}

    def is_gate_file(self, path: Path) -> bool:
        try:
            relative = path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return False
        return any(fnmatch.fnmatch(relative, pattern) for pattern in self.patterns)

    def roadmap(self) -> tuple[Roadmap | None, list[Problem]]:
        if self._roadmap is None:
            shown = self.roadmap_path.relative_to(self.root).as_posix() if self.roadmap_path.is_relative_to(self.root) else str(self.roadmap_path)
            if not self.roadmap_path.is_file():
                self._roadmap = (None, [Problem(Location(shown, 1, 1), "", "roadmap file not found (ini option gates_roadmap)")])
            else:
                try:
                    self._roadmap = (load_roadmap(self.roadmap_path, shown), [])
                except DefinitionError as error:
                    self._roadmap = (None, error.problems)
        return self._roadmap


_SESSION_KEY = pytest.StashKey[GateSession]()


def gate_session(config: pytest.Config) -> GateSession:
    if _SESSION_KEY not in config.stash:
        config.stash[_SESSION_KEY] = GateSession(config)
    return config.stash[_SESSION_KEY]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix in (".yaml", ".yml") and gate_session(parent.config).is_gate_file(file_path):
        return GateFileNode.from_parent(parent, path=file_path)
    return None


class GateFileNode(pytest.File):
    """One row's gate file."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        session = gate_session(self.config)
        roadmap, roadmap_problems = session.roadmap()
        row = peek_row_id(self.path)
        common = {"row": row, "gate_id": "<file>", "milestone": "", "line": 1}
        if roadmap_problems:
            yield DefinitionErrorItem.from_parent(self, name="roadmap", problems=roadmap_problems, **common)
            return
        try:
            gate_file = load_gate_file(self.path, session.root, roadmap)
        except DefinitionError as error:
            yield DefinitionErrorItem.from_parent(self, name="definition", problems=error.problems, **common)
            return
        first = session.row_files.setdefault(gate_file.row, gate_file.path)
        if first != gate_file.path:
            where = gate_file.row_location or Location(gate_file.path, 1, 1)
            yield DefinitionErrorItem.from_parent(self, name="definition", problems=[
                Problem(where, "row", f"{gate_file.row} already has gate file {first}; a row has one gate file")], **common)
            return
        for gate in gate_file.gates:
            try:
                resolved = _resolve_gate(gate, session.allowed_roots)
            except TargetError as error:
                yield DefinitionErrorItem.from_parent(self, name=f"definition[{gate.id}]", problems=[error.problem],
                                                      **{**common, "gate_id": gate.id, "milestone": gate.milestone, "line": error.problem.location.line})
                continue
            yield GateNode.from_parent(self, name=gate.id, row=gate_file.row, resolved=resolved, audit=session.audit)


def _resolve_gate(gate: Gate, allowed_roots: tuple[str, ...]) -> ResolvedGate:
    def get(ref: Any, key: str) -> Any:
        return resolve(ref, f"gate {gate.id}.{key}", allowed_roots) if ref is not None else None

    impl = get(gate.impl, "impl")
    known_bad = {}
    for entry in gate.known_bad:
        stand_in = get(entry.target, f"known_bad.{entry.name}")
        check_same_signature(impl, stand_in, entry.target, f"gate {gate.id}.known_bad.{entry.name}", gate.impl)
        known_bad[entry.name] = stand_in
    return ResolvedGate(gate=gate, impl=impl, oracle=get(gate.oracle, "oracle"), build_impl=get(gate.build_impl, "build"),
                        build_oracle=get(gate.build_oracle, "build"), compare=get(gate.compare, "compare"),
                        strategy=get(gate.properties.strategy if gate.properties else None, "properties.strategy"),
                        known_bad=known_bad)


class GateNode(pytest.Collector):
    """One gate: its named cases, its properties, its known-bad entries (or, under --gates-audit, the audit)."""

    def __init__(self, *, row: str, resolved: ResolvedGate, audit: bool, **kwargs: Any):
        super().__init__(**kwargs)
        self.row, self.resolved, self.audit = row, resolved, audit

    def collect(self) -> Iterator[pytest.Item]:
        gate = self.resolved.gate
        common = {"row": self.row, "gate_id": gate.id, "milestone": gate.milestone, "markers": gate.markers}
        if self.audit:
            yield AuditItem.from_parent(self, name="audit", resolved=self.resolved, **common, line=gate.location.line)
            yield from known_bad_items(self, self.resolved, common, gate.known_bad)
            return
        for case in gate.cases:
            yield CaseItem.from_parent(self, name=case.name, resolved=self.resolved, case=case, **common, line=case.location.line)
        if gate.properties is not None:
            yield PropertiesItem.from_parent(self, name="properties", resolved=self.resolved, **common, line=gate.properties.location.line)
        yield from known_bad_items(self, self.resolved, common, gate.known_bad)


@lru_cache(maxsize=1)
def cuda_unavailable_reason() -> str | None:
    """Why gpu items cannot run here, or None when a CUDA device is present."""
    try:
        import torch
    except ImportError:
        return "gpu gate skipped: torch is not installed"
    if not torch.cuda.is_available():
        return "gpu gate skipped: no CUDA device (torch.cuda.is_available() is False)"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Unmarked tests count as cpu; gpu items skip with a reason when no CUDA device is present."""
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        if not marks & set(MARKERS):
            item.add_marker("cpu")
        elif "gpu" in marks and not isinstance(item, DefinitionErrorItem):
            reason = cuda_unavailable_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
