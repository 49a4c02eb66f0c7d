"""A gate's `upstream:` key (docs/gate-files.md, "Upstream parity"): the pinned upstream release as a second reference beside `oracle:`.

The gate's cases and properties are checked against its oracle (the oracle leg, the gate itself) and, for the cases
that say `upstream:`, against upstream (the parity leg, gate `ID:upstream`) or against a declared deviation's
as-declared reference (a deviation leg, gate `ID:LEG`). Each leg is a gate of its own that carries the project's
upstream marker, so it has its own verdict, is skipped where upstream is not installed, and judges the row's
`upstream:` parity claim (docs/gate-files.md, "Upstream parity").
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from _vllm_gates.base.fields import TARGET_PATTERN, Reader, show, type_name
from _vllm_gates.base.yamlsource import YList, YMap, location_of
from _vllm_gates.definitions.model import Case, Gate, KnownBad, Properties, TargetRef
from _vllm_gates.definitions.specdoc import REQUIREMENT_ID

PARITY_LEG = "upstream"  # the parity leg's name: gate `ID:upstream`
LEG_KEYS = {"build", "properties", "known_bad", "covers", "description"}  # beside the required `oracle`
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")  # a deviation id (spec/deviations.yaml) or a leg's name


@dataclass(frozen=True)
class CaseRoute:
    """Where a case with `upstream:` runs: on the oracle leg too (unless `only`), and on the parity leg or on the
    deviation leg that checks ``deviation``; ``by_reference``: on the parity leg without its `expect`/`raises`, so the
    impl is judged by the upstream reference alone (a case that expects an error is otherwise never sent to it)."""

    oracle_leg: bool
    deviation: str | None = None
    by_reference: bool = False


ORACLE_ONLY = CaseRoute(True)


def leg_id(gate_id: str, leg: str) -> str:
    """A leg's gate id: the gate's id and the leg's name joined by a colon, which no gate id has (and a dot would
    split where the engine splits `gate ID.role` keys)."""
    return f"{gate_id}:{leg}"


def case_route(reader: Reader, case: YMap, key: str) -> CaseRoute | None:
    """A case's `upstream:`: `also`, `also-by-reference`, `only`, `{deviation: ID}` or `{deviation: ID, only: true}`."""
    value, where = case["upstream"], location_of(case, "upstream")
    if value in ("also", "only", "also-by-reference"):
        if value == "also-by-reference" and "expect" not in case and "raises" not in case:
            reader.problem(where, f"{key}.upstream", "`also-by-reference` drops the case's `expect`/`raises` on the "
                                                     "parity leg, but it has neither: write `also`")
        return CaseRoute(value != "only", by_reference=value == "also-by-reference")
    if isinstance(value, YMap):
        reader.keys(value, f"{key}.upstream", {"deviation"}, {"only"})
        deviation = value.get("deviation")
        only = value.get("only", False)
        if not isinstance(only, bool):
            reader.problem(location_of(value, "only"), f"{key}.upstream.only", f"expected true or false, got {show(only)}")
        if not isinstance(deviation, str) or not NAME.match(deviation):
            if "deviation" in value:
                reader.problem(location_of(value, "deviation"), f"{key}.upstream.deviation",
                               f"expected the id of a deviation of spec/deviations.yaml, got {show(deviation)}")
            return None
        return CaseRoute(not only, deviation)
    reader.problem(where, f"{key}.upstream", "expected `also` (checked against upstream too), `also-by-reference` "
                                             "(against upstream too, without the case's expect or raises), `only` "
                                             "(against upstream alone) or `{deviation: ID}` (against a declared "
                                             "deviation), got "
                                             f"{type_name(value)} {show(value)}")
    return None


@dataclass(frozen=True)
class LegParts:
    """The gate loader's own readers, handed to the legs: of a target, and of a `properties:` mapping."""

    # (reader, mapping, name, key); the reader is the gate loader's GateReader, a Reader this module does not import
    target: Callable[..., TargetRef | None]
    properties: Callable[..., Properties | None]  # (reader, mapping holding it, key, has_oracle)
    requirements: frozenset[str] | None = None  # the ids the row's spec declares (None: not known), for `covers`
    spec: str | None = None  # the spec file, as the gate file names it


