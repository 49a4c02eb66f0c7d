"""Verdicts per gate, milestone and row, and the check of each against the state the roadmap claims."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from _vllm_gates.definitions.model import BrokenGate, Gate, GateFile, Roadmap
from _vllm_gates.results.outcomes import ItemOutcome, OperationCount
from _vllm_gates.results.records import ItemResult

MILESTONE_UNMET = "a milestone does not meet its claimed state"  # a row's claim, when one of its milestones' is not met


class Verdict(str, Enum):
    """Ordered from best to worst; a group's verdict is the worst of its members."""

    PASS = "PASS"
    SKIPPED = "SKIPPED"
    UNPROVEN = "UNPROVEN"  # not executed in this run, and no usable evidence for it
    NOT_IMPLEMENTED = "NOT-IMPLEMENTED"  # the judged implementation does not provide the gate's operation
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
    executed: bool = True  # its items ran in this run
    run_verdict: str = ""  # what its items said in this run, before evidence and the simulated-device rule ("": not executed)
    run_reason: str = ""
    basis: tuple[str, ...] = ()  # what the verdict rests on: "this run", and evidence files with their devices
    fingerprint: str = ""
    inputs: tuple[str, ...] = ()
    device: str = ""
    simulated: bool = False
    partial: bool = False  # a partial selection ran only some of its items: judged on those, never evidence (docs/evidence.md §1)
    leg_of: str = ""  # the gate whose `upstream:` parity or deviation leg this is ("": a gate as written)
    tolerance_used: float | None = None  # the most of its policy's tolerance its passing cases and examples used (docs/numeric-gates.md §4)
    tolerance_at: Mapping[str, str] | None = None  # where the most was used (the item's tolerance_at)
    excused: int = 0  # the tokens policy: near-tie positions its cases and examples excused
    known_good_passed: int = 0  # its known-goods the gate passed (one it rejects makes it ERROR, TOO TIGHT)
    known_good_total: int = 0


@dataclass(frozen=True)
class ClaimResult:
    """A milestone or row: its verdict, the state it claims, and whether the evidence backs that claim."""

    row: str
    milestone: str | None
    state: str
    verdict: Verdict
    claim_met: bool
    reason: str
    claimed_by: str | None = None  # the implementation whose own claim ``state`` is (None: the roadmap's)
    judged: bool = True  # False: the run selected part of the row, so it judges no claim (partial.py)

    @property
    def claimed(self) -> str:
        """The claimed state as reports show it, naming the implementation where the claim is its own."""
        return f"{self.state} ({self.claimed_by}'s claim)" if self.claimed_by else self.state


@dataclass(frozen=True)
class ParityResult:
    """A row's claim of parity with the pinned upstream release, judged by its upstream gates alone: met (True),
    not met (False), or not checked here (None: upstream is not installed, or the run did not select its gates)."""

    claimed: str
    verdict: Verdict
    met: bool | None
    reason: str
    gates: tuple[str, ...] = ()


@dataclass(frozen=True)
class RowReport:
    row: str
    title: str
    claim: ClaimResult
    milestones: tuple[ClaimResult, ...]
    gates: tuple[GateResult, ...]
    parity: ParityResult | None = None
    operations: OperationCount | None = None  # how many of the row's operations the judged implementation answers


@dataclass(frozen=True)
class RunReport:
    rows: tuple[RowReport, ...]
    items: tuple[ItemResult, ...] = field(default_factory=tuple)
    interrupted: str | None = None  # the signal that stopped the run, when one did
    evidence_offered: bool = False  # evidence files were given: a run that executed nothing still judges on them
    partial: bool = False  # the run selected part of a row: only the selected gates, no claim judged (partial.py)

    @property
    def checks(self) -> int:
        return sum(g.checks for r in self.rows for g in r.gates)


