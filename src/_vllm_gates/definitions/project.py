"""One snapshot of a gated project per run (docs/architecture.md): its configuration, roadmap and gate files, each read
and validated once, then shared by the `gates` command, the plugin's collection and the xdist controller.

The roadmap and the gate files load when first asked for (a pytest run of other tests reads neither). Nothing is
cached beyond one snapshot: the next run takes a new one, so a file changed since is read anew (docs/gate-files.md).
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from _vllm_gates.base.errors import DefinitionError, Location, Problem
from _vllm_gates.definitions.claims import claim_problems
from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.gatefile import LoadShare, load_gate_file, peek_row_id
from _vllm_gates.definitions.model import GateFile, Roadmap
from _vllm_gates.definitions.roadmap import load_roadmap


@dataclass(frozen=True)
class Definitions:
    """The gate files that load whole, their paths by row, and for each row whose file does not load, path and why."""

    gate_files: tuple[GateFile, ...]
    paths: dict[str, Path]
    broken: dict[str, tuple[Path, str]]


@dataclass(frozen=True, eq=False)
class Project:
    """A project's definitions as one run sees them; each file is read and validated at most once."""

    config: Config
    _share: LoadShare = field(default_factory=LoadShare, repr=False)  # folders and spec ids, each found once
    _loaded: dict[str, GateFile | DefinitionError] = field(default_factory=dict, repr=False)  # by absolute path

    @cached_property
    def roadmap_or_problems(self) -> tuple[Roadmap | None, list[Problem]]:
        """The roadmap, or the problems that keep it from loading (a run reports them at each gate file)."""
        try:
            return load_roadmap_of(self.config), []
        except DefinitionError as error:
            return None, error.problems

    @property
    def roadmap(self) -> Roadmap:
        """The roadmap; DefinitionError when it does not load."""
        roadmap, problems = self.roadmap_or_problems
        if roadmap is None:
            raise DefinitionError(problems)
        return roadmap

    def run_gate_file(self, path: Path) -> GateFile:
        """A gate file as a run collects it: a problem within one gate breaks only that gate (GateFile.broken_gates);
        DefinitionError when the file itself does not load, or when the roadmap does not."""
        key = os.path.abspath(path)
        if key not in self._loaded:
            try:
                self._loaded[key] = load_gate_file(path, self.config.root, self.roadmap, self.config.marker_names,
                                                   self._share, dict(self.config.error_kinds), per_gate=True,
                                                   parity_marker=self.config.parity_marker())
            except DefinitionError as error:
                self._loaded[key] = error
        found = self._loaded[key]
        if isinstance(found, DefinitionError):
            raise found
        return found

    def whole_gate_file(self, path: Path) -> GateFile:
        """A gate file as `gates list` and evidence see it: DefinitionError with every problem of its gates, in order,
        when one gate does not load (what loading the file whole says)."""
        gate_file = self.run_gate_file(path)
        if gate_file.broken_gates:
            raise DefinitionError([problem for gate in gate_file.broken_gates for problem in gate.problems])
        return gate_file

    @cached_property
    def definitions(self) -> Definitions:
        """Every gate file whole, as `gates list` and evidence see them: a broken gate breaks its row."""
        gate_files: list[GateFile] = []
        paths: dict[str, Path] = {}
        broken: dict[str, tuple[Path, str]] = {}
        for path in self.config.gate_files():
            try:
                gate_file = self.whole_gate_file(path)
            except DefinitionError as error:
                broken[peek_row_id(path)] = (path, str(error))
                continue
            if gate_file.row in paths:
                broken[gate_file.row] = (path, str(second_gate_file(gate_file, paths[gate_file.row].relative_to(self.config.root).as_posix())))
                continue
            gate_files.append(gate_file)
            paths[gate_file.row] = path
        return Definitions(tuple(gate_files), paths, broken)

    @property
    def gate_files(self) -> tuple[GateFile, ...]:
        return self.definitions.gate_files

    @property
    def paths(self) -> dict[str, Path]:
        return self.definitions.paths

    @property
    def broken(self) -> dict[str, tuple[Path, str]]:
        return self.definitions.broken

    def gate_file(self, row: str) -> GateFile | None:
        return next((gf for gf in self.gate_files if gf.row == row), None)


def second_gate_file(gate_file: GateFile, first: str) -> Problem:
    """A row has one gate file: the problem of a second one, at its `row:` line."""
    where = gate_file.row_location or Location(gate_file.path, 1, 1)
    return Problem(where, "row", f"{gate_file.row} already has gate file {first}; a row has one gate file")


def unknown_row(roadmap: Roadmap, rows: list[str]) -> str | None:
    """Why the first of ``rows`` that the roadmap does not have is refused; None when all are rows."""
    known = [r.id for r in roadmap.rows]
    missing = [row for row in rows if row not in known]
    return f"unknown row {missing[0]!r} (rows: {', '.join(known)})" if missing else None


def unknown_name(flag: str, value: str, what: str, known: list[str]) -> str:
    """Why a flag's value is refused: what it does not name, the close names, and the known ones (at most 20)."""
    close = difflib.get_close_matches(value, known, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(known[:20]) + (f", and {len(known) - 20} more" if len(known) > 20 else "")
    return f"{flag} {value}: {what}{hint} (known: {shown or 'none'})"


def load_roadmap_of(config: Config) -> Roadmap:
    """The configured roadmap; DefinitionError when it is missing or malformed, or when an implementation claims a
    row or milestone it does not have."""
    path = config.root / config.roadmap
    if not path.is_file():
        raise DefinitionError([Problem(Location(config.roadmap, 1, 1), "",
                                       "roadmap file not found (setting roadmap in [tool.vllm-gates] of pyproject.toml)")])
    roadmap = load_roadmap(path, config.roadmap, config.upstream.version if config.upstream else None, check_pin=True)
    problems = claim_problems(roadmap, tuple(c for impl in config.implementations for c in impl.claims))
    if problems:
        raise DefinitionError(problems)
    return roadmap


def load_project(config: Config) -> Project:
    """A snapshot whose roadmap and gate files are loaded now: DefinitionError if the roadmap does not load (the
    gate files' problems are kept per row, Project.broken)."""
    project = Project(config)
    project.roadmap  # noqa: B018 - loaded now, so that its problem is the caller's at once
    project.definitions  # noqa: B018
    return project
