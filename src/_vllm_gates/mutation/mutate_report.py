"""The mutation report (`vllm-gates/mutation/1`, docs/mutation.md): its records, the kill matrix, the declared
equivalent mutants with their staleness, resuming from an earlier report, and what `gates mutate` prints.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from _vllm_gates.base.errors import GatesError
from _vllm_gates.mutation.mutate_operators import family
from _vllm_gates.results.mutation_records import MEASURED, NOT_RUN_HERE, STATUSES
from _vllm_gates.results.reports import write_atomic
from _vllm_gates.run.mutation_evidence import MUTATION_SCHEMA

EQUIVALENTS_FILE = "equivalent_mutants.yaml"


class MutationError(GatesError):
    """A mutation run that cannot go on: a row with nothing to mutate, a broken equivalents file, a judge that died."""


@dataclass(frozen=True)
class Equivalent:
    """A declared equivalent mutant (`equivalent_mutants.yaml`): no input can tell it from the implementation."""

    id: str
    reason: str
    fingerprint: str

    @property
    def file(self) -> str | None:
        """The file its id names (`ROW:FILE:LINE:OPERATOR:N`), None for an id of another form."""
        parts = self.id.split(":")
        return ":".join(parts[1:-3]) if len(parts) >= 5 else None


def load_equivalents(path: Path) -> list[Equivalent]:
    """The entries of a row's equivalent-mutant list; none when the file does not exist; MutationError naming the
    file and entry for anything else than a list of {id, reason, fingerprint} texts."""
    if not path.is_file():
        return []
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise MutationError(f"{path}: not YAML: {exc}") from None
    if document is None:
        return []
    if not isinstance(document, list):
        raise MutationError(f"{path}: expected a list of {{id, reason, fingerprint}} entries, got {type(document).__name__}")
    found = []
    for number, entry in enumerate(document, start=1):
        keys = ("id", "reason", "fingerprint")
        if not isinstance(entry, dict) or set(entry) != set(keys) or not all(isinstance(entry[k], str) and entry[k]
                                                                              for k in keys):
            raise MutationError(f"{path}: entry {number} must have exactly id, reason and fingerprint, each a "
                                f"non-empty text; got {entry!r}")
        found.append(Equivalent(entry["id"], entry["reason"], entry["fingerprint"]))
    return found


def stale_equivalents(declared: list[Equivalent], fingerprints: set[str], root: Path, files: list[str]) -> list[Equivalent]:
    """Declared entries whose mutated code no mutant of today's sources has (reported, never trusted); an entry
    naming a file of the project that this run does not mutate (the other implementation's) is not judged here."""
    return [entry for entry in declared if entry.fingerprint not in fingerprints
            and (entry.file is None or entry.file in files or not (root / entry.file).is_file())]


@dataclass(frozen=True)
class Earlier:
    """What an earlier report measured for a row: its mutants and the fingerprint of each gate they were judged by
    (mutate_incremental decides which verdicts still stand)."""

    sources_fingerprint: str
    gates_fingerprint: str
    mutants: dict[str, dict[str, Any]]  # measured ones, by id
    known_bads: list[dict[str, Any]]
    gate_fingerprints: dict[str, str] = field(default_factory=dict)  # gate id -> its fingerprint when measured

    def record(self, mutant_id: str, fingerprint: str) -> dict[str, Any] | None:
        """The earlier record of a mutant with this id and the same fingerprint (its code, function and operator)."""
        record = self.mutants.get(mutant_id)
        return record if record is not None and record.get("fingerprint") == fingerprint else None


def earlier_rows(document: Mapping[str, Any] | None) -> dict[str, Earlier]:
    """The rows an earlier mutation report (already read and its schema checked) measured; none without one."""
    found: dict[str, Earlier] = {}
    rows = document.get("rows", []) if document is not None else []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("row"), str):
            measured = {m["id"]: m for m in row.get("mutants", [])
                        if isinstance(m, dict) and m.get("status") in MEASURED and isinstance(m.get("id"), str)}
            gates = row.get("gate_fingerprints")
            found[row["row"]] = Earlier(str(row.get("sources_fingerprint")), str(row.get("gates_fingerprint")),
                                        measured, list(row.get("known_bads", [])),
                                        {str(k): str(v) for k, v in gates.items()} if isinstance(gates, dict) else {})
    return found