def gate_verdict(items: list[ItemResult], has_known_bad: bool, missing: tuple[str, ...] = (),
                 min_value_share: float = 0.0) -> tuple[Verdict, str]:
    """ERROR > FAIL > INCOMPLETE (a declared item without a result) > EMPTY (nothing ran) > SKIPPED > WEAK > PASS."""
    if any(i.outcome == ItemOutcome.ERROR for i in items):
        return Verdict.ERROR, next(i.detail for i in items if i.outcome == ItemOutcome.ERROR)
    if any(i.outcome == ItemOutcome.FAILED for i in items):
        failed = [i.name for i in items if i.outcome == ItemOutcome.FAILED]
        return Verdict.FAIL, "failed: " + ", ".join(failed)
    if missing:
        return Verdict.INCOMPLETE, "declared but not run here: " + ", ".join(missing)
    if not items:
        return Verdict.EMPTY, "no item of this gate was selected"
    empty = [i.name for i in items if i.kind == "properties" and i.outcome == ItemOutcome.PASSED and i.values == 0]
    if empty:
        return Verdict.EMPTY, "the properties checked nothing: no generated example gave values to compare"
    for item in items:
        if item.kind == "properties" and item.outcome == ItemOutcome.PASSED and item.checks and item.values / item.checks < min_value_share:
            return Verdict.EMPTY, (f"the properties compared values on {item.values} of {item.checks} examples, below the gate's "
                                   f"min_value_share {min_value_share:g}; the rest only agreed on errors")
    absent = [i for i in items if i.not_implemented is not None]
    if absent:
        return Verdict.NOT_IMPLEMENTED, _not_implemented_reason(absent, items)
    if all(i.outcome == ItemOutcome.SKIPPED for i in items):
        return Verdict.SKIPPED, items[0].detail
    if any(i.outcome == ItemOutcome.SKIPPED for i in items):
        return Verdict.SKIPPED, "partly skipped: " + ", ".join(i.name for i in items if i.outcome == ItemOutcome.SKIPPED)
    if sum(i.checks for i in items) == 0:
        return Verdict.EMPTY, "its items ran no check"
    if not has_known_bad:
        return Verdict.WEAK, "no known-bad entry: the gate has not shown it can fail"
    return Verdict.PASS, ""


def _not_implemented_reason(absent: list[ItemResult], items: list[ItemResult]) -> str:
    """One reason for the gate's items the implementation did not implement: the operation's absence as it was
    given, or how many of the cases (the first one's why) and of the generated examples (README, "Verdicts")."""
    causes = [i.not_implemented for i in absent]
    if len(set(causes)) == 1 and len(absent) == sum(i.kind in ("case", "properties") for i in items):
        return causes[0].text()  # type: ignore[union-attr]  # the whole operation: one reason for all
    cases = [i for i in absent if i.kind == "case"]
    parts = [f"{len(cases)} of {sum(i.kind == 'case' for i in items)} cases (first {cases[0].name}: "
             f"{cases[0].not_implemented.why})"] if cases else []  # type: ignore[union-attr]
    parts += [i.not_implemented.why for i in absent if i.kind == "properties"]  # type: ignore[union-attr]
    return causes[0].but("; ".join(parts)).text()  # type: ignore[union-attr]


def _skipped_or_unproven(gates: list[GateResult], device_markers: frozenset[str]) -> list[str]:
    """The gates skipped or not proven that carry no marker requiring a device (a PARTIAL claim cannot excuse them)."""
    return [g.gate for g in gates if g.verdict in (Verdict.SKIPPED, Verdict.UNPROVEN) and not device_markers & set(g.markers)]


def _unproven(gates: list[GateResult]) -> str:
    return ", ".join(g.gate for g in gates if g.verdict is Verdict.UNPROVEN)


