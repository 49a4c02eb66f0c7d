"""Declared deviations from the pinned upstream release (`spec/deviations.yaml`): for one operation of a row, what
upstream does, what we do and why, and the upstream gate that shows upstream still behaves as declared."""
from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from _vllm_gates.base.errors import DefinitionError, Location, Problem
from _vllm_gates.base.fields import Reader, show
from _vllm_gates.base.yamlsource import load_yaml, location_of
from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.model import GateFile

DEVIATION_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
KEYS = {"row", "operation", "upstream", "ours", "why", "checked_by"}


@dataclass(frozen=True)
class Deviation:
    """One declared difference from upstream, and the gate that keeps the declaration true."""

    id: str
    location: Location
    row: str
    operation: str
    upstream: str
    ours: str
    why: str
    checked_by: str


def load_deviations(config: Config, gate_files: tuple[GateFile, ...], broken: Collection[str] = ()) -> tuple[Deviation, ...]:
    """The project's deviations (none when it pins no upstream or has no file); DefinitionError naming file:line
    for a malformed entry, an unknown row or operation, or a checking gate that is missing or not an upstream gate.
    An entry of a row in ``broken`` (its gate file does not load) is a follow-on of that row's error (its `cause`)."""
    if config.upstream is None or not (config.root / config.upstream.deviations).is_file():
        return ()
    shown = config.upstream.deviations
    reader = Reader(shown)
    top = reader.mapping(load_yaml(config.root / shown, shown, what="deviations file"), "", None)
    if top is None:
        raise DefinitionError(reader.problems)
    reader.keys(top, "", {"upstream", "deviations"}, {"notes"})
    pinned = reader.string(top, "upstream", "upstream")
    if pinned and pinned != config.upstream.version:
        reader.problem(location_of(top, "upstream"), "upstream",
                       f"declares deviations from {show(pinned)}, but the project pins {show(config.upstream.version)}")
    files = {gf.row: gf for gf in gate_files}
    marker = config.parity_marker()
    found: list[Deviation] = []
    table = reader.mapping(top["deviations"], "deviations", location_of(top, "deviations")) if "deviations" in top else None
    for name, body in (table or {}).items():
        key, where = f"deviations.{name}", location_of(table, name)
        if not isinstance(name, str) or not DEVIATION_ID.match(name):
            reader.problem(where, "deviations", f"deviation id {show(name)} must match {DEVIATION_ID.pattern}")
            continue
        entry = reader.mapping(body, key, where)
        if entry is None:
            continue
        reader.keys(entry, key, KEYS, set())
        values = {k: reader.string(entry, k, f"{key}.{k}") for k in sorted(KEYS)}
        if not all(values.values()):
            continue
        gate_file = files.get(values["row"])  # type: ignore[arg-type]
        if gate_file is None:
            cause = f"row {values['row']}" if values["row"] in broken else ""
            reader.problem(location_of(entry, "row"), f"{key}.row", f"row {show(values['row'])} has no gate file that loads", cause)
            continue
        if values["operation"] not in {op.name for op in gate_file.operations}:
            reader.problem(location_of(entry, "operation"), f"{key}.operation",
                           f"operation {show(values['operation'])} is not declared in {gate_file.folder}/operations.yaml")
        gate = next((g for g in gate_file.gates if g.id == values["checked_by"]), None)
        legs = [g for g in gate_file.gates if g.leg_of == values["checked_by"]]  # its `upstream:` legs carry the marker
        if gate is None or (marker not in gate.markers and not any(marker in leg.markers for leg in legs)):
            what = "is not a gate of" if gate is None else f"does not carry the {marker!r} marker in"
            reader.problem(location_of(entry, "checked_by"), f"{key}.checked_by",
                           f"{show(values['checked_by'])} {what} {gate_file.path}: a deviation is checked against upstream itself")
        found.append(Deviation(name, where, **values))  # type: ignore[arg-type]
    reader.problems.extend(_unknown_in_legs(gate_files, found, shown))
    if reader.problems:
        raise DefinitionError(reader.problems)
    return tuple(found)


def _unknown_in_legs(gate_files: tuple[GateFile, ...], found: list[Deviation], shown: str) -> list[Problem]:
    """A deviation leg (`upstream.deviations` of a gate) that checks a deviation the file does not declare for its
    gate, row and operation: the problem at the leg's line."""
    declared = {(d.id, d.row, d.checked_by): d.operation for d in found}
    problems = []
    for gate_file in gate_files:
        for leg in gate_file.gates:
            for deviation in leg.deviations:
                operation = declared.get((deviation, gate_file.row, leg.leg_of or ""))
                if operation is None or (leg.operation is not None and operation != leg.operation):
                    where = f"row {gate_file.row}, checked_by {leg.leg_of}" + (f", operation {leg.operation}" if leg.operation else "")
                    problems.append(Problem(leg.location, f"{leg.id}.checks",
                                            f"deviation {show(deviation)} is not declared in {shown} for {where}"))
    return problems
