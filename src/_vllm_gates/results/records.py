"""One gate item's record from the item to the verdict: who it is (``ItemIdentity``), what it checked (``ItemRecord``),
and how its run ended (``ItemResult``, which carries the record unchanged).

A record crosses pytest-xdist as plain data by one pair, ``ItemRecord.to_data`` / ``ItemRecord.from_data``; an item's
entry in the run report (docs/evidence.md, schema/run.schema.json) by ``ItemResult.to_report`` / ``from_report``.
A reader refuses malformed data naming the field and the value (``RecordError``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.results.outcomes import ItemOutcome, NotImplementedBy, RequirementUnmet, SkipCause


class RecordError(GatesError):
    """A record, identity or report entry whose data is malformed: names the field and its value."""


class ItemKind(str, Enum):
    """What one gate item checks."""

    CASE = "case"
    PROPERTIES = "properties"
    KNOWN_BAD = "known_bad"
    KNOWN_GOOD = "known_good"
    AUDIT = "audit"
    STRENGTH = "strength"
    DEFINITION = "definition"


def field_of(data: Mapping[str, Any], name: str, kinds: tuple[type, ...], what: str, where: str) -> Any:
    """``data[name]`` when it is one of ``kinds`` (never a bool for a number, never a negative count), else a
    RecordError naming ``where``, the field and its value."""
    if name not in data:
        raise RecordError(f"{where}: missing field {name!r}")
    value = data[name]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise RecordError(f"{where}: field {name!r} must be {what}, got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and int in kinds and value < 0:
        raise RecordError(f"{where}: field {name!r} must not be negative, got {value!r}")
    return value


def mapping_of(data: Any, where: str) -> Mapping[str, Any]:
    """``data`` when it is a mapping, else a RecordError naming ``where`` and the value."""
    if not isinstance(data, Mapping):
        raise RecordError(f"{where}: expected a mapping, got {data!r}")
    return data


def _exact_keys(data: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(data) - set(known), key=str)
    if unknown:
        raise RecordError(f"{where}: unknown field {unknown[0]!r} (value {data[unknown[0]]!r})")


@dataclass(frozen=True)
class ItemIdentity:
    """Which row, gate and milestone an item belongs to, and where it is written."""

    row: str
    gate: str
    milestone: str
    kind: ItemKind
    line: int

    def to_data(self) -> dict[str, Any]:
        return {"row": self.row, "gate": self.gate, "milestone": self.milestone, "kind": self.kind.value, "line": self.line}

    @classmethod
    def from_data(cls, data: Any, where: str = "item identity") -> ItemIdentity:
        """The identity ``to_data`` wrote; RecordError names a malformed field."""
        data = mapping_of(data, where)
        _exact_keys(data, ("row", "gate", "milestone", "kind", "line"), where)
        kind = field_of(data, "kind", (str,), "an item kind", where)
        if kind not in {k.value for k in ItemKind}:
            raise RecordError(f"{where}: field 'kind' must be one of {', '.join(k.value for k in ItemKind)}, got {kind!r}")
        row, gate, milestone = (field_of(data, name, (str,), "a string", where) for name in ("row", "gate", "milestone"))
        return cls(row, gate, milestone, ItemKind(kind), field_of(data, "line", (int,), "an integer", where))


_NUMBER = (int, float)
_OPTIONAL_MAPPING = (dict, type(None))


@dataclass(frozen=True)
class ItemRecord:
    """What a finished item checked: how many checks, and for a known-bad or the audit, what rejected it."""

    checks: int
    rejected_by: str = ""
    harness_error: bool = False
    values: int = 0  # properties: examples where impl and oracle both gave a value that was compared
    agreed_errors: int = 0  # properties: examples where both raised errors that agree
    rejected_item: str = ""  # a known-bad's or the audit's: the case (its name) or "properties" that rejected it
    tolerance_used: float | None = None  # a policy's passing comparisons: the most of its tolerance one used
    tolerance_at: Mapping[str, str] | None = None  # where: {"where": case or example, "output": path, "dtype": ...}
    excused: int = 0  # the tokens policy: near-tie positions its passing comparisons excused
    strength: Mapping[str, Any] | None = None  # the tolerance audit's finding (tolerance_audit.StrengthFinding.to_data)

    def to_data(self) -> dict[str, Any]:
        """The record as plain data (JSON-able); ``from_data`` reads it back equal."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["tolerance_at"] = None if self.tolerance_at is None else dict(self.tolerance_at)
        data["strength"] = None if self.strength is None else dict(self.strength)
        return data

    @classmethod
    def from_data(cls, data: Any, where: str = "item record") -> ItemRecord:
        """The record ``to_data`` wrote; RecordError names a missing, unknown or mistyped field and its value."""
        data = mapping_of(data, where)
        _exact_keys(data, _RECORD_FIELDS, where)
        at = field_of(data, "tolerance_at", _OPTIONAL_MAPPING, "a mapping of strings or null", where)
        if at is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in at.items()):
            raise RecordError(f"{where}: field 'tolerance_at' must map strings to strings, got {at!r}")
        return cls(checks=field_of(data, "checks", (int,), "a count", where),
                   rejected_by=field_of(data, "rejected_by", (str,), "a string", where),
                   harness_error=field_of(data, "harness_error", (bool,), "true or false", where),
                   values=field_of(data, "values", (int,), "a count", where),
                   agreed_errors=field_of(data, "agreed_errors", (int,), "a count", where),
                   rejected_item=field_of(data, "rejected_item", (str,), "a string", where),
                   tolerance_used=field_of(data, "tolerance_used", (*_NUMBER, type(None)), "a number or null", where),
                   tolerance_at=at, excused=field_of(data, "excused", (int,), "a count", where),
                   strength=field_of(data, "strength", _OPTIONAL_MAPPING, "a mapping or null", where))


