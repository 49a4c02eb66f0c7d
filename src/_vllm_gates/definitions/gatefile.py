"""Validate one row's gate file (gates/rows/<row>/gate.yaml) against the schema, the roadmap and the spec (docs/gate-files.md)."""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from _vllm_gates.base.errors import DefinitionError, Location, Problem
from _vllm_gates.base.fields import TARGET_PATTERN, Reader, show, type_name
from _vllm_gates.base.yamlsource import YList, YMap, file_kind, load_yaml, location_of
from _vllm_gates.definitions.agreement import disagreements
from _vllm_gates.definitions.case_tensors import CaseTensors
from _vllm_gates.definitions.config import is_absolute, outside_root
from _vllm_gates.definitions.gate_taps import read_taps
from _vllm_gates.definitions.model import BrokenGate, Case, Gate, GateFile, KnownBad, KnownGood, Operation, Properties, Raises, Roadmap, Row, TargetRef
from _vllm_gates.definitions.operations import OPERATION_NAME, load_operations, operations_path
from _vllm_gates.definitions.patterns import files_matching, pattern_parts
from _vllm_gates.definitions.roadmap import ROW_ID
from _vllm_gates.definitions.specdoc import REQUIREMENT_ID, requirements_in
from _vllm_gates.definitions.upstream_legs import ORACLE_ONLY, CaseRoute, LegParts, case_route, legs
from _vllm_gates.values.policies import TOLERANCE_POLICIES, Policy, read_policy

Known = TypeVar("Known", KnownBad, KnownGood)

GATE_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
EXCEPTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_CASE_NAMES = ("properties", "audit", "strength")

FILE_KEYS_REQUIRED = {"row", "title", "spec", "gates"}  # `gates` may be left to `parts`
FILE_KEYS_OPTIONAL = {"sources", "notes", "parts"}
PART_KEYS_REQUIRED, PART_KEYS_OPTIONAL = {"row", "gates"}, {"milestone", "notes"}  # a part file (`parts:`)
PART_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.ya?ml$")  # a file in the row's folder
GATE_KEYS_REQUIRED = {"id", "milestone", "covers", "markers"}  # and exactly one of `impl` or `operation`
GATE_KEYS_OPTIONAL = {"impl", "operation", "oracle", "build", "compare", "cases", "properties", "known_bad", "known_good",
                      "description", "timeout", "upstream", "strength", "taps"}
CASE_KEYS = {"input", "expect", "raises", "note", "upstream"}


class GateReader(Reader):
    """A Reader that also knows the row folder's package (for `.module` targets) and the configured markers."""

    def __init__(self, path: str, anchor: str | None, folder: str, markers: tuple[str, ...],
                 operations: tuple[Operation, ...] = (), operations_file: str = "", parity_marker: str | None = None):
        super().__init__(path)
        self.anchor, self.folder, self.markers, self.parity_marker = anchor, folder, markers, parity_marker
        self.default_milestone: str | None = None  # a part file's `milestone:`, for its gates that name none
        self.operations, self.operations_file = {op.name: op for op in operations}, operations_file
        self.tensors = CaseTensors(self, None, folder)  # the cases' tensors; their fixtures are read once row_dir is set

    def set_row_dir(self, row_dir: Path) -> None:
        """The row's folder on disk, where the cases' fixture files are found."""
        self.tensors = CaseTensors(self, row_dir, self.folder)


def _target(reader: GateReader, mapping: YMap, name: str, key: str) -> TargetRef | None:
    value = reader.string(mapping, name, key, TARGET_PATTERN)
    if not value:
        return None
    ref = TargetRef(value, location_of(mapping, name), reader.anchor)
    if ref.is_relative and reader.anchor is None:
        reader.problem(ref.location, key, f"relative target {value!r} needs the row folder {reader.folder!r} to be importable: "
                                          "every folder name on its path must be a Python identifier")
        return None
    return ref


def _build(reader: GateReader, gate: YMap, key: str) -> tuple[TargetRef | None, TargetRef | None]:
    if "build" not in gate:
        return None, None
    value = gate["build"]
    if isinstance(value, YMap):
        reader.keys(value, f"{key}.build", {"impl"}, {"oracle"})
        return _target(reader, value, "impl", f"{key}.build.impl"), _target(reader, value, "oracle", f"{key}.build.oracle")
    both = _target(reader, gate, "build", f"{key}.build")
    return both, both


