"""The interface file agrees with its gates (docs/gating-a-port.md): every error a case of an operation's gate expects is of a kind
the operation declares in operations.yaml, and every limit it declares is reached by at least one such case.

A team that codes from operations.yaml alone then meets no case the file did not announce.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from _vllm_gates.base.errors import Location, Problem
from _vllm_gates.definitions.model import Case, Gate, Limit, Operation
from _vllm_gates.values.facts import facts_of_pattern


def disagreements(gates: tuple[Gate, ...] | list[Gate], operations: Mapping[str, Operation], operations_file: str,
                  error_kinds: Mapping[str, str] | None) -> list[Problem]:
    """The definition errors where the gates and their operations disagree. ``error_kinds``: the project's
    `[tool.vllm-gates.error-kinds]`; None leaves expected errors unchecked (only limits are)."""
    problems: list[Problem] = []
    by_operation: dict[str, list[Gate]] = {}
    for gate in gates:
        operation = operations.get(gate.operation) if gate.operation else None
        if operation is None:
            continue
        by_operation.setdefault(operation.name, []).append(gate)
        if error_kinds is not None:
            problems.extend(_undeclared_errors(gate, operation, operations_file, error_kinds))
    for name, their_gates in by_operation.items():  # an operation no loaded gate calls has no cases to reach its limits
        operation = operations[name]
        problems.extend(_unexercised(limit, operation, their_gates) for limit in operation.limits
                        if not any(reaches(case, limit) for gate in their_gates for case in gate.cases))
    return problems


def _undeclared_errors(gate: Gate, operation: Operation, operations_file: str,
                       error_kinds: Mapping[str, str]) -> Iterator[Problem]:
    declared = [kind for kind, _ in operation.errors]
    where = operation.errors_location or operation.location
    said = (f"operation {operation.name} declares {', '.join(declared)} at {_line(where)}" if declared
            else f"operation {operation.name} declares no errors ({operations_file}:{operation.location.line})")
    for case in gate.cases:
        if case.raises is None:
            continue
        key = f"gate {gate.id}: case {case.name}: raises.type"
        kind = error_kinds.get(case.raises.type_name)
        if kind is None:
            yield Problem(case.location, key, f"{case.raises.type_name} has no error kind in [tool.vllm-gates.error-kinds] "
                                              f"of pyproject.toml, so an implementation of operation {operation.name} in "
                                              f"another language cannot tell what to raise ({said})")
        elif kind not in declared:
            yield Problem(case.location, key, f"expects error kind {kind!r} ({case.raises.type_name}), which {said}; "
                                              f"declare {kind!r} there with the facts its message carries")


def _unexercised(limit: Limit, operation: Operation, gates: list[Gate]) -> Problem:
    if gates:
        named = f"{'gate' if len(gates) == 1 else 'gates'} {', '.join(g.id for g in gates)}"
    else:
        named = "its gates (no gate names it with `operation:`)"
    place = ("the expected " if limit.place[0] == "output" else "") + ".".join(limit.place)
    return Problem(limit.location, f"operations.{operation.name}.limits.{limit.name}",
                   f"limit {limit.name} ({limit.describe()}) of operation {operation.name} is reached by no case of "
                   f"{named}: add a case whose {place} is {limit.bound} or {'more' if limit.is_max else 'less'}, "
                   f"or one that raises naming {limit.bound}")


def reaches(case: Case, limit: Limit) -> bool:
    """Whether a case exercises a limit: its value at the limit's place (the input, or `expect` for the output) sits
    at or beyond the bound, or it expects an error whose facts name the bound."""
    if case.raises is not None:
        facts = case.raises.facts if case.raises.facts is not None else facts_of_pattern(case.raises.match)
        if str(limit.bound) in facts:
            return True
    if limit.place[0] == "output" and not case.has_expect:
        return False
    value = _at(case.input if limit.place[0] == "input" else case.expect, limit.place[1:])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value >= limit.bound if limit.is_max else value <= limit.bound


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _line(where: Location) -> str:
    return f"{where.path}:{where.line}"
