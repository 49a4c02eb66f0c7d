"""A row's interface file, `operations.yaml` beside its gate file: the operations its gates call, language-neutral.

Each operation names what it takes and returns as plain data (with C types where the C ABI has them), the error
kinds it raises with the facts their messages carry, and the Python port's binding (docs/gating-a-port.md).
"""
from __future__ import annotations

import re
from pathlib import Path

from _vllm_gates.errors import DefinitionError, Location
from _vllm_gates.fields import TARGET_PATTERN, Reader, show, type_name
from _vllm_gates.implementations import KIND
from _vllm_gates.model import Operation, TargetRef
from _vllm_gates.yamlsource import YMap, load_yaml, location_of, to_plain

FILE_NAME = "operations.yaml"
OPERATION_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
OPERATION_KEYS_REQUIRED = {"summary", "input", "output", "python"}
OPERATION_KEYS_OPTIONAL = {"errors", "notes"}


def operations_path(gate_file: Path) -> Path:
    return gate_file.parent / FILE_NAME


def _target(reader: Reader, body: YMap, name: str, key: str, anchor: str | None) -> TargetRef | None:
    value = reader.string(body, name, key, TARGET_PATTERN)
    if not value:
        return None
    ref = TargetRef(value, location_of(body, name), anchor)
    if ref.is_relative and anchor is None:
        reader.problem(ref.location, key, f"relative target {value!r} needs an importable row folder")
        return None
    return ref


def _operation(reader: Reader, name: str, body: YMap, where: Location, anchor: str | None) -> Operation | None:
    key = f"operations.{name}"
    reader.keys(body, key, OPERATION_KEYS_REQUIRED, OPERATION_KEYS_OPTIONAL)
    summary = reader.string(body, "summary", f"{key}.summary")
    errors: list[tuple[str, str]] = []
    if "errors" in body:
        table = reader.mapping(body["errors"], f"{key}.errors", location_of(body, "errors"))
        for kind, facts in (table or {}).items():
            place = location_of(table, kind)
            if not isinstance(kind, str) or not KIND.match(kind):
                reader.problem(place, f"{key}.errors", f"error kind {show(kind)} must match {KIND.pattern}")
            elif not isinstance(facts, str) or not facts.strip():
                reader.problem(place, f"{key}.errors.{kind}", f"expected the facts its message carries, as text, got {type_name(facts)} {show(facts)}")
            else:
                errors.append((kind, facts))
    binding = reader.mapping(body["python"], f"{key}.python", location_of(body, "python")) if "python" in body else None
    impl = build = None
    if binding is not None:
        reader.keys(binding, f"{key}.python", {"impl"}, {"build"})
        impl = _target(reader, binding, "impl", f"{key}.python.impl", anchor)
        build = _target(reader, binding, "build", f"{key}.python.build", anchor) if "build" in binding else None
    if not (summary and impl) or "input" not in body or "output" not in body:
        return None
    return Operation(name, where, summary, to_plain(body["input"]), to_plain(body["output"]), tuple(errors), impl, build)


def load_operations(path: Path, shown: str, row: str | None, anchor: str | None) -> tuple[Operation, ...]:
    """The operations a row declares (none when it has no operations.yaml); DefinitionError naming file:line."""
    if not path.exists():
        return ()
    document = load_yaml(path, shown, what="operations file")
    reader = Reader(shown)
    top = reader.mapping(document, "", None)
    if top is None:
        raise DefinitionError(reader.problems)
    reader.keys(top, "", {"row", "operations"}, {"notes"})
    declared = reader.string(top, "row", "row")
    if declared and row and declared != row:
        reader.problem(location_of(top, "row"), "row", f"names row {show(declared)}, but its gate file is row {show(row)}")
    found: list[Operation] = []
    table = reader.mapping(top["operations"], "operations", location_of(top, "operations")) if "operations" in top else None
    for name, body in (table or {}).items():
        where = location_of(table, name)
        if not isinstance(name, str) or not OPERATION_NAME.match(name):
            reader.problem(where, "operations", f"operation name {show(name)} must match {OPERATION_NAME.pattern}")
            continue
        mapping = reader.mapping(body, f"operations.{name}", where)
        operation = _operation(reader, name, mapping, where, anchor) if mapping is not None else None
        if operation is not None:
            found.append(operation)
    if reader.problems:
        raise DefinitionError(reader.problems)
    return tuple(found)
