"""The mutation report's records (`vllm-gates/mutation/1`, docs/mutation.md): each mutant's verdict, the gate that
killed it, a known-bad's verdict, a row, and the report; each written by one ``to_data`` and read by one
``from_data`` that names a malformed field and its value (``RecordError``).

A reader takes what every version of the report wrote: fields added later (``killing_gates``, ``not_run_here``,
``files``, ...) take their empty value when absent, and fields it does not know are left to the tools that do.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from _vllm_gates.results.records import RecordError, field_of, mapping_of

NOT_RUN_HERE = "not_run_here"  # only gates that cannot run on this machine (a requirement unmet) may reach it
STATUSES = ("killed", "survived", "timed_out", "not_covered", "equivalent", "not_compiling", NOT_RUN_HERE)
MEASURED = frozenset({"killed", "survived", "timed_out", "not_covered", "not_compiling"})  # what a rerun may reuse
KNOWN_BAD_OUTCOMES = ("passed", "failed", "skipped", "error")  # the known-bad item's outcome (outcomes.ItemOutcome)

_TEXT = (str,)
_COUNT = (int,)
_NUMBER = (int, float)


def _texts(data: Mapping[str, Any], name: str, where: str, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """A list of texts; ``default`` where the field is absent (None: it is required)."""
    if name not in data and default is not None:
        return default
    value = field_of(data, name, (list, tuple), "a list of texts", where)
    if not all(isinstance(v, str) for v in value):
        raise RecordError(f"{where}: field {name!r} must be a list of texts, got {value!r}")
    return tuple(value)


def _optional(data: Mapping[str, Any], name: str, kinds: tuple[type, ...], what: str, where: str, default: Any) -> Any:
    return field_of(data, name, kinds, what, where) if name in data else default


def _one_of(data: Mapping[str, Any], name: str, allowed: tuple[str, ...], where: str) -> str:
    value = field_of(data, name, _TEXT, "a text", where)
    if value not in allowed:
        raise RecordError(f"{where}: field {name!r} must be one of {', '.join(allowed)}, got {value!r}")
    return value


@dataclass(frozen=True)
class Kill:
    """The gate and item that rejected a mutant or a known-bad first, with the item's failure (cut)."""

    gate: str
    item: str
    detail: str = ""

    def to_data(self) -> dict[str, str]:
        return {"gate": self.gate, "item": self.item, "detail": self.detail}

    @classmethod
    def from_data(cls, data: Any, where: str) -> Kill | None:
        if data is None:
            return None
        data = mapping_of(data, where)
        return cls(field_of(data, "gate", _TEXT, "a text", where), field_of(data, "item", _TEXT, "a text", where),
                   _optional(data, "detail", _TEXT, "a text", where, ""))


@dataclass(frozen=True)
class MutantVerdict:
    """What the gates made of one mutant: its status, who killed it, the gates that failed and that ran on it; why it
    was not run here or does not compile (``detail``); how long it took (``seconds``, where measured)."""

    status: str  # one of STATUSES
    killed_by: Kill | None = None
    killing_gates: tuple[str, ...] = ()
    gates_run: tuple[str, ...] = ()
    detail: str | None = None
    seconds: float | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "killed_by": None if self.killed_by is None else self.killed_by.to_data(),
                                "killing_gates": list(self.killing_gates), "gates_run": list(self.gates_run)}
        if self.detail is not None:
            data["detail"] = self.detail
        if self.seconds is not None:
            data["seconds"] = self.seconds
        return data

    @classmethod
    def from_data(cls, data: Any, where: str = "mutant verdict") -> MutantVerdict:
        data = mapping_of(data, where)
        killed_by = Kill.from_data(data.get("killed_by"), f"{where}: killed_by")
        status = _one_of(data, "status", STATUSES, where)
        if (status == "killed") != (killed_by is not None):
            raise RecordError(f"{where}: field 'killed_by' is {data.get('killed_by')!r} for status {status!r}")
        return cls(status, killed_by, _texts(data, "killing_gates", where, ()), _texts(data, "gates_run", where, ()),
                   _optional(data, "detail", (str, type(None)), "a text", where, None),
                   _optional(data, "seconds", (*_NUMBER, type(None)), "a number", where, None))


@dataclass(frozen=True)
class MutantEntry:
    """One mutant in the report: where it is, its diff and fingerprint, and its verdict."""

    id: str
    file: str
    line: int
    operator: str
    diff: str
    fingerprint: str
    verdict: MutantVerdict

    def to_data(self) -> dict[str, Any]:
        return {"id": self.id, "file": self.file, "line": self.line, "operator": self.operator, "diff": self.diff,
                "fingerprint": self.fingerprint, **self.verdict.to_data()}

    @classmethod
    def from_data(cls, data: Any, where: str) -> MutantEntry:
        data = mapping_of(data, where)
        ident, file = (field_of(data, name, _TEXT, "a text", where) for name in ("id", "file"))
        operator, diff, fingerprint = (field_of(data, name, _TEXT, "a text", where) for name in ("operator", "diff", "fingerprint"))
        return cls(ident, file, field_of(data, "line", _COUNT, "a line number", where), operator, diff, fingerprint,
                   MutantVerdict.from_data(data, where))