def legs(reader: Reader, body: YMap, key: str, gate: Gate, routes: dict[str, CaseRoute], cases: list[Case],
         parity_marker: str | None, parts: LegParts) -> list[Gate]:
    """The gate's parity leg and deviation legs from its `upstream:` key, each with the cases routed to it."""
    where = location_of(body, "upstream")
    if parity_marker is None:
        reader.problem(where, f"{key}.upstream", "no marker of [tool.vllm-gates.markers] requires `upstream`: add one "
                                                 "(e.g. upstream = { requires = \"upstream\" }) to judge upstream parity")
        return []
    value = body["upstream"]
    spec = value if isinstance(value, YMap) else None
    if spec is None and not (isinstance(value, str) and TARGET_PATTERN.match(value)):
        reader.problem(where, f"{key}.upstream", f"expected a target (module:attribute) or a mapping with `oracle`, got "
                                                 f"{type_name(value)} {show(value)}")
        return []
    declared = spec.get("deviations") if spec is not None else None
    if spec is not None:
        reader.keys(spec, f"{key}.upstream", {"oracle"}, LEG_KEYS | {"deviations"})
    leg_of_deviation: dict[str, str] = {}
    found: list[Gate] = []
    on_parity = [replace(c, has_expect=False, expect=None, raises=None) if routes[c.name].by_reference else c
                 for c in cases if c.name in routes and routes[c.name].deviation is None]
    parity = _leg(reader, spec if spec is not None else body, "oracle" if spec is not None else "upstream",
                  f"{key}.upstream", gate, PARITY_LEG, on_parity, parity_marker, parts, ())
    if parity is not None:
        found.append(parity)
    if declared is not None:
        table = reader.mapping(declared, f"{key}.upstream.deviations", location_of(spec, "deviations"))
        for name, leg_body in (table or {}).items():
            leg_key = f"{key}.upstream.deviations.{name}"
            if not isinstance(name, str) or not NAME.match(name) or name == PARITY_LEG:
                reader.problem(location_of(table, name), leg_key, f"leg name {show(name)} must be lowercase letters, "
                                                                  f"digits and dashes, and not {PARITY_LEG!r}")
                continue
            leg_map = reader.mapping(leg_body, leg_key, location_of(table, name))
            if leg_map is None:
                continue
            reader.keys(leg_map, leg_key, {"oracle", "checks"}, LEG_KEYS)
            checks, places = reader.string_list(leg_map, "checks", f"{leg_key}.checks", non_empty=True)
            for deviation, place in zip(checks, places, strict=True):
                if deviation in leg_of_deviation:
                    reader.problem(place, f"{leg_key}.checks", f"deviation {show(deviation)} is already checked by leg "
                                                               f"{show(leg_of_deviation[deviation])}")
                leg_of_deviation.setdefault(deviation, name)
            mine = [c for c in cases if c.name in routes and routes[c.name].deviation in checks]
            leg = _leg(reader, leg_map, "oracle", leg_key, gate, name, mine, parity_marker, parts, tuple(checks))
            if leg is not None:
                found.append(leg)
    for case in cases:
        route = routes.get(case.name)
        if route is not None and route.deviation is not None and route.deviation not in leg_of_deviation:
            reader.problem(case.location, f"{key}.cases.{case.name}.upstream.deviation",
                           f"no leg under `upstream.deviations` checks deviation {show(route.deviation)}"
                           + (f" (checked: {', '.join(sorted(leg_of_deviation))})" if leg_of_deviation else ""))
    return found