def _raises(reader: GateReader, case: YMap, key: str) -> Raises | None:
    body = reader.mapping(case["raises"], f"{key}.raises", location_of(case, "raises"))
    if body is None:
        return None
    reader.keys(body, f"{key}.raises", {"type"}, {"match", "facts"})
    type_name_ = reader.string(body, "type", f"{key}.raises.type", EXCEPTION_NAME)
    match = reader.string(body, "match", f"{key}.raises.match") if "match" in body else None
    if match is not None:
        try:
            re.compile(match)
        except re.error as exc:
            reader.problem(location_of(body, "match"), f"{key}.raises.match", f"invalid regular expression {show(match)}: {exc}")
    facts = tuple(reader.string_list(body, "facts", f"{key}.raises.facts")[0]) if "facts" in body else None
    return Raises(type_name_, match, facts) if type_name_ else None


# a Case (a frozen dataclass) may be made by setting its fields through its __dict__ (as yamlsource makes a Location):
# a third of the cost of its __init__, for the case read without a problem
_CASE_FIELDS = ("name", "location", "input", "has_expect", "expect", "raises")
_PLAIN_CASES = (not hasattr(Case, "__slots__") and not hasattr(Case, "__post_init__")
                and tuple(Case.__dataclass_fields__) == _CASE_FIELDS)


def _plain_case(name: str, where: Location | None, data: object, has_expect: bool, expect: object) -> Case:
    """``Case(name, where, data, has_expect, expect, None)``, its fields set through its __dict__ where that is the same."""
    if not _PLAIN_CASES:
        return Case(name, where, data, has_expect, expect, None)  # type: ignore[arg-type]
    case = Case.__new__(Case)
    fields = case.__dict__
    fields["name"], fields["location"], fields["input"] = name, where, data
    fields["has_expect"], fields["expect"], fields["raises"] = has_expect, expect, None
    return case


def _cases(reader: GateReader, gate: YMap, key: str, has_oracle: bool, routes: dict[str, CaseRoute]) -> list[Case]:
    """The gate's cases; ``routes`` gets the `upstream:` of each case that has one (upstream_legs.py)."""
    if "cases" not in gate:
        return []
    cases_map = reader.mapping(gate["cases"], f"{key}.cases", location_of(gate, "cases"))
    out: list[Case] = []
    if cases_map is None:
        return out
    places, outside = cases_map.key_locations, cases_map.location
    case_name, keys = CASE_NAME.match, CASE_KEYS.issuperset
    values = reader.tensors.value  # to_plain, with each tensor spelling read as an array
    for name, body in cases_map.items():
        # the common case, read without a problem: a named mapping of known keys with `expect` (or an oracle)
        if (type(name) is str and type(body) is YMap and "raises" not in body and "upstream" not in body and keys(body)
                and case_name(name)
                and name not in RESERVED_CASE_NAMES and ("expect" in body or has_oracle)
                and ("input" not in body or type(body["input"]) is YMap)):
            expect = body.get("expect")
            case_key = f"{key}.cases.{name}"
            out.append(_plain_case(name, places.get(name, outside), values(body.get("input", {}), f"{case_key}.input"),
                                   "expect" in body,
                                   values(expect, f"{case_key}.expect") if isinstance(expect, (dict, list)) else expect))
            continue
        case_key = f"{key}.cases.{name}"
        where = location_of(cases_map, name)
        if not isinstance(name, str) or not CASE_NAME.match(name) or name in RESERVED_CASE_NAMES:
            reader.problem(where, case_key, f"case name {show(name)} must match {CASE_NAME.pattern} and not be one of {RESERVED_CASE_NAMES}")
            continue
        case = reader.mapping(body, case_key, where)
        if case is None:
            continue
        reader.keys(case, case_key, set(), CASE_KEYS)
        if "input" in case and not isinstance(case["input"], YMap):
            reader.problem(location_of(case, "input"), f"{case_key}.input",
                           f"expected a mapping of the call's arguments (omit `input` for none), got "
                           f"{type_name(case['input'])} {show(case['input'])}")
        raises = _raises(reader, case, case_key) if "raises" in case else None
        route = case_route(reader, case, case_key) if "upstream" in case else None
        if route is not None:
            routes[name] = route
        if "expect" in case and "raises" in case:
            reader.problem(where, case_key, "a case has either `expect` or `raises`, not both")
        if "expect" not in case and "raises" not in case and not (has_oracle if route is None or route.oracle_leg else True):
            reader.problem(where, case_key, "a case needs `expect` or `raises` when the gate has no `oracle`")
        out.append(Case(name, where, values(case.get("input", {}), f"{case_key}.input"), "expect" in case,
                        values(case.get("expect"), f"{case_key}.expect"), raises))
    return out