@dataclass(frozen=True)
class KnownBadVerdict:
    """A known-bad item in the unmutated first pass: its outcome and the gate and item that rejected it."""

    gate: str
    name: str
    outcome: str | None  # one of KNOWN_BAD_OUTCOMES; None in reports written before it was recorded
    killed_by: Kill | None

    def to_data(self) -> dict[str, Any]:
        return {"gate": self.gate, "name": self.name, "outcome": self.outcome,
                "killed_by": None if self.killed_by is None else self.killed_by.to_data()}

    @classmethod
    def from_data(cls, data: Any, where: str) -> KnownBadVerdict:
        data = mapping_of(data, where)
        outcome = _one_of(data, "outcome", KNOWN_BAD_OUTCOMES, where) if data.get("outcome") is not None else None
        return cls(field_of(data, "gate", _TEXT, "a text", where), field_of(data, "name", _TEXT, "a text", where), outcome,
                   Kill.from_data(data.get("killed_by"), f"{where}: killed_by"))


@dataclass(frozen=True)
class GateKills:
    """One gate's column of the kill matrix."""

    gate: str
    killed: int
    unique_kills: int
    redundant: bool

    def to_data(self) -> dict[str, Any]:
        return {"gate": self.gate, "killed": self.killed, "unique_kills": self.unique_kills, "redundant": self.redundant}

    @classmethod
    def from_data(cls, data: Any, where: str) -> GateKills:
        data = mapping_of(data, where)
        return cls(field_of(data, "gate", _TEXT, "a text", where), field_of(data, "killed", _COUNT, "a count", where),
                   field_of(data, "unique_kills", _COUNT, "a count", where), field_of(data, "redundant", (bool,), "true or false", where))


@dataclass(frozen=True)
class MutationRow:
    """One row as a mutation report records it (mutate_report.RowReport.to_json writes it)."""

    row: str
    sources_fingerprint: str
    gates_fingerprint: str  # "" in reports written before it was recorded
    files: tuple[str, ...]  # the mutated files; in reports before it was recorded, those its mutants name
    generated: int
    counts: Mapping[str, int]  # by status (STATUSES); 0 for a status the report predates
    score: float | None
    gates: tuple[GateKills, ...]
    mutants: tuple[MutantEntry, ...]
    known_bads: tuple[KnownBadVerdict, ...]
    stale_equivalents: tuple[Mapping[str, str], ...] = ()
    unjudged: int = 0

    @property
    def counted(self) -> int:
        """generated - equivalent - not_compiling - not_run_here: the score's denominator."""
        return self.generated - self.counts["equivalent"] - self.counts["not_compiling"] - self.counts[NOT_RUN_HERE]

    def measured(self) -> dict[str, MutantEntry]:
        """The mutants a rerun may reuse (MEASURED), by id."""
        return {m.id: m for m in self.mutants if m.verdict.status in MEASURED}

    @classmethod
    def from_data(cls, data: Any, where: str) -> MutationRow:
        data = mapping_of(data, where)
        name = field_of(data, "row", _TEXT, "a text", where)
        fingerprint = field_of(data, "sources_fingerprint", _TEXT, "a text", where)
        mutants = tuple(MutantEntry.from_data(m, f"{where}: mutants[{i}]")
                        for i, m in enumerate(field_of(data, "mutants", (list,), "a list", where) if "mutants" in data else ()))
        counts = {status: _optional(data, status, _COUNT, "a count", where, 0) for status in STATUSES}
        for status in ("killed", "equivalent", "not_compiling"):
            field_of(data, status, _COUNT, "a count", where)  # every report has these
        stale = _optional(data, "stale_equivalents", (list,), "a list", where, [])
        return cls(name, fingerprint, _optional(data, "gates_fingerprint", _TEXT, "a text", where, ""),
                   _texts(data, "files", where, tuple(sorted({m.file for m in mutants}))),
                   field_of(data, "generated", _COUNT, "a count", where), counts,
                   field_of(data, "score", (*_NUMBER, type(None)), "a number or null", where),
                   tuple(GateKills.from_data(g, f"{where}: gates[{i}]")
                         for i, g in enumerate(_optional(data, "gates", (list,), "a list", where, []))),
                   mutants,
                   tuple(KnownBadVerdict.from_data(k, f"{where}: known_bads[{i}]")
                         for i, k in enumerate(_optional(data, "known_bads", (list,), "a list", where, []))),
                   tuple(mapping_of(s, f"{where}: stale_equivalents[{i}]") for i, s in enumerate(stale)),
                   _optional(data, "unjudged", _COUNT, "a count", where, 0))


@dataclass(frozen=True)
class MutationReport:
    """A whole mutation report: what the run was (``meta``: the top-level fields) and its rows."""

    meta: Mapping[str, Any]
    rows: tuple[MutationRow, ...] = field(default_factory=tuple)

    @property
    def families(self) -> tuple[str, ...]:
        """The operator families it was limited to (`gates mutate --family`); () for all."""
        return tuple(map(str, self.meta.get("families") or ()))

    @classmethod
    def from_data(cls, document: Any, where: str = "mutation report") -> MutationReport:
        document = mapping_of(document, where)
        rows = field_of(document, "rows", (list,), "a list", where)
        return cls({k: v for k, v in document.items() if k != "rows"},
                   tuple(MutationRow.from_data(row, f"{where}: rows[{i}]") for i, row in enumerate(rows)))