def claim_met(state: str, verdict: Verdict, gates: list[GateResult], device_markers: frozenset[str] = frozenset()) -> tuple[bool, str]:
    """README "Claims": DONE needs every gate PASS (here or on evidence); PARTIAL lets gates whose marker requires a
    device (``device_markers``, e.g. gpu) be SKIPPED or UNPROVEN; the other states tolerate FAIL and NOT-IMPLEMENTED;
    no state excuses ERROR, INCOMPLETE or EMPTY."""
    if verdict in (Verdict.ERROR, Verdict.EMPTY, Verdict.INCOMPLETE):
        return False, f"{verdict.value} is never green"
    if state == "DONE" and verdict is Verdict.UNPROVEN:
        return False, f"claims DONE, but no run or evidence here proves {_unproven(gates)}"
    if state == "DONE" and verdict is not Verdict.PASS:
        return False, f"claims DONE but the verdict is {verdict.value}"
    if state == "PARTIAL":
        if verdict not in (Verdict.PASS, Verdict.SKIPPED, Verdict.UNPROVEN):
            return False, f"claims PARTIAL but the verdict is {verdict.value}"
        which = _skipped_or_unproven(gates, device_markers)
        if which:
            kinds = f"that are not {'/'.join(sorted(device_markers))} gates" if device_markers else "(no marker requires a device)"
            return False, f"claims PARTIAL, but gates {kinds} were skipped or not proven: {', '.join(which)}"
    return True, ""


THIS_RUN = "this run"  # the basis of a verdict its items gave in this run (the others name an evidence file)


def combine(here: tuple[Verdict, str] | None, evidence: list[tuple[str, Verdict, str]]) -> tuple[Verdict, str, tuple[str, ...]]:
    """One gate's verdict from this run (None: not executed) and usable evidence (label, verdict, reason): a FAIL
    or ERROR anywhere wins (machines that disagree on one fingerprint are a failure); else a PASS anywhere; else
    the worst. Returns the verdict, its reason and its basis."""
    sources = ([(THIS_RUN, *here)] if here is not None else []) + evidence
    if not sources:
        return Verdict.UNPROVEN, "", ()
    failing = [s for s in sources if s[1] in (Verdict.FAIL, Verdict.ERROR)]
    if failing:
        label, verdict, reason = max(failing, key=lambda s: s[1].severity)
        return verdict, reason if label == THIS_RUN else f"{verdict.value} on {label}: {reason}", tuple(s[0] for s in failing)
    passing = [s[0] for s in sources if s[1] is Verdict.PASS]
    if passing:
        return Verdict.PASS, "" if passing[0] == THIS_RUN else f"on evidence: {passing[0]}", tuple(passing)
    label, verdict, reason = max(sources, key=lambda s: s[1].severity)
    return verdict, reason, (label,)


@dataclass(frozen=True)
class Scope:
    """What one judgement covers: the rows, the gates this run executed (None: every gate of those rows), why the
    others did not run, the evidence per gate (label, verdict, reason; and why other evidence was not used), and
    the gates that ran on a simulated device."""

    rows: list[str] | None = None
    executed: set[tuple[str, str]] | None = None
    not_run_why: str = "not run here"
    evidence: dict[tuple[str, str], list[tuple[str, Verdict, str]]] = field(default_factory=dict)
    refused: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    simulated: set[tuple[str, str]] = field(default_factory=set)
    parity_marker: str | None = None  # gates with this marker judge the upstream-parity claim, not the lifecycle one
    device_markers: frozenset[str] = frozenset()  # markers that require a device: a PARTIAL claim may leave their gates unrun


def _judge_gate(row: str, gate: Gate, items: list[ItemResult], not_run: tuple[str, ...], scope: Scope) -> GateResult:
    """One gate: its items' verdict where this run executed it, combined with the usable evidence for it."""
    key = (row, gate.id)
    executed = scope.executed is None or key in scope.executed
    here = None
    notes = list(scope.refused.get(key, []))
    first_hand = ("", "")
    if executed:
        share = gate.properties.min_value_share if gate.properties else 0.0
        here = gate_verdict(items, bool(gate.known_bad), not_run, share)
        first_hand = (here[0].value, here[1]) if items else first_hand
        if key in scope.simulated and here[0] is Verdict.PASS:
            notes.insert(0, "PASS here on a simulated device: it backs no claim")
            here = None
    verdict, reason, basis = combine(here, scope.evidence.get(key, []))
    if verdict is Verdict.UNPROVEN:
        reason = "; ".join(([] if executed else [scope.not_run_why]) + notes + ["no usable evidence"])
    cases = [i for i in items if i.kind == "case"]
    known = [i for i in items if i.kind == "known_bad"]
    good = [i for i in items if i.kind == "known_good"]
    return GateResult(
        row, gate.id, gate.milestone, gate.markers, verdict,
        sum(i.outcome == ItemOutcome.PASSED for i in cases), len(gate.cases),
        sum(i.checks for i in items if i.kind == "properties" and i.outcome in (ItemOutcome.PASSED, ItemOutcome.SKIPPED)),  # skipped: 0, or those compared
        sum(i.outcome == ItemOutcome.PASSED for i in known), len(gate.known_bad),
        sum(i.checks for i in items), reason,
        sum(i.values for i in items if i.kind == "properties"),
        sum(i.agreed_errors for i in items if i.kind == "properties"), not_run if executed else (),
        executed=executed and bool(items), run_verdict=first_hand[0], run_reason=first_hand[1], basis=basis,
        leg_of=gate.leg_of or "", tolerance_used=tolerance_used(items), tolerance_at=tolerance_at(items),
        excused=sum(i.excused for i in items),
        known_good_passed=sum(i.outcome == ItemOutcome.PASSED for i in good), known_good_total=len(gate.known_good))


