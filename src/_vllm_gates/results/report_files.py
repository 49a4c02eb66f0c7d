"""A run report (`vllm-gates/run/3`, docs/evidence.md, schema/run.schema.json) read back as the types that wrote it:
its rows as ``verdicts.RowReport`` (claims, gates, parity, operation counts), its items as ``records.ItemResult``.

``reports.to_json`` is the one writer; ``RunReportFile.from_data`` the one reader, used by evidence, the audit on
evidence, shards, the shard merge and the HTML page. Fields a report written before them lacks take their default;
a missing, unknown or mistyped field is a ``RecordError`` naming where, the field and its value.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Union

from _vllm_gates.results.outcomes import OperationCount
from _vllm_gates.results.records import ItemResult, RecordError, field_of, mapping_of
from _vllm_gates.results.verdicts import ClaimResult, GateResult, ParityResult, RowReport

_NESTED = (RowReport, ClaimResult, GateResult, ParityResult, OperationCount)


def _value(kind: Any, value: Any, where: str) -> Any:
    """``value`` read as the annotation ``kind`` (str, int, float, bool, an Enum, tuple[X, ...], Mapping, X | None,
    or one of the report's dataclasses); RecordError naming ``where`` and the value otherwise."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _value(inner, value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise RecordError(f"{where}: expected a list, got {value!r}")
        return tuple(_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict, typing.Mapping) or kind is Mapping:
        return dict(mapping_of(value, where))
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(value)
        except ValueError:
            raise RecordError(f"{where}: expected one of {', '.join(str(m.value) for m in kind)}, got {value!r}") from None
    if kind in _NESTED:
        return read_as(kind, value, where)
    expected = {str: (str,), bool: (bool,), int: (int,), float: (int, float)}[kind]
    if not isinstance(value, expected) or (isinstance(value, bool) and kind is not bool):
        raise RecordError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


def read_as(cls: type, data: Any, where: str) -> Any:
    """An instance of the dataclass ``cls`` from the dict ``dataclasses.asdict`` made of one (its enums as values)."""
    data = mapping_of(data, where)
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known), key=str)
    if unknown:
        raise RecordError(f"{where}: unknown field {unknown[0]!r} (value {data[unknown[0]]!r})")
    values = {}
    for name, spec in known.items():
        if name not in data:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise RecordError(f"{where}: missing field {name!r}")
            continue
        values[name] = _value(hints[name], data[name], f"{where}: {name}")
    return cls(**values)


@dataclass(frozen=True)
class RunReportFile:
    """A run report as written: the run's meta and evidence records, its exit code and checks, rows and items."""

    meta: Mapping[str, Any]
    evidence: Mapping[str, Any]
    interrupted: str | None
    exit_code: int
    checks: int
    rows: tuple[RowReport, ...]
    items: tuple[ItemResult, ...]

    @classmethod
    def from_data(cls, document: Any, where: str) -> RunReportFile:
        document = mapping_of(document, where)
        meta = dict(field_of(document, "meta", (dict,), "a mapping", where))
        evidence = dict(field_of(document, "evidence", (dict,), "a mapping", where))
        interrupted = field_of(document, "interrupted", (str, type(None)), "a text or null", where)
        exit_code = field_of(document, "exit_code", (int,), "an exit code", where)
        checks = field_of(document, "checks", (int,), "a count", where)
        rows = field_of(document, "rows", (list,), "a list", where)
        items = field_of(document, "items", (list,), "a list", where)
        return cls(meta, evidence, interrupted, exit_code, checks,
                   tuple(read_as(RowReport, row, f"{where}: rows[{i}]") for i, row in enumerate(rows)),
                   tuple(ItemResult.from_report(item, f"{where}: items[{i}]") for i, item in enumerate(items)))

    def gates(self) -> list[GateResult]:
        """Every gate of every row, in report order."""
        return [gate for row in self.rows for gate in row.gates]