def by_convention(reader: GateReader, operation: str, attribute: str, where: Location | None) -> TargetRef:
    """A target the gate leaves to convention (docs/gating-a-port.md): ``attribute`` of the operation's own helper
    module in the row folder, `.OPERATION_NAME:attribute` (dashes as underscores)."""
    return TargetRef(f".{operation.replace('-', '_')}:{attribute.replace('-', '_')}", where or Location(reader.path, 1, 1),
                     reader.anchor)


def _properties(reader: GateReader, gate: YMap, key: str, has_oracle: bool, operation: str | None = None) -> Properties | None:
    """The gate's generated inputs; with `operation:`, `strategy` defaults to `.OPERATION:strategy`."""
    if "properties" not in gate:
        return None
    where = location_of(gate, "properties")
    body = reader.mapping(gate["properties"], f"{key}.properties", where)
    if body is None:
        return None
    conventional = operation is not None and reader.anchor is not None and "strategy" not in body
    reader.keys(body, f"{key}.properties", set() if conventional else {"strategy"}, {"strategy", "max_examples", "min_value_share"})
    if not has_oracle:
        reader.problem(where, f"{key}.properties", "properties compare impl with the oracle: the gate needs an `oracle`")
    strategy = by_convention(reader, operation, "strategy", where) if conventional and operation is not None else \
        _target(reader, body, "strategy", f"{key}.properties.strategy")
    max_examples = reader.positive_int(body, "max_examples", f"{key}.properties.max_examples", 100)
    share = body.get("min_value_share", 0.0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        reader.problem(location_of(body, "min_value_share"), f"{key}.properties.min_value_share",
                       f"expected a number in [0, 1], got {show(share)}")
        share = 0.0
    return Properties(strategy, max_examples, where, float(share)) if strategy else None


def _known(reader: GateReader, gate: YMap, key: str, field: str, make: Callable[[str, TargetRef, Location], Known],
           operation: str | None = None) -> list[Known]:
    """`name: target` entries of `known_bad:` or `known_good:` (``field``), each made by ``make``; with `operation:`,
    a list of names is `.OPERATION:name` each (dashes as underscores)."""
    if field not in gate:
        return []
    label = field.replace("_", "-")
    if isinstance(gate[field], YList) and operation is not None and reader.anchor is not None:
        return _known_by_convention(reader, gate[field], f"{key}.{field}", label, make, operation)
    body = reader.mapping(gate[field], f"{key}.{field}", location_of(gate, field))
    if body is None:
        return []
    out = []
    for name in body:
        entry_key = f"{key}.{field}.{name}"
        if not isinstance(name, str) or not CASE_NAME.match(name):
            reader.problem(location_of(body, name), entry_key, f"{label} name {show(name)} must match {CASE_NAME.pattern}")
            continue
        target = _target(reader, body, name, entry_key)
        if target:
            out.append(make(name, target, location_of(body, name)))
    return out


def _known_by_convention(reader: GateReader, names: YList, key: str, label: str,
                         make: Callable[[str, TargetRef, Location], Known], operation: str) -> list[Known]:
    out: list[Known] = []
    for index, name in enumerate(names):
        where = location_of(names, index)
        if not isinstance(name, str) or not CASE_NAME.match(name) or name in (entry.name for entry in out):
            reader.problem(where, f"{key}[{index}]", f"{label} name {show(name)} must match {CASE_NAME.pattern} "
                                                     "and be listed once")
            continue
        out.append(make(name, by_convention(reader, operation, name, where), where))
    return out


def _known_bad(reader: GateReader, gate: YMap, key: str, operation: str | None = None) -> list[KnownBad]:
    return _known(reader, gate, key, "known_bad", KnownBad, operation)


def _known_good(reader: GateReader, gate: YMap, key: str, known_bad: list[KnownBad], operation: str | None = None) -> list[KnownGood]:
    """The gate's known-goods; one that is also a known-bad, by name or by target, is a problem at its entry: the
    gate would have to both pass and reject it."""
    out = []
    for good in _known(reader, gate, key, "known_good", KnownGood, operation):
        same_name = next((bad for bad in known_bad if bad.name == good.name), None)
        same_target = next((bad for bad in known_bad if (bad.target.module, bad.target.attribute)
                            == (good.target.module, good.target.attribute)), None)
        if same_name is not None or same_target is not None:
            bad = same_name or same_target
            why = "the same name" if same_name is not None else f"the same target {good.target.module}:{good.target.attribute}"
            reader.problem(good.location, f"{key}.known_good.{good.name}",
                           f"known-good {show(good.name)} is also known-bad {show(bad.name)} ({why}, at {bad.location}): "  # type: ignore[union-attr]
                           "the gate cannot both pass and reject one implementation")
            continue
        out.append(good)
    return out


class LoadShare:
    """What the gate files of one load share, found once: resolved folders, what each spec declares, which
    `sources:` globs match no file.

    Made afresh for each load (load_project) and dropped after it, so a file changed since is read anew next time.
    A plain class, not a dataclass: it is a cache that fills, and making a dataclass costs ~1 ms at every start-up.
    """

    __slots__ = ("real", "specs", "sources")

    def __init__(self) -> None:
        self.real: dict[str, str] = {}  # a path, as str() gives it -> str(Path(it).resolve())
        self.specs: dict[tuple[Path, str], tuple[frozenset[str] | None, str | None]] = {}  # -> (declared ids, why not)
        self.sources: dict[tuple[Path, str], str | None] = {}  # a `sources:` glob -> why it is refused

    def resolve(self, path: Path) -> Path:
        """``path.resolve()``, each folder resolved once (real_path)."""
        return Path(self.real_path(str(path)))

    def real_path(self, path: str) -> str:
        """``str(Path(path).resolve())`` of a path as str() writes a Path: a name that is no symlink is joined to
        its parent's real path; anything else (a symlink, `..`, a missing file, the top) is resolved by pathlib."""
        found = self.real.get(path)
        if found is None:
            found = self.real[path] = self._real_path(path)
        return found

    def _real_path(self, path: str) -> str:
        head, name = os.path.split(path)
        if not head or not name or name in (".", "..") or head == path or os.sep != "/":
            return str(Path(path).resolve())
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return str(Path(path).resolve())
        except (OSError, ValueError):
            return str(Path(path).resolve())  # missing, or not reachable: resolved (and refused) as before
        parent = self.real_path(head)
        return f"{parent}/{name}" if parent != "/" else f"/{name}"


@dataclass(frozen=True)
class RowContext:
    """What a gate is checked against: its roadmap row and the requirement ids its spec declares."""

    row: Row | None
    declared: frozenset[str] | None
    spec: str | None


def _gate(reader: GateReader, body: YMap, key: str, context: RowContext) -> tuple[Gate | None, list[Gate]]:
    """The gate as written (its oracle leg) and the legs its `upstream:` key adds (upstream_legs.py)."""
    implied = {"milestone"} if reader.default_milestone else set()  # a part file's `milestone:` is its gates' default
    reader.keys(body, key, GATE_KEYS_REQUIRED - implied, GATE_KEYS_OPTIONAL | implied)
    gate_id = reader.string(body, "id", f"{key}.id", GATE_ID)
    milestone = reader.string(body, "milestone", f"{key}.milestone") if "milestone" in body else reader.default_milestone
    if milestone and context.row is not None and context.row.milestone(milestone) is None:
        known = ", ".join(m.id for m in context.row.milestones)
        reader.problem(location_of(body, "milestone"), f"{key}.milestone",
                       f"milestone {show(milestone)} is not a milestone of {context.row.id} (milestones: {known})")
    covers, cover_places = reader.string_list(body, "covers", f"{key}.covers", REQUIREMENT_ID, non_empty=True)
    for requirement, place in zip(covers, cover_places, strict=True):
        if context.declared is not None and requirement not in context.declared:
            reader.problem(place, f"{key}.covers", f"requirement {show(requirement)} is not declared in {context.spec}")
    markers, marker_places = reader.string_list(body, "markers", f"{key}.markers", non_empty=True)
    for marker, place in zip(markers, marker_places, strict=True):
        if marker not in reader.markers:
            reader.problem(place, f"{key}.markers", f"unknown marker {show(marker)} (accepted: {', '.join(reader.markers)})")
    oracle = _target(reader, body, "oracle", f"{key}.oracle") if "oracle" in body else None
    operation, impl, build_impl, build_oracle = _impl_side(reader, body, key)
    compare, policy = _compare(reader, body, key)
    has_oracle = "oracle" in body
    routes: dict[str, CaseRoute] = {}
    every_case = _cases(reader, body, key, has_oracle, routes)
    cases = [case for case in every_case if routes.get(case.name, ORACLE_ONLY).oracle_leg]
    if routes and "upstream" not in body:
        first = next(case for case in every_case if case.name in routes)
        reader.problem(first.location, f"{key}.cases.{first.name}.upstream", "the case names `upstream:`, but the gate has "
                                                                              "no `upstream:` reference")
    properties = _properties(reader, body, key, has_oracle, operation)
    known_bad = _known_bad(reader, body, key, operation)
    known_good = _known_good(reader, body, key, known_bad, operation)
    if not cases and properties is None:
        reader.problem(location_of(body, "cases") if "cases" in body else body.location, key,
                       "a gate needs at least one case or `properties`: otherwise it checks nothing")
    description = reader.string(body, "description", f"{key}.description") if "description" in body else None
    timeout = _timeout(reader, body, key)
    strength = _strength(reader, body, key, policy)
    taps = read_taps(reader, body, key, has_oracle, policy)
    if not (gate_id and milestone and impl and markers):
        return None, []
    gate = Gate(gate_id, body.location, milestone, tuple(covers), tuple(markers), impl, oracle, build_impl,
                build_oracle, compare, tuple(cases), properties, tuple(known_bad), description, timeout, operation,
                policy=policy, strength=strength, known_good=tuple(known_good), taps=taps)
    if "upstream" not in body:
        return gate, []
    parts = LegParts(_target, _properties, context.declared, context.spec)
    return gate, legs(reader, body, key, gate, routes, every_case, reader.parity_marker, parts)


def _compare(reader: GateReader, body: YMap, key: str) -> tuple[TargetRef | None, Policy | None]:
    """`compare:` as a target (a function of actual and expected) or a policy mapping (policies.py)."""
    if "compare" not in body:
        return None, None
    if isinstance(body["compare"], YMap):
        return None, read_policy(reader, body["compare"], f"{key}.compare")
    return _target(reader, body, "compare", f"{key}.compare"), None


def _impl_side(reader: GateReader, body: YMap, key: str) -> tuple[str | None, TargetRef | None, TargetRef | None, TargetRef | None]:
    """The gate's operation (if it names one), the Python impl and its builder (the operation's binding, or the
    gate's `impl:` and `build`), and the oracle's builder."""
    if ("impl" in body) == ("operation" in body):
        reader.problem(body.location, key, "a gate names exactly one of `impl` (a Python target) or `operation` (an operation "
                                           f"of {reader.operations_file or 'the row folder’s operations.yaml'})")
        return None, None, None, None
    if "impl" in body:
        impl = _target(reader, body, "impl", f"{key}.impl")
        build_impl, build_oracle = _build(reader, body, key)
        return None, impl, build_impl, build_oracle
    name = reader.string(body, "operation", f"{key}.operation", OPERATION_NAME)
    build = body.get("build")
    build_oracle = None
    if build is not None:
        if isinstance(build, YMap) and set(build) <= {"oracle"}:
            build_oracle = _target(reader, build, "oracle", f"{key}.build.oracle") if "oracle" in build else None
        else:
            reader.problem(location_of(body, "build"), f"{key}.build",
                           "with `operation:` the impl's builder is the operation's python binding; give only the oracle's, "
                           "as `build: {oracle: .module:function}`")
    if not name:
        return None, None, None, build_oracle
    operation = reader.operations.get(name)
    if operation is None:
        known = ", ".join(sorted(reader.operations)) or "none"
        reader.problem(location_of(body, "operation"), f"{key}.operation",
                       f"operation {show(name)} is not declared in {reader.operations_file} (declared: {known})")
        return None, None, None, build_oracle
    return name, operation.python_impl, operation.python_build, build_oracle


def _timeout(reader: GateReader, body: YMap, key: str) -> float | None:
    """`timeout:` seconds for one call of the gate's subjects, in (0, 86400]."""
    if "timeout" not in body:
        return None
    value = body["timeout"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        reader.problem(location_of(body, "timeout"), f"{key}.timeout", f"expected a number of seconds in (0, 86400], got {show(value)}")
        return None
    return float(value)


def _strength(reader: GateReader, body: YMap, key: str, policy: Policy | None) -> float | None:
    """`strength:` the noise, as a share of the expected RMS in (0, 1], that the tolerance audit adds (docs/gate-files.md,
    "The strength audit of a tolerance"); only on a gate whose `compare:` is a policy with a tolerance."""
    if "strength" not in body:
        return None
    value, where = body["strength"], location_of(body, "strength")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        hint = " (YAML reads it as text: write a number such as 0.001)" if isinstance(value, str) else ""
        reader.problem(where, f"{key}.strength", f"expected the audit's noise level as a share of the expected RMS, a "
                                                 f"number in (0, 1] such as 0.01 for 1%, got {type_name(value)} {show(value)}{hint}")
        return None
    if policy is None or policy.name not in TOLERANCE_POLICIES:
        said = f"`compare: {{policy: {policy.name}}}`" if policy is not None else \
            "a `compare:` function" if "compare" in body else "no `compare:` policy"
        reader.problem(where, f"{key}.strength", f"`strength:` sets the noise of the tolerance audit, but the gate has "
                                                 f"{said}: no tolerance to audit (policies with one: "
                                                 f"{', '.join(sorted(TOLERANCE_POLICIES))})")
        return None
    return float(value)


PEEK_BYTES = 64 * 1024  # how much of a gate file peek_row_id reads, looking for its `row:` line


def peek_row_id(path: Path) -> str:
    """The row a gate file claims to be, for reporting a file that does not load; else its stem.

    Only a regular file is opened (a FIFO would block), and only its first PEEK_BYTES are read.
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return path.stem
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            head = os.read(fd, PEEK_BYTES) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        finally:
            os.close(fd)
        for line in head.decode("utf-8", errors="replace").splitlines():
            if line.startswith("row:"):
                value = line[4:].split("#")[0].strip().strip("'\"")
                if ROW_ID.match(value):
                    return value
    except (OSError, ValueError):
        pass
    return path.stem


def row_package(folder: str) -> str | None:
    """The dotted package of a row folder (`gates/rows/tp` -> `gates.rows.tp`); None when a part is no identifier."""
    parts = [part for part in folder.split("/") if part]
    return ".".join(parts) if parts and all(part.isidentifier() for part in parts) else None


def load_gate_file(path: Path, root: Path, roadmap: Roadmap | None, markers: tuple[str, ...],
                   share: LoadShare | None = None, error_kinds: Mapping[str, str] | None = None,
                   per_gate: bool = False, parity_marker: str | None = None) -> GateFile:
    """Parse and validate a gate file; raise DefinitionError with every problem found. ``share``: what the files
    of one load share (LoadShare); without it, nothing is shared with another call. ``error_kinds``: the project's
    `[tool.vllm-gates.error-kinds]`, against which the cases' expected errors meet their operations' (agreement.py).
    ``per_gate``: problems within one gate make only that gate broken (GateFile.broken_gates; a run's collection),
    not the file. ``parity_marker``: the project's marker that requires `upstream`, carried by a gate's `upstream:` legs."""
    share = share if share is not None else LoadShare()
    shown = _shown(path, root, share)
    folder = shown.rpartition("/")[0]
    document = load_yaml(path, shown, what="gate file")  # a regular file, within the size and node limits
    package = row_package(folder)
    reader = GateReader(shown, package, folder, markers, parity_marker=parity_marker)
    reader.set_row_dir(path.parent)
    top = reader.mapping(document, "", None)
    if top is None:
        raise DefinitionError(reader.problems)
    beside_parts = {"gates"} if "parts" in top else set()  # a header with parts may keep gates of its own
    reader.keys(top, "", FILE_KEYS_REQUIRED - beside_parts, FILE_KEYS_OPTIONAL | beside_parts)
    row_id = reader.string(top, "row", "row", ROW_ID)
    ops_path = operations_path(path)
    ops_shown = f"{folder}/{ops_path.name}" if folder else ops_path.name
    operations = load_operations(ops_path, ops_shown, row_id, package)
    reader.operations, reader.operations_file = {op.name: op for op in operations}, ops_shown
    title = reader.string(top, "title", "title") or ""
    spec = reader.string(top, "spec", "spec")
    sources, source_places = reader.string_list(top, "sources", "sources")
    for index, (pattern, place) in enumerate(zip(sources, source_places, strict=True)):
        why = _source_outside(pattern) or _shared_source_unmatched(root, pattern, share)
        if why:
            reader.problem(place, f"sources[{index}]", why)
    context = _row_context(reader, top, root, roadmap, row_id, spec, share)
    gates: list[Gate] = []
    broken: list[Broken] = []  # gates with problems
    seen: dict[str, Location] = {}
    if "gates" in top:
        _read_gates(reader, top, context, seen, gates, broken)
    for part_reader, part in _parts(reader, top, path.parent, row_id, context):
        _read_gates(part_reader, part, context, seen, gates, broken)
        reader.problems.extend(part_reader.problems)
    in_gates = {id(problem) for entry in broken for problem in entry.problems}
    if all(id(problem) in in_gates for problem in reader.problems):
        # the loaded gates and operations as written: does the interface file announce what the cases ask?
        reader.problems.extend(disagreements(gates, reader.operations, ops_shown, error_kinds))
    if any(id(problem) not in in_gates for problem in reader.problems) or (broken and not per_gate):
        raise DefinitionError(reader.problems)
    assert row_id is not None and spec is not None  # required keys: missing or malformed, they raised above
    return GateFile(shown, row_id, title, spec, tuple(sources), tuple(gates), location_of(top, "row"), folder, operations,
                    _broken_gates(broken, {gate.id for gate in gates}))


@dataclass(frozen=True)
class Broken:
    """A gate with problems, as read: its index in its file's `gates:`, its body, its problems and that list."""

    index: int
    body: object
    problems: list[Problem]
    gate_list: YList
    milestone: str = ""  # its file's default milestone (a part's `milestone:`)


def _read_gates(reader: GateReader, top: YMap, context: RowContext, seen: dict[str, Location], gates: list[Gate],
                broken: list[Broken]) -> None:
    """The gates of one file's `gates:` (the row's file or one of its parts), each with the legs its `upstream:` adds;
    a gate with problems goes to ``broken``."""
    gate_list = top.get("gates")
    if not isinstance(gate_list, YList):
        reader.problem(location_of(top, "gates"), "gates", f"expected a list of gates, got {type_name(gate_list)} {show(gate_list)}")
        return
    if not gate_list:
        reader.problem(location_of(top, "gates"), "gates", "the row defines no gate")
    for index, body in enumerate(gate_list):
        key = f"gates[{index}]"
        before = len(reader.problems)
        gate_map = reader.mapping(body, key, location_of(gate_list, index))
        gate, its_legs = _gate(reader, gate_map, key, context) if gate_map is not None else (None, [])
        if gate is not None and gate.id in seen:
            first = seen[gate.id]
            at = f"line {first.line}" if first.path == reader.path else f"{first.path}:{first.line}"
            reader.problem(location_of(gate_map, "id"), f"{key}.id", f"duplicate gate id {show(gate.id)} (first at {at})")
        if len(reader.problems) > before:
            broken.append(Broken(index, body, reader.problems[before:], gate_list, reader.default_milestone or ""))
            continue
        if gate is None or gate_map is None:  # a gate is read only from a mapping
            continue
        seen[gate.id] = location_of(gate_map, "id")
        gates.append(gate)
        gates.extend(its_legs)


def _parts(reader: GateReader, top: YMap, folder: Path, row_id: str | None,
           context: RowContext) -> list[tuple[GateReader, YMap]]:
    """The row's part files (`parts:`, files in its folder, each naming the row and, for its gates, a milestone), read."""
    if "parts" not in top:
        return []
    names, places = reader.string_list(top, "parts", "parts", PART_NAME, non_empty=True)
    found = []
    for index, (name, place) in enumerate(zip(names, places, strict=True)):
        shown = f"{reader.folder}/{name}" if reader.folder else name
        if name in ("gate.yaml", "operations.yaml") or not (folder / name).is_file():
            why = "is not a file in the row's folder" if name not in ("gate.yaml", "operations.yaml") else "is not a part file"
            reader.problem(place, f"parts[{index}]", f"part {show(shown)} {why}")
            continue
        try:
            document = load_yaml(folder / name, shown, what="gate file")
        except DefinitionError as error:
            reader.problems.extend(error.problems)
            continue
        part_reader = GateReader(shown, reader.anchor, reader.folder, reader.markers, parity_marker=reader.parity_marker)
        part_reader.operations, part_reader.operations_file = reader.operations, reader.operations_file
        part_reader.set_row_dir(folder)
        part = part_reader.mapping(document, "", None)
        if part is None:
            reader.problems.extend(part_reader.problems)
            continue
        part_reader.keys(part, "", PART_KEYS_REQUIRED, PART_KEYS_OPTIONAL)
        written = part_reader.string(part, "row", "row", ROW_ID)
        if written and row_id and written != row_id:
            part_reader.problem(location_of(part, "row"), "row", f"part of row {row_id} ({reader.path}) names row {show(written)}")
        milestone = part_reader.string(part, "milestone", "milestone") if "milestone" in part else None
        if milestone and context.row is not None and context.row.milestone(milestone) is None:
            part_reader.problem(location_of(part, "milestone"), "milestone", f"milestone {show(milestone)} is not a milestone "
                                                                             f"of {context.row.id}")
        part_reader.default_milestone = milestone
        reader.problems.extend(part_reader.problems)  # the part's own problems; its gates' are added after them
        part_reader.problems = []
        found.append((part_reader, part))
    return found


def _broken_gates(broken: list[Broken], loaded: set[str]) -> tuple[BrokenGate, ...]:
    """The gates of a file that did not load, each labelled by its id, or `gates[N]` where its id is missing, malformed
    or the id of another gate."""
    found: list[BrokenGate] = []
    for entry in broken:
        index, body, problems, gate_list = entry.index, entry.body, entry.problems, entry.gate_list
        written = body.get("id") if isinstance(body, YMap) else None
        label = written if isinstance(written, str) and GATE_ID.match(written) else f"gates[{index}]"
        if label in loaded or any(other.id == label for other in found):
            label = f"gates[{index}]"
        milestone = body.get("milestone") if isinstance(body, YMap) else None
        where = body.location if isinstance(body, YMap) else location_of(gate_list, index)
        found.append(BrokenGate(label, where or problems[0].location, milestone if isinstance(milestone, str) else entry.milestone,
                                tuple(problems)))
    return tuple(found)


def _shown(path: Path, root: Path, share: LoadShare) -> str:
    """The gate file's path relative to the root; DefinitionError when it leads outside the root through a symlink."""
    try:
        real, real_root = share.real_path(str(path)), share.real_path(str(root))
        if real.startswith(real_root + "/") and real_root != "/":
            return real[len(real_root) + 1:]  # what Path.relative_to gives for these resolved paths, told faster
        return Path(real).relative_to(Path(real_root)).as_posix()
    except ValueError:
        pass
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise DefinitionError([Problem(Location(str(path), 1, 1), "", f"gate file cannot be resolved: {exc}")]) from None
    try:
        lexical = path.absolute().relative_to(root.absolute()).as_posix()
    except ValueError:
        return str(path)  # named outside the root by the caller: shown as given
    raise DefinitionError([Problem(Location(lexical, 1, 1), "", f"gate file {lexical!r} leaves the project root through a symlink "
                                                                f"(it resolves to {str(path.resolve())!r})")])


def _source_outside(pattern: str) -> str | None:
    """Why a `sources` glob is refused: absolute, or a `..` segment; None for a relative pattern inside the project."""
    body = pattern[1:] if pattern.startswith("!") else pattern
    if is_absolute(body):
        return f"source pattern {show(pattern)} is an absolute path: sources are globs relative to the project root"
    if ".." in re.split(r"[\\/]", body):
        return f"source pattern {show(pattern)} has a '..' segment: sources are globs inside the project root"
    return None


def _source_unmatched(root: Path, pattern: str) -> str | None:
    """Why a glob of `sources:` is refused: not a glob (`a**b`, empty), or an include that matches no file under the
    root (a typo, a moved folder)."""
    try:
        if pattern.startswith("!"):
            pattern_parts(pattern[1:])
            return None
        found = any(files_matching(root, pattern))
    except (ValueError, OSError) as exc:  # `**` inside a part (refused before Python 3.13), an empty pattern
        return f"source pattern {show(pattern)} is not a usable glob: {exc}"
    return None if found else f"source pattern {show(pattern)} matches no file in the project"


def _shared_source_unmatched(root: Path, pattern: str, share: LoadShare) -> str | None:
    """_source_unmatched, told once per pattern in one load (gate files often name the same folders)."""
    key = (root, pattern)
    if key not in share.sources:
        share.sources[key] = _source_unmatched(root, pattern)
    return share.sources[key]


def _spec_path(root: Path, spec: str, share: LoadShare) -> tuple[Path | None, str | None]:
    """The spec file under the root, or why it is refused (outside the root, missing, not a regular file)."""
    why = outside_root(root, spec, "spec", share.resolve)
    if why:
        return None, why
    path = root / spec
    try:
        mode = os.stat(path).st_mode  # stat, not open: a FIFO is refused without blocking
    except FileNotFoundError:
        return None, f"spec file {show(spec)} does not exist"
    if not stat.S_ISREG(mode):
        return None, f"spec file {show(spec)} is {file_kind(mode)}, not a regular file"
    return path, None


def _row_context(reader: GateReader, top: YMap, root: Path, roadmap: Roadmap | None, row_id: str | None,
                 spec: str | None, share: LoadShare) -> RowContext:
    """The row exists in the roadmap; the spec file exists and is read for its declared requirement ids."""
    row = roadmap.row(row_id) if (roadmap and row_id) else None
    if roadmap is not None and row_id and row is None:
        known = ", ".join(r.id for r in roadmap.rows)
        reader.problem(location_of(top, "row"), "row", f"row {show(row_id)} is not in {roadmap.path} (rows: {known})")
    declared: frozenset[str] | None = None
    if spec:
        key = (root, spec)
        if key not in share.specs:
            share.specs[key] = _declared(root, spec, share)
        declared, why = share.specs[key]
        if why:
            reader.problem(location_of(top, "spec"), "spec", why)
    return RowContext(row, declared, spec)


def _declared(root: Path, spec: str, share: LoadShare) -> tuple[frozenset[str] | None, str | None]:
    """The requirement ids the spec file declares, or why it cannot be told (refused, unreadable)."""
    try:
        spec_path, why = _spec_path(root, spec, share)
        if why:
            return None, why
        return (frozenset(r.id for r in requirements_in(spec_path, spec)) if spec_path is not None else None), None
    except DefinitionError as error:  # too large, not UTF-8, replaced by a FIFO: said at the `spec:` line
        return None, f"spec file {show(spec)} cannot be read: " + "; ".join(problem.message for problem in error.problems)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"spec file {show(spec)} cannot be read: {type(exc).__name__}: {exc}"