def tolerance_at(items: list[ItemResult]) -> Mapping[str, str] | None:
    """Where a gate's passing cases and examples used the most of their tolerance (tolerance_used's item's)."""
    found = [i for i in items if i.kind in ("case", "properties") and i.tolerance_used is not None]
    return max(found, key=lambda i: i.tolerance_used or 0.0).tolerance_at if found else None


def tolerance_used(items: list[ItemResult]) -> float | None:
    """The most of its tolerance a gate's passing cases and examples used (None: no policy compared anything)."""
    found = [i.tolerance_used for i in items if i.kind in ("case", "properties") and i.tolerance_used is not None]
    return max(found) if found else None


def _broken_gate(row: str, broken: BrokenGate, items: list[ItemResult]) -> GateResult:
    """A gate whose definition did not load: ERROR, for its definition item's first line (or its first problem)."""
    reason = next((i.detail for i in items if i.outcome == ItemOutcome.ERROR), f"definition error: {broken.problems[0]}")
    return GateResult(row, broken.id, broken.milestone, (), Verdict.ERROR, 0, 0, 0, 0, 0, 0, reason,
                      executed=bool(items), run_verdict=Verdict.ERROR.value if items else "", run_reason=reason if items else "",
                      basis=(THIS_RUN,) if items else ())


