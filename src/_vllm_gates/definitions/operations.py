"""A row's interface file, `operations.yaml` beside its gate file: the operations its gates call, language-neutral.

Each operation names what it takes and returns as plain data (with C types where the C ABI has them), the error
kinds it raises with the facts their messages carry, the bounds its cases must reach (`limits:`), and the
Python port's binding (docs/gating-a-port.md).
"""
from __future__ import annotations

import re
from pathlib import Path

from _vllm_gates.base.errors import DefinitionError, Location
from _vllm_gates.base.fields import TARGET_PATTERN, Reader, show, type_name
from _vllm_gates.base.yamlsource import YMap, load_yaml, location_of, to_plain
from _vllm_gates.definitions.implementations import KIND
from _vllm_gates.definitions.model import Limit, Operation, TargetRef

FILE_NAME = "operations.yaml"
OPERATION_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
OPERATION_KEYS_REQUIRED = {"summary", "input", "output", "python"}
OPERATION_KEYS_OPTIONAL = {"errors", "limits", "notes"}
LIMIT_NAME = OPERATION_NAME
LIMIT_PLACE = re.compile(r"^(input(\.[A-Za-z_][A-Za-z0-9_]*)+|output(\.[A-Za-z_][A-Za-z0-9_]*)*)$")
NAMED_BOUNDS = {"INT32_MIN": -2**31, "INT32_MAX": 2**31 - 1, "INT64_MIN": -2**63, "INT64_MAX": 2**63 - 1,
                "UINT32_MAX": 2**32 - 1, "UINT64_MAX": 2**64 - 1}


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
    limits = _limits(reader, body, key) if "limits" in body else ()
    binding = reader.mapping(body["python"], f"{key}.python", location_of(body, "python")) if "python" in body else None
    impl = build = None
    if binding is not None:
        reader.keys(binding, f"{key}.python", {"impl"}, {"build"})
        impl = _target(reader, binding, "impl", f"{key}.python.impl", anchor)
        build = _target(reader, binding, "build", f"{key}.python.build", anchor) if "build" in binding else None
    if not (summary and impl) or "input" not in body or "output" not in body:
        return None
    errors_at = location_of(body, "errors") if "errors" in body else None
    return Operation(name, where, summary, to_plain(body["input"]), to_plain(body["output"]), tuple(errors), impl, build,
                     errors_at, limits)


def _limits(reader: Reader, body: YMap, key: str) -> tuple[Limit, ...]:
    """`limits: {NAME: {at: input.PATH | output[.PATH], max: BOUND} | {at: ..., min: BOUND}}`; BOUND an integer or
    one of NAMED_BOUNDS. A first key under `input.`/`output.` must be one the operation's input/output map declares."""
    table = reader.mapping(body["limits"], f"{key}.limits", location_of(body, "limits"))
    if table is None:
        return ()
    found: list[Limit] = []
    for name, limit in (table or {}).items():
        limit_key, place = f"{key}.limits.{name}", location_of(table, name)
        if not isinstance(name, str) or not LIMIT_NAME.match(name):
            reader.problem(place, f"{key}.limits", f"limit name {show(name)} must match {LIMIT_NAME.pattern}")
            continue
        spec = reader.mapping(limit, limit_key, place)
        if spec is None:
            continue
        reader.keys(spec, limit_key, {"at"}, {"max", "min", "note"})
        at = reader.string(spec, "at", f"{limit_key}.at")
        sides = [side for side in ("max", "min") if side in spec]
        if len(sides) != 1:
            reader.problem(place, limit_key, "a limit gives exactly one of `max` or `min`")
            continue
        written, bound = _bound(reader, spec, sides[0], f"{limit_key}.{sides[0]}")
        if at is None or bound is None:
            continue
        if not LIMIT_PLACE.match(at):
            reader.problem(location_of(spec, "at"), f"{limit_key}.at",
                           f"{show(at)} is not a place in a case: input.KEY[.KEY...], output or output.KEY[.KEY...]")
            continue
        parts = tuple(at.split("."))
        declared = body.get(parts[0])
        if len(parts) > 1 and isinstance(declared, YMap) and parts[1] not in declared:
            reader.problem(location_of(spec, "at"), f"{limit_key}.at",
                           f"{show(parts[1])} is not a key of the operation's {parts[0]} (declared: {', '.join(map(str, declared))})")
            continue
        found.append(Limit(name, place, parts, written, bound, sides[0] == "max"))
    return tuple(found)


def _bound(reader: Reader, spec: YMap, side: str, key: str) -> tuple[str, int | None]:
    value = spec[side]
    if type(value) is int:
        return str(value), value
    if isinstance(value, str) and value in NAMED_BOUNDS:
        return value, NAMED_BOUNDS[value]
    reader.problem(location_of(spec, side), key,
                   f"expected an integer or one of {', '.join(NAMED_BOUNDS)}, got {type_name(value)} {show(value)}")
    return show(value), None


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
        assert table is not None  # the loop runs over it
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