def _leg(reader: Reader, spec: YMap, oracle_key: str, key: str, gate: Gate, name: str, cases: list[Case],
         parity_marker: str, parts: LegParts, checks: tuple[str, ...]) -> Gate | None:
    """One leg: the gate's impl against ``spec``'s oracle on the routed cases and the leg's own properties."""
    oracle = parts.target(reader, spec, oracle_key, f"{key}.{oracle_key}")
    build = parts.target(reader, spec, "build", f"{key}.build") if "build" in spec and oracle_key == "oracle" else None
    properties = _properties(reader, spec, key, gate, parts) if oracle_key == "oracle" else None
    known_bad = _known_bad(reader, spec, key, gate, parts) if oracle_key == "oracle" else ()
    covers = gate.covers
    if oracle_key == "oracle" and "covers" in spec:
        written, places = reader.string_list(spec, "covers", f"{key}.covers", REQUIREMENT_ID, non_empty=True)
        for requirement, place in zip(written, places, strict=True):
            if parts.requirements is not None and requirement not in parts.requirements:
                reader.problem(place, f"{key}.covers", f"requirement {show(requirement)} is not declared in {parts.spec}")
        covers = tuple(written) or covers
    if not cases and properties is None:
        reader.problem(location_of(spec, oracle_key), key, f"the {name} leg checks nothing: no case names it "
                                                           "(`upstream:` on a case) and it has no `properties`")
        return None
    description = reader.string(spec, "description", f"{key}.description") if oracle_key == "oracle" else None
    if oracle is None:
        return None
    return replace(gate, id=leg_id(gate.id, name), location=location_of(spec, oracle_key) or gate.location, covers=covers,
                   markers=(parity_marker,), oracle=oracle, build_oracle=build, compare=None, cases=tuple(cases),
                   properties=properties, known_bad=tuple(known_bad), description=description, leg_of=gate.id,
                   deviations=checks, known_good=())  # a leg's known-goods would be judged against upstream: none


def _properties(reader: Reader, spec: YMap, key: str, gate: Gate, parts: LegParts) -> Properties | None:
    """The leg's generated inputs; `strategy` (and with it `max_examples` and `min_value_share`) default to the gate's."""
    if "properties" not in spec:
        return None
    body = spec["properties"]
    if isinstance(body, YMap) and "strategy" not in body and gate.properties is not None:
        where = location_of(spec, "properties")
        reader.keys(body, f"{key}.properties", set(), {"max_examples", "min_value_share"})
        share = body.get("min_value_share", gate.properties.min_value_share)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            reader.problem(location_of(body, "min_value_share"), f"{key}.properties.min_value_share",
                           f"expected a number in [0, 1], got {show(share)}")
            share = 0.0
        max_examples = reader.positive_int(body, "max_examples", f"{key}.properties.max_examples", gate.properties.max_examples)
        return Properties(gate.properties.strategy, max_examples, where or gate.properties.location, float(share))
    return parts.properties(reader, spec, key, True)


def _known_bad(reader: Reader, spec: YMap, key: str, gate: Gate, parts: LegParts) -> list[KnownBad]:
    """The leg's known-bads: a list whose entries name one of the gate's own (`tp-outermost`) or give a new one
    (`{name: .module:attr}`)."""
    if "known_bad" not in spec:
        return []
    value, where = spec["known_bad"], location_of(spec, "known_bad")
    if not isinstance(value, YList):
        reader.problem(where, f"{key}.known_bad", f"expected a list of the gate's known-bad names or {{name: target}} "
                                                  f"entries, got {type_name(value)} {show(value)}")
        return []
    own = {kb.name: kb for kb in gate.known_bad}
    out: list[KnownBad] = []
    for index, entry in enumerate(value):
        entry_key, entry_where = f"{key}.known_bad[{index}]", location_of(value, index)
        if isinstance(entry, str):
            if entry not in own:
                reader.problem(entry_where, entry_key, f"{show(entry)} is not a known-bad of gate {gate.id} "
                                                       f"(its known-bads: {', '.join(own) or 'none'})")
                continue
            out.append(replace(own[entry], location=entry_where or own[entry].location))
        elif isinstance(entry, YMap) and len(entry) == 1:
            name = next(iter(entry))
            target = parts.target(reader, entry, name, f"{entry_key}.{name}") if isinstance(name, str) else None
            if target is not None:
                out.append(KnownBad(name, target, location_of(entry, name)))
            elif not isinstance(name, str):
                reader.problem(entry_where, entry_key, f"known-bad name {show(name)} must be text")
        else:
            reader.problem(entry_where, entry_key, f"expected a known-bad name of gate {gate.id} or {{name: target}}, "
                                                   f"got {type_name(entry)} {show(entry)}")
    names = [kb.name for kb in out]
    for name in {n for n in names if names.count(n) > 1}:
        reader.problem(where, f"{key}.known_bad", f"duplicate known-bad {show(name)}")
    return out
