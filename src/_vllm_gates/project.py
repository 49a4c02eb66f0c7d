"""A gated project's definitions loaded without importing any target: the roadmap and every row's gate file.

Used by `gates list`, `coverage` and `affected`, and by the plugin for `--gates-changed-since` (docs/gate-files.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from _vllm_gates.claims import claim_problems
from _vllm_gates.config import Config
from _vllm_gates.errors import DefinitionError, Location, Problem
from _vllm_gates.gatefile import LoadShare, load_gate_file, peek_row_id
from _vllm_gates.model import GateFile, Roadmap
from _vllm_gates.roadmap import load_roadmap


@dataclass(frozen=True)
class Project:
    """The roadmap, the gate files that load, and for each row whose file does not load, the path and why."""

    config: Config
    roadmap: Roadmap
    gate_files: tuple[GateFile, ...]
    paths: dict[str, Path]
    broken: dict[str, tuple[Path, str]]

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
    """Load the roadmap (DefinitionError if it does not load) and every gate file (problems kept per row)."""
    roadmap = load_roadmap_of(config)
    gate_files, paths, broken = [], {}, {}
    share, markers = LoadShare(), config.marker_names  # one load's share: a later load reads every file anew
    for path in config.gate_files():
        try:
            gate_file = load_gate_file(path, config.root, roadmap, markers, share, dict(config.error_kinds),
                                       parity_marker=config.parity_marker())
        except DefinitionError as error:
            broken[peek_row_id(path)] = (path, str(error))
            continue
        if gate_file.row in paths:
            broken[gate_file.row] = (path, str(second_gate_file(gate_file, paths[gate_file.row].relative_to(config.root).as_posix())))
            continue
        gate_files.append(gate_file)
        paths[gate_file.row] = path
    return Project(config, roadmap, tuple(gate_files), paths, broken)
