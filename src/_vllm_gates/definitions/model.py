"""The validated shape of roadmap rows and gate files (docs/gate-files.md)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from _vllm_gates.base.errors import Location, Problem

if TYPE_CHECKING:
    from _vllm_gates.values.policies import Policy

STATES = ("INVENTORIED", "SPIKE", "READY", "ACTIVE", "GATING", "PARTIAL", "DONE", "BLOCKED")


@dataclass(frozen=True)
class TargetRef:
    """A `module:attribute` reference as written, where, and the row package a leading `.` is relative to."""

    dotted: str
    location: Location
    anchor: str | None = None

    @property
    def is_relative(self) -> bool:
        return self.dotted.startswith(".")

    @property
    def module(self) -> str:
        """The absolute module name: `.build` in row folder gates/rows/x is `gates.rows.x.build`."""
        written = self.dotted.partition(":")[0]
        if not self.is_relative:
            return written
        return f"{self.anchor}{written}" if self.anchor else written.lstrip(".")

    @property
    def attribute(self) -> str:
        return self.dotted.partition(":")[2]


@dataclass(frozen=True)
class Raises:
    """An expected exception: class name and an optional regex searched in its message."""

    type_name: str
    match: str | None
    facts: tuple[str, ...] | None = None  # what another language's message must carry; None: taken from `match`


@dataclass(frozen=True)
class Case:
    """A named case: input data, and an expected value or exception."""

    name: str
    location: Location
    input: Any
    has_expect: bool
    expect: Any
    raises: Raises | None


@dataclass(frozen=True)
class Properties:
    """Generated inputs on which impl and oracle must agree."""

    strategy: TargetRef
    max_examples: int
    location: Location
    min_value_share: float = 0.0  # the least share of examples whose values must be compared (the rest agreed on errors)


@dataclass(frozen=True)
class KnownBad:
    """A wrong implementation the gate must reject."""

    name: str
    target: TargetRef
    location: Location


@dataclass(frozen=True)
class KnownGood:
    """A legitimate implementation, other than the impl, that the gate must pass: a gate rejecting it is too tight."""

    name: str
    target: TargetRef
    location: Location


LAYER_INDEX = "{i}"  # the placeholder of a layer index in a `taps:` pattern
RANK_INDEX = "{r}"  # the placeholder of a rank in the `taps.rank` suffix


@lru_cache(maxsize=256)
def tap_pattern(pattern: str, prefix: bool = False) -> re.Pattern[str]:
    """A `taps:` pattern as a regular expression: `{i}` a layer index (captured), the rest literal; ``prefix``: it
    matches the start of a name (the `layer` pattern)."""
    literal = r"(\d+)".join(re.escape(part) for part in pattern.split(LAYER_INDEX))
    return re.compile(f"^{literal}" + ("" if prefix else "$"))


@dataclass(frozen=True)
class Taps:
    """A model gate's `taps:` (docs/gate-files.md, docs/divergence.md): the input key a teacher-forced run feeds,
    the feed points' name patterns, how a tap names its layer, the tap holding the logits (None: none), and the
    suffix naming a rank's partial of a reduced tap (None: the gate names none)."""

    feed: str
    feed_points: tuple[str, ...]
    layer: str
    logits: str | None
    location: Location
    rank: str | None = None

    def partial_name(self, reduced: str, rank: int) -> str:
        """The name of rank ``rank``'s partial of the reduced tap ``reduced`` (the `rank` suffix appended)."""
        assert self.rank is not None
        return reduced + self.rank.replace(RANK_INDEX, str(rank))

    def partial_of(self, name: str) -> tuple[str, int] | None:
        """(the reduced tap, the rank) a rank's partial is named after; None for any other tap."""
        if self.rank is None:
            return None
        before, after = (re.escape(part) for part in self.rank.split(RANK_INDEX))
        found = re.fullmatch(f"(.+){before}(\\d+){after}", name)
        return (found.group(1), int(found.group(2))) if found else None

    def is_feed_point(self, name: str) -> bool:
        return any(tap_pattern(pattern).match(name) for pattern in self.feed_points)

    def layer_of(self, name: str) -> int | None:
        """The layer index a tap name carries (by the `layer` pattern); None for a tap outside the layers."""
        found = tap_pattern(self.layer, prefix=True).match(name)
        return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Gate:
    """One gate of a row: an impl checked against cases, an oracle, known-bad stand-ins and known-good ones."""

    id: str
    location: Location
    milestone: str
    covers: tuple[str, ...]
    markers: tuple[str, ...]
    impl: TargetRef
    oracle: TargetRef | None
    build_impl: TargetRef | None
    build_oracle: TargetRef | None
    compare: TargetRef | None
    cases: tuple[Case, ...]
    properties: Properties | None
    known_bad: tuple[KnownBad, ...]
    description: str | None = None
    timeout: float | None = None  # seconds one call of this gate's subjects may take (default: call-timeout)
    operation: str | None = None  # the row's operation the impl side is (operations.yaml); None: a Python target only
    leg_of: str | None = None  # the gate whose `upstream:` leg this is (upstream_legs.py); None: a gate as written
    deviations: tuple[str, ...] = ()  # a deviation leg: the declared deviations (spec/deviations.yaml) it checks
    policy: Policy | None = None  # `compare: {policy: ...}`: how arrays in results are compared (policies.py)
    strength: float | None = None  # `strength:`: the noise (share of the RMS) the tolerance audit adds (tolerance_audit.py)
    known_good: tuple[KnownGood, ...] = ()  # `known_good:`: implementations the gate must pass (docs/gate-files.md)
    taps: Taps | None = None  # `taps:`: a model gate `gates diverge` can open (docs/divergence.md)

    def targets(self) -> list[TargetRef]:
        """Every target the gate names, for resolution at collection."""
        found = [self.impl, self.oracle, self.build_impl, self.build_oracle, self.compare]
        if self.properties:
            found.append(self.properties.strategy)
        found.extend(kb.target for kb in self.known_bad)
        found.extend(kg.target for kg in self.known_good)
        return [t for t in found if t is not None]