@dataclass
class MutationRowReport:
    """One row's part of the report, filled mutant by mutant."""

    row: str
    sources_fingerprint: str
    gates_fingerprint: str  # sha256 of the row folder's files: a changed gate measures every mutant again
    gates: list[str]
    files: list[str] = field(default_factory=list)  # the mutated files the sources fingerprint covers
    mutants: list[dict[str, Any]] = field(default_factory=list)
    known_bads: list[dict[str, Any]] = field(default_factory=list)
    stale_equivalents: list[dict[str, str]] = field(default_factory=list)
    unmutated_failures: dict[str, list[str]] = field(default_factory=dict)  # gate -> items failing with no mutant
    unjudged: int = 0  # mutants drawn but not judged: the --budget for building them was spent
    population: int = 0  # the mutants the files give, before --max-mutants draws from them (0: not recorded)
    gate_fingerprints: dict[str, str] = field(default_factory=dict)  # each gate's fingerprint (mutate_incremental)
    reused: int = 0  # mutants whose verdict an earlier report gave (not judged again)
    sampling: str = "all"  # how the mutants were chosen: all, drawn (--max-mutants) or per-line (--per-line 1)

    def counts(self) -> dict[str, int]:
        return {status: sum(1 for m in self.mutants if m["status"] == status) for status in STATUSES}

    def score(self) -> float | None:
        """killed / (generated - equivalent - not_compiling - not_run_here): the mutants this machine can judge; None
        when nothing is left to score. The not_run_here count is printed and reported beside it."""
        counts = self.counts()
        base = len(self.mutants) - counts["equivalent"] - counts["not_compiling"] - counts[NOT_RUN_HERE]
        return counts["killed"] / base if base else None

    def score_with_not_run_here(self) -> float | None:
        """killed / (generated - equivalent - not_compiling): the score if no mutant a gate that cannot run here
        imports were killed there (a bound from below, printed beside the score)."""
        counts = self.counts()
        base = len(self.mutants) - counts["equivalent"] - counts["not_compiling"]
        return counts["killed"] / base if base else None

    def standard_error(self) -> float | None:
        """One standard error of the score as an estimate of the whole population's, when the mutants are a draw
        from it (sqrt(p(1-p)/n), finite-population corrected); None when every mutant was judged or none scored."""
        score = self.score()
        counts = self.counts()
        judged = len(self.mutants) - counts["equivalent"] - counts["not_compiling"] - counts[NOT_RUN_HERE]
        if score is None or not self.population or len(self.mutants) >= self.population or judged < 2:
            return None
        correction = (self.population - len(self.mutants)) / (self.population - 1)
        return (score * (1 - score) / judged * correction) ** 0.5

    def family_counts(self) -> dict[str, dict[str, int]]:
        """Per operator family (docs/mutation.md's tables, mutate_operators.family): its mutants by status."""
        found: dict[str, dict[str, int]] = {}
        for mutant in self.mutants:
            found.setdefault(family(mutant["operator"]), dict.fromkeys(STATUSES, 0))[mutant["status"]] += 1
        return dict(sorted(found.items()))

    def kill_matrix(self) -> list[dict[str, Any]]:
        """Per gate: the mutants it killed, those no other gate killed, and whether it kills nothing unique."""
        rows = []
        for gate in self.gates:
            killed = [m for m in self.mutants if gate in m.get("killing_gates", [])]
            unique = [m for m in killed if m["killing_gates"] == [gate]]
            rows.append({"gate": gate, "killed": len(killed), "unique_kills": len(unique), "redundant": not unique})
        return rows

    def to_json(self) -> dict[str, Any]:
        counts = self.counts()
        return {"row": self.row, "files": self.files, "sources_fingerprint": self.sources_fingerprint,
                "gates_fingerprint": self.gates_fingerprint, "generated": len(self.mutants),
                "population": self.population, **counts, "score": self.score(),
                "score_standard_error": self.standard_error(),
                "score_counting_not_run_here": self.score_with_not_run_here(),
                "families": self.family_counts(), "gates": self.kill_matrix(), "mutants": self.mutants,
                "known_bads": self.known_bads, "stale_equivalents": self.stale_equivalents,
                "unmutated_failures": self.unmutated_failures, "unjudged": self.unjudged,
                "gate_fingerprints": self.gate_fingerprints, "reused": self.reused, "sampling": self.sampling}


def write_report(path: Path, meta: dict[str, Any], rows: list[MutationRowReport]) -> None:
    """The whole report, written atomically (called after each mutant, so an interrupted run keeps what it measured)."""
    document = {"schema": MUTATION_SCHEMA, **meta, "rows": [row.to_json() for row in rows]}
    write_atomic(path, json.dumps(document, indent=1) + "\n")


