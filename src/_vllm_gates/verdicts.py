"""Verdicts per gate, milestone and row, and the check of each against the state the roadmap claims."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from _vllm_gates.exitcodes import ExitCode
from _vllm_gates.model import GateFile, Roadmap


class Verdict(str, Enum):
    """Ordered from best to worst; a group's verdict is the worst of its members."""

    PASS = "PASS"
    SKIPPED = "SKIPPED"
    WEAK = "WEAK"
    EMPTY = "EMPTY"
    INCOMPLETE = "INCOMPLETE"
    FAIL = "FAIL"
    ERROR = "ERROR"

    @property
    def severity(self) -> int:
        return list(Verdict).index(self)


def worst(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=lambda v: v.severity) if verdicts else Verdict.EMPTY


@dataclass(frozen=True)
class ItemResult:
    """The outcome of one pytest item of a gate."""

    nodeid: str
    row: str
    gate: str
    milestone: str
    kind: str  # an ItemKind value
    name: str
    outcome: str  # passed | failed | skipped | error
    checks: int = 0
    detail: str = ""
    duration: float = 0.0
    values: int = 0  # properties: examples whose values were compared
    agreed_errors: int = 0  # properties: examples where impl and oracle raised errors that agree


@dataclass(frozen=True)
class GateResult:
    row: str
    gate: str
    milestone: str
    markers: tuple[str, ...]
    verdict: Verdict
    cases_passed: int
    cases_total: int
    examples: int
    known_bad_rejected: int
    known_bad_total: int
    checks: int
    reason: str = ""
    values_compared: int = 0
    errors_agreed: int = 0
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClaimResult:
    """A milestone or row: its verdict, the state it claims, and whether the evidence backs that claim."""

    row: str
    milestone: str | None
    state: str
    verdict: Verdict
    claim_met: bool
    reason: str


@dataclass(frozen=True)
class RowReport:
    row: str
    title: str
    claim: ClaimResult
    milestones: tuple[ClaimResult, ...]
    gates: tuple[GateResult, ...]


@dataclass(frozen=True)
class RunReport:
    rows: tuple[RowReport, ...]
    items: tuple[ItemResult, ...] = field(default_factory=tuple)
    interrupted: str | None = None  # the signal that stopped the run, when one did

    @property
    def checks(self) -> int:
        return sum(g.checks for r in self.rows for g in r.gates)


def gate_verdict(items: list[ItemResult], has_known_bad: bool, missing: tuple[str, ...] = (),
                 min_value_share: float = 0.0) -> tuple[Verdict, str]:
    """ERROR > FAIL > INCOMPLETE (a declared item without a result) > EMPTY (nothing ran) > SKIPPED > WEAK > PASS."""
    if any(i.outcome == "error" for i in items):
        return Verdict.ERROR, next(i.detail for i in items if i.outcome == "error")
    if any(i.outcome == "failed" for i in items):
        failed = [i.name for i in items if i.outcome == "failed"]
        return Verdict.FAIL, "failed: " + ", ".join(failed)
    if missing:
        return Verdict.INCOMPLETE, "declared but not run here: " + ", ".join(missing)
    if not items:
        return Verdict.EMPTY, "no item of this gate was selected"
    empty = [i.name for i in items if i.kind == "properties" and i.outcome == "passed" and i.values == 0]
    if empty:
        return Verdict.EMPTY, "the properties checked nothing: no generated example gave values to compare"
    for item in items:
        if item.kind == "properties" and item.outcome == "passed" and item.checks and item.values / item.checks < min_value_share:
            return Verdict.EMPTY, (f"the properties compared values on {item.values} of {item.checks} examples, below the gate's "
                                   f"min_value_share {min_value_share:g}; the rest only agreed on errors")
    if all(i.outcome == "skipped" for i in items):
        return Verdict.SKIPPED, items[0].detail
    if any(i.outcome == "skipped" for i in items):
        return Verdict.SKIPPED, "partly skipped: " + ", ".join(i.name for i in items if i.outcome == "skipped")
    if sum(i.checks for i in items) == 0:
        return Verdict.EMPTY, "its items ran no check"
    if not has_known_bad:
        return Verdict.WEAK, "no known-bad entry: the gate has not shown it can fail"
    return Verdict.PASS, ""


def _gpu_only_skips(gates: list[GateResult]) -> bool:
    return all("gpu" in g.markers for g in gates if g.verdict is Verdict.SKIPPED)


def claim_met(state: str, verdict: Verdict, gates: list[GateResult]) -> tuple[bool, str]:
    """DONE needs PASS; PARTIAL allows gpu gates SKIPPED; no state excuses ERROR, INCOMPLETE or EMPTY."""
    if verdict in (Verdict.ERROR, Verdict.EMPTY, Verdict.INCOMPLETE):
        return False, f"{verdict.value} is never green"
    if state == "DONE" and verdict is not Verdict.PASS:
        return False, f"claims DONE but the verdict is {verdict.value}"
    if state == "PARTIAL":
        if verdict not in (Verdict.PASS, Verdict.SKIPPED):
            return False, f"claims PARTIAL but the verdict is {verdict.value}"
        if not _gpu_only_skips(gates):
            return False, "claims PARTIAL but a non-gpu gate was skipped"
    return True, ""