def build_report(roadmap: Roadmap, gate_files: list[GateFile], items: list[ItemResult],
                 broken_rows: dict[str, str] | None = None, scope: Scope | None = None,
                 missing: dict[tuple[str, str], tuple[str, ...]] | None = None) -> RunReport:
    """Aggregate item outcomes and evidence into gate, milestone and row verdicts and check each claimed state.

    Every row in scope is shown with every gate and milestone, whatever the marker filter: a gate the run did not
    execute is UNPROVEN unless evidence covers it. ``missing`` names each gate's declared items without a result.
    """
    broken_rows = broken_rows or {}
    missing = missing or {}
    scope = scope or Scope()
    by_gate: dict[tuple[str, str], list[ItemResult]] = {}
    for item in items:
        by_gate.setdefault((item.row, item.gate), []).append(item)
    files = {gf.row: gf for gf in gate_files}
    rows = []
    for row in roadmap.rows:
        if scope.rows is not None and row.id not in scope.rows:
            continue
        gate_file = files.get(row.id)
        all_results = [_judge_gate(row.id, gate, by_gate.get((row.id, gate.id), []), missing.get((row.id, gate.id), ()), scope)
                       for gate in (gate_file.gates if gate_file else ())]
        not_loaded = [_broken_gate(row.id, broken, by_gate.get((row.id, broken.id), []))
                      for broken in (gate_file.broken_gates if gate_file else ())]
        all_results += not_loaded
        parity_gates = [g for g in all_results if scope.parity_marker in g.markers]
        gate_results = [g for g in all_results if scope.parity_marker not in g.markers]
        row_errors = by_gate.get((row.id, "<file>"), [])
        milestone_claims = []
        for ms in row.milestones:
            ms_gates = [g for g in gate_results if g.milestone == ms.id]
            verdict = Verdict.ERROR if (row_errors or row.id in broken_rows) else worst([g.verdict for g in ms_gates])
            met, why = claim_met(ms.state, verdict, ms_gates, scope.device_markers)
            if verdict is Verdict.EMPTY and not ms_gates:
                why = "no gate covers this milestone"
            milestone_claims.append(ClaimResult(row.id, ms.id, ms.state, verdict, met, why, ms.claimed_by))
        if row_errors or row.id in broken_rows:
            detail = row_errors[0].detail if row_errors else broken_rows[row.id]
            row_claim = ClaimResult(row.id, None, row.state, Verdict.ERROR, False, detail or "the gate file did not load", row.claimed_by)
        elif gate_file is None:
            row_claim = ClaimResult(row.id, None, row.state, Verdict.EMPTY, False, "no gate file for this row", row.claimed_by)
        else:
            verdict = worst([m.verdict for m in milestone_claims] + [g.verdict for g in not_loaded]) if milestone_claims or not_loaded else Verdict.EMPTY
            met, why = claim_met(row.state, verdict, gate_results, scope.device_markers)
            if met and not all(m.claim_met for m in milestone_claims):
                met, why = False, MILESTONE_UNMET
            row_claim = ClaimResult(row.id, None, row.state, verdict, met, why, row.claimed_by)
        parity = None
        if row.upstream and gate_file is not None:
            parity = judge_parity(row.upstream, parity_gates)
        elif parity_gates:  # an upstream gate is judged only by a parity claim: without one it could never fail
            parity = ParityResult("(none)", worst([g.verdict for g in parity_gates]), False,
                                  "the row has upstream gates but claims no upstream parity: add `upstream: VERSION` to "
                                  "its roadmap entry", tuple(g.gate for g in parity_gates))
        rows.append(RowReport(row.id, row.title, row_claim, tuple(milestone_claims), tuple(all_results), parity))
    return RunReport(tuple(rows), tuple(items))


def judge_parity(claimed: str, gates: list[GateResult]) -> ParityResult:
    """Upstream parity: every upstream gate PASS; any other verdict but SKIPPED or UNPROVEN (not checked here) fails it."""
    names = tuple(g.gate for g in gates)
    if not gates:
        return ParityResult(claimed, Verdict.EMPTY, False, "claims upstream parity, but no gate of the row carries the upstream marker")
    verdict = worst([g.verdict for g in gates])
    failing = [g for g in gates if g.verdict not in (Verdict.PASS, Verdict.SKIPPED, Verdict.UNPROVEN)]
    if failing:
        return ParityResult(claimed, verdict, False, "; ".join(f"{g.gate} {g.verdict.value}" + (f": {g.reason}" if g.reason else "")
                                                               for g in failing), names)
    unchecked = [g for g in gates if g.verdict is not Verdict.PASS]
    if unchecked:
        return ParityResult(claimed, verdict, None, f"not checked here: {unchecked[0].reason or unchecked[0].verdict.value}", names)
    return ParityResult(claimed, Verdict.PASS, True, "", names)


def with_unknown_rows(report: RunReport, problems: dict[str, str]) -> RunReport:
    """Gate files that name no roadmap row still get a row line, in ERROR, so nothing broken is dropped."""
    extra = tuple(RowReport(row, "(not in the roadmap)", ClaimResult(row, None, "-", Verdict.ERROR, False, message), (), ())
                  for row, message in problems.items())
    return replace(report, rows=report.rows + extra)


def interrupted(report: RunReport, signal_name: str) -> RunReport:
    """The same report, stopped by ``signal_name``: no claim of it is met."""
    def unmet(claim: ClaimResult) -> ClaimResult:
        why = f"the run was interrupted ({signal_name})" + (f"; {claim.reason}" if claim.reason else "")
        return replace(claim, claim_met=False, reason=why)

    rows = tuple(replace(r, claim=unmet(r.claim), milestones=tuple(unmet(m) for m in r.milestones)) for r in report.rows)
    return replace(report, rows=rows, interrupted=signal_name)