def summary_lines(row: MutationRowReport, seconds: float) -> list[str]:
    """The row's counts, score and throughput, then its kill matrix."""
    counts, score = row.counts(), row.score()
    shown = "n/a" if score is None else f"{score:.1%}"  # one decimal: 89.8% must never read as 90%
    error = row.standard_error()
    if error is not None:
        drawn = "one per line, " if row.sampling == "per-line" else ""
        shown += f" ± {error:.1%} (one standard error: {drawn}{len(row.mutants)} drawn of {row.population})"
    rate = f"{len(row.mutants) / seconds:.2f} mutants/s" if seconds > 0 else ""
    lines = [f"{row.row}: generated {len(row.mutants)}, killed {counts['killed']}, survived {counts['survived']}, "
             f"timed out {counts['timed_out']}, not covered {counts['not_covered']}, equivalent {counts['equivalent']}, "
             f"not compiling {counts['not_compiling']}"
             + (f", not run here {counts[NOT_RUN_HERE]} (no gate run here executed them; a gate that cannot run on "
                f"this machine imports their file)" if counts[NOT_RUN_HERE] else "") + f"; score {shown}"
             + (f" ({row.score_with_not_run_here():.1%} counting those not run here as survivors)"
                if counts[NOT_RUN_HERE] else "") + f"; {seconds:.1f} s, {rate}"
             + (f"; {row.unjudged} not judged (--budget spent)" if row.unjudged else "")
             + (f"; {row.reused} verdicts reused from the earlier report" if row.reused else "")]
    for name, by_status in row.family_counts().items():
        lines.append(f"  family {name}: {sum(by_status.values())} mutants, " + ", ".join(
            f"{status.replace('_', ' ')} {count}" for status, count in by_status.items() if count))
    ran = {gate for mutant in row.mutants for gate in mutant.get("gates_run") or []}
    for gate in row.kill_matrix():
        flag = "  (redundant: kills nothing another gate does not)" if gate["redundant"] else ""
        if gate["gate"] not in ran:
            flag = "  (ran against no mutant: it reaches none of their lines, or none of its items passes here)"
        lines.append(f"  gate {gate['gate']}: killed {gate['killed']}, unique {gate['unique_kills']}{flag}")
    for entry in row.known_bads:
        by, outcome = entry["killed_by"], entry.get("outcome")
        lines.append(f"  known-bad {entry['gate']}/{entry['name']}: " + (
            f"rejected by {by['gate']} {by['item']}" if by else "NOT rejected" if outcome == "failed" else f"{outcome}"))
    for gate_id, failing in row.unmutated_failures.items():
        lines.append(f"  gate {gate_id}: {len(failing)} item(s) fail without any mutant, never counted as kills: "
                     + ", ".join(failing))
    for stale in row.stale_equivalents:
        lines.append(f"  stale equivalent entry {stale['id']}: its mutated code no longer exists (not trusted)")
    return lines


def survivor_lines(row: MutationRowReport, gate_files: dict[str, str]) -> list[str]:
    """Each survivor: file:line, its diff, the gates that ran and passed it, and two paste-ready stubs."""
    lines = []
    for mutant in row.mutants:
        if mutant["status"] != "survived":
            continue
        ran = ", ".join(mutant["gates_run"])
        lines += [f"SURVIVED {mutant['file']}:{mutant['line']} ({mutant['operator']}), passed by: {ran}",
                  *("    " + line for line in mutant["diff"].rstrip("\n").splitlines())]
        gate = mutant["gates_run"][0] if mutant["gates_run"] else "GATE"
        lines += [f"  a case for gate {gate} ({gate_files.get(gate, 'its gate file')}, under its cases:) that the "
                  f"mutant fails:",
                  f"      kills-{mutant['file'].rsplit('/', 1)[-1].removesuffix('.py')}-{mutant['line']}:",
                  "        input: {}        # inputs on which the mutated line changes the result",
                  "        expect: null     # the oracle's answer for them",
                  f"  or, if no input can tell it from the implementation, in {EQUIVALENTS_FILE}:",
                  f"    - {{id: {json.dumps(mutant['id'])}, reason: \"WHY NO INPUT CAN TELL\", "
                  f"fingerprint: {json.dumps(mutant['fingerprint'])}}}"]
    return lines