def build_report(roadmap: Roadmap, gate_files: list[GateFile], items: list[ItemResult],
                 broken_rows: dict[str, str] | None = None, selected_rows: list[str] | None = None,
                 selected_gates: set[tuple[str, str]] | None = None,
                 missing: dict[tuple[str, str], tuple[str, ...]] | None = None) -> RunReport:
    """Aggregate item outcomes into gate, milestone and row verdicts and check each claimed state.

    ``selected_gates`` (row, gate) limits the verdicts to the gates the run selected (a marker filter);
    None means every gate of the selected rows. ``missing`` names each gate's declared items that have no result.
    """
    broken_rows = broken_rows or {}
    missing = missing or {}
    by_gate: dict[tuple[str, str], list[ItemResult]] = {}
    for item in items:
        by_gate.setdefault((item.row, item.gate), []).append(item)
    files = {gf.row: gf for gf in gate_files}
    rows = []
    for row in roadmap.rows:
        if selected_rows is not None and row.id not in selected_rows:
            continue
        gate_results: list[GateResult] = []
        gate_file = files.get(row.id)
        for gate in gate_file.gates if gate_file else ():
            if selected_gates is not None and (row.id, gate.id) not in selected_gates:
                continue
            gate_items = by_gate.get((row.id, gate.id), [])
            not_run = missing.get((row.id, gate.id), ())
            share = gate.properties.min_value_share if gate.properties else 0.0
            verdict, reason = gate_verdict(gate_items, bool(gate.known_bad), not_run, share)
            cases = [i for i in gate_items if i.kind == "case"]
            known = [i for i in gate_items if i.kind == "known_bad"]
            gate_results.append(GateResult(
                row.id, gate.id, gate.milestone, gate.markers, verdict,
                sum(i.outcome == "passed" for i in cases), len(gate.cases),
                sum(i.checks for i in gate_items if i.kind == "properties" and i.outcome == "passed"),
                sum(i.outcome == "passed" for i in known), len(gate.known_bad),
                sum(i.checks for i in gate_items), reason,
                sum(i.values for i in gate_items if i.kind == "properties"),
                sum(i.agreed_errors for i in gate_items if i.kind == "properties"), not_run))
        row_errors = by_gate.get((row.id, "<file>"), [])
        if selected_gates is not None and not gate_results and not row_errors and row.id not in broken_rows:
            continue  # a marker filter left this row nothing to run: it is not part of this run
        milestone_claims = []
        for ms in row.milestones:
            ms_gates = [g for g in gate_results if g.milestone == ms.id]
            if selected_gates is not None and not ms_gates and not row_errors:
                continue
            verdict = Verdict.ERROR if (row_errors or row.id in broken_rows) else worst([g.verdict for g in ms_gates])
            met, why = claim_met(ms.state, verdict, ms_gates)
            if verdict is Verdict.EMPTY and not ms_gates:
                why = "no gate covers this milestone"
            milestone_claims.append(ClaimResult(row.id, ms.id, ms.state, verdict, met, why))
        if row_errors or row.id in broken_rows:
            detail = row_errors[0].detail if row_errors else broken_rows[row.id]
            row_claim = ClaimResult(row.id, None, row.state, Verdict.ERROR, False, detail or "the gate file did not load")
        elif gate_file is None:
            row_claim = ClaimResult(row.id, None, row.state, Verdict.EMPTY, False, "no gate file for this row")
        else:
            verdict = worst([m.verdict for m in milestone_claims]) if milestone_claims else Verdict.EMPTY
            met, why = claim_met(row.state, verdict, gate_results)
            if met and not all(m.claim_met for m in milestone_claims):
                met, why = False, "a milestone does not meet its claimed state"
            row_claim = ClaimResult(row.id, None, row.state, verdict, met, why)
        rows.append(RowReport(row.id, row.title, row_claim, tuple(milestone_claims), tuple(gate_results)))
    return RunReport(tuple(rows), tuple(items))


def with_unknown_rows(report: RunReport, problems: dict[str, str]) -> RunReport:
    """Gate files that name no roadmap row still get a row line, in ERROR, so nothing broken is dropped."""
    extra = tuple(RowReport(row, "(not in the roadmap)", ClaimResult(row, None, "-", Verdict.ERROR, False, message), (), ())
                  for row, message in problems.items())
    return RunReport(report.rows + extra, report.items, report.interrupted)


def exit_code(report: RunReport) -> ExitCode:
    """0 every selected row meets its claim; 130 interrupted; 3 a definition/harness ERROR; 5 nothing ran; 1 a claim not met."""
    if report.interrupted:
        return ExitCode.INTERRUPTED
    if any(r.claim.verdict is Verdict.ERROR for r in report.rows):
        return ExitCode.ERROR
    ran = [i for i in report.items if i.outcome in ("passed", "failed", "error")]
    if not report.rows or not ran:
        return ExitCode.EMPTY
    if not all(r.claim.claim_met for r in report.rows):
        return ExitCode.CLAIM_NOT_MET
    return ExitCode.OK


def interrupted(report: RunReport, signal_name: str) -> RunReport:
    """The same report, stopped by ``signal_name``: no claim of it is met."""
    def unmet(claim: ClaimResult) -> ClaimResult:
        why = f"the run was interrupted ({signal_name})" + (f"; {claim.reason}" if claim.reason else "")
        return ClaimResult(claim.row, claim.milestone, claim.state, claim.verdict, False, why)

    rows = tuple(RowReport(r.row, r.title, unmet(r.claim), tuple(unmet(m) for m in r.milestones), r.gates) for r in report.rows)
    return RunReport(rows, report.items, signal_name)
