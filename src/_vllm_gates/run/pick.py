"""`gates run ROW --gate ID [--gate ID…] [--case NAME…]` (docs/evidence.md §1): the pytest node ids of the gates and items
asked for, each name checked against the row's gate file; a name it lacks is refused with the close ones."""
from __future__ import annotations

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.gatefile import peek_row_id
from _vllm_gates.definitions.model import Gate
from _vllm_gates.definitions.project import Project, unknown_name
from _vllm_gates.values.policies import has_tolerance


class PickError(GatesError):
    """A --gate or --case (or the row they need) that the project does not have."""


def item_names(gate: Gate) -> list[str]:
    """The names of a gate's items, as pytest's node ids end: its cases, properties, known_bad[NAME],
    known_good[NAME], audit, and strength for a gate whose policy has a tolerance."""
    return ([case.name for case in gate.cases] + (["properties"] if gate.properties is not None else [])
            + [f"known_bad[{entry.name}]" for entry in gate.known_bad] + [f"known_good[{entry.name}]" for entry in gate.known_good]
            + ["audit"]
            + (["strength"] if has_tolerance(gate.policy) else []))


def node_ids(project: Project, rows: list[str], gates: list[str], cases: list[str]) -> list[str]:
    """The node ids that run the gates (or, with ``cases``, the items of the one gate) asked for in one row;
    DefinitionError when that row's gate file does not load (read from the run's snapshot, which its run reuses)."""
    if len(rows) != 1:
        raise PickError(f"--gate needs exactly one ROW (gates run ROW --gate ID), got {len(rows)}: {' '.join(rows) or 'none'}")
    if cases and len(gates) != 1:
        raise PickError(f"--case needs exactly one --gate, the gate whose items it names; got {len(gates)}")
    row, config = rows[0], project.config
    path = next((p for p in config.gate_files() if peek_row_id(p) == row), None)
    if path is None:
        raise PickError(f"--gate: row {row} has no gate file (rows = {list(config.rows)} in pyproject.toml)")
    gate_file = project.whole_gate_file(path)
    by_id = {gate.id: gate for gate in gate_file.gates}
    for gate_id in gates:
        if gate_id not in by_id:
            raise PickError(unknown_name("--gate", gate_id, f"row {row} has no such gate", list(by_id)))
    shown = config.relative(path) or str(path)
    if not cases:
        return [f"{shown}::{gate_id}" for gate_id in dict.fromkeys(gates)]
    names = item_names(by_id[gates[0]])
    for name in cases:
        if name not in names:
            raise PickError(unknown_name("--case", name, f"gate {gates[0]} has no such case or item", names))
    return [f"{shown}::{gates[0]}::{name}" for name in dict.fromkeys(cases)]