_RECORD_FIELDS = tuple(f.name for f in fields(ItemRecord))
_REPORT_FIELDS = ("nodeid", "row", "gate", "milestone", "kind", "name", "outcome", "checks", "detail", "duration", "values",
                  "agreed_errors", "tolerance_used", "tolerance_at", "excused", "strength")  # the run report's order


@dataclass(frozen=True)
class ItemResult:
    """The outcome of one pytest item of a gate, with the record it left (unchanged; empty where it left none)."""

    nodeid: str
    row: str
    gate: str
    milestone: str
    kind: str  # an ItemKind value
    name: str
    outcome: ItemOutcome
    reason: str = ""  # a skip's or failure's reason as reports show it (a skip's: its cause's text)
    duration: float = 0.0
    cause: SkipCause | None = None  # why it was skipped, as data (reports show ``detail``, not this)
    record: ItemRecord = field(default_factory=lambda: ItemRecord(0))

    @classmethod
    def begun(cls, nodeid: str, identity: ItemIdentity) -> ItemResult:
        """An item whose phases have not yet reported: passed, with no record."""
        return cls(nodeid, identity.row, identity.gate, identity.milestone, identity.kind.value, nodeid.rsplit("::", 1)[-1],
                   ItemOutcome.PASSED)

    @property
    def passed(self) -> bool:
        return self.outcome == ItemOutcome.PASSED

    @property
    def detail(self) -> str:
        """What reports show: a passing known-bad's or audit's rejection, else the skip's or failure's reason."""
        return self.record.rejected_by if self.passed else self.reason

    @property
    def checks(self) -> int:
        return self.record.checks

    @property
    def values(self) -> int:
        return self.record.values

    @property
    def agreed_errors(self) -> int:
        return self.record.agreed_errors

    @property
    def tolerance_used(self) -> float | None:
        """The most of its policy's tolerance a passing comparison used; None unless the item passed."""
        return self.record.tolerance_used if self.passed else None

    @property
    def tolerance_at(self) -> Mapping[str, str] | None:
        return self.record.tolerance_at if self.passed else None

    @property
    def excused(self) -> int:
        return self.record.excused

    @property
    def strength(self) -> Mapping[str, Any] | None:
        return self.record.strength

    @property
    def not_implemented(self) -> NotImplementedBy | None:
        """Skipped because the judged implementation does not provide (all of) its gate's operation."""
        return self.cause if self.outcome == ItemOutcome.SKIPPED and isinstance(self.cause, NotImplementedBy) else None

    @property
    def requirement_unmet(self) -> bool:
        """Skipped because this machine lacks what one of its markers requires (a CUDA device)."""
        return self.outcome == ItemOutcome.SKIPPED and isinstance(self.cause, RequirementUnmet)

    def to_report(self) -> dict[str, Any]:
        """The item's entry in the run report (schema/run.schema.json): its skip cause shows as ``detail``."""
        entry = {name: getattr(self, name) for name in _REPORT_FIELDS}
        entry["outcome"] = self.outcome.value
        entry["duration"] = round(self.duration, 6)
        entry["tolerance_at"] = None if self.tolerance_at is None else dict(self.tolerance_at)
        entry["strength"] = None if self.strength is None else dict(self.strength)
        return entry

    @classmethod
    def from_report(cls, entry: Any, where: str = "item") -> ItemResult:
        """An item ``to_report`` wrote (its skip cause is not in the report: None); RecordError names a bad field.
        Reports written before ``tolerance_used``, ``tolerance_at``, ``excused`` and ``strength`` lack them."""
        entry = mapping_of(entry, where)
        _exact_keys(entry, _REPORT_FIELDS, where)
        outcome = field_of(entry, "outcome", (str,), "an outcome", where)
        if outcome not in {o.value for o in ItemOutcome}:
            raise RecordError(f"{where}: field 'outcome' must be one of {', '.join(o.value for o in ItemOutcome)}, got {outcome!r}")
        passed = outcome == ItemOutcome.PASSED.value
        detail = field_of(entry, "detail", (str,), "a string", where)
        later = {"tolerance_used": None, "tolerance_at": None, "excused": 0, "strength": None}
        record = ItemRecord.from_data(
            {**later, **{name: entry[name] for name in later if name in entry},
             **{name: entry[name] for name in ("checks", "values", "agreed_errors") if name in entry},
             "rejected_by": detail if passed else "", "harness_error": False, "rejected_item": ""}, where)
        nodeid, row, gate, milestone, kind, name = (field_of(entry, name, (str,), "a string", where)
                                                    for name in ("nodeid", "row", "gate", "milestone", "kind", "name"))
        return cls(nodeid, row, gate, milestone, kind, name, ItemOutcome(outcome), "" if passed else detail,
                   field_of(entry, "duration", _NUMBER, "a number", where), record=record)