@dataclass(frozen=True)
class Limit:
    """A bound an operation declares (operations.yaml `limits:`, docs/gate-files.md): the place in a case it applies to
    (`input.<path>`, `output` or `output.<path>`), the bound as written and its value, and which side it bounds."""

    name: str
    location: Location
    place: tuple[str, ...]  # ("input", "params", "num_blocks"), ("output",), ("output", "num_blocks")
    written: str  # the bound as operations.yaml writes it: INT32_MAX, 0, ...
    bound: int
    is_max: bool  # `max:` (values above are beyond it) or `min:` (values below are)

    def describe(self) -> str:
        return f"{'.'.join(self.place)} {'<=' if self.is_max else '>='} {self.written}"


@dataclass(frozen=True)
class BrokenGate:
    """A gate whose definition has problems (one gate broken, not its row): its label (its id, or `gates[N]` where the id cannot be
    used), where it is written, its milestone as written ("" when unreadable) and its problems. It is ERROR; the
    file's other gates still run."""

    id: str
    location: Location
    milestone: str
    problems: tuple[Problem, ...]


@dataclass(frozen=True)
class Operation:
    """A language-neutral operation a row's gates call (operations.yaml): what it takes, returns and raises, and
    the Python port's binding (an impl callable and its builder)."""

    name: str
    location: Location
    summary: str
    input: Any
    output: Any
    errors: tuple[tuple[str, str], ...]
    python_impl: TargetRef
    python_build: TargetRef | None
    errors_location: Location | None = None  # where `errors:` is written (None: the operation declares none)
    limits: tuple[Limit, ...] = ()


@dataclass(frozen=True)
class GateFile:
    """A row's gate file after schema validation."""

    path: str
    row: str
    title: str
    spec: str
    sources: tuple[str, ...]
    gates: tuple[Gate, ...]
    row_location: Location | None = None
    folder: str = ""
    operations: tuple[Operation, ...] = ()
    broken_gates: tuple[BrokenGate, ...] = ()  # only where the file was loaded one gate at a time (a run's collection)


@dataclass(frozen=True)
class Milestone:
    """A milestone of a roadmap row with its claimed lifecycle state."""

    id: str
    title: str
    state: str
    claimed_by: str | None = None  # the implementation whose own claim the state is (None: the roadmap's; claims.py)
    mutation: float | None = None  # `mutation: 0.9`: DONE needs a mutation score at least this (docs/reports.md)


@dataclass(frozen=True)
class Row:
    """A roadmap row with its claimed state and milestones."""

    id: str
    title: str
    state: str
    milestones: tuple[Milestone, ...]
    upstream: str | None = None  # the upstream release it claims parity with (judged by its upstream gates)
    claimed_by: str | None = None  # the implementation whose own claim the state is (None: the roadmap's; claims.py)

    def milestone(self, milestone_id: str) -> Milestone | None:
        return next((m for m in self.milestones if m.id == milestone_id), None)


@dataclass(frozen=True)
class Roadmap:
    """spec/roadmap.yaml: the rows and the states they claim."""

    path: str
    rows: tuple[Row, ...]

    def row(self, row_id: str) -> Row | None:
        return next((r for r in self.rows if r.id == row_id), None)
