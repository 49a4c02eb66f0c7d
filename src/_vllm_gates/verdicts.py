"""Verdicts per gate, milestone and row, and the check of each against the state the roadmap claims."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import Enum

from _vllm_gates.exitcodes import ExitCode
from _vllm_gates.implemented import OperationCount
from _vllm_gates.model import BrokenGate, Gate, GateFile, Roadmap


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
    executed: bool = True  # its items ran in this run
    run_verdict: str = ""  # what its items said in this run, before evidence and the simulated-device rule ("": not executed)
    run_reason: str = ""
    basis: tuple[str, ...] = ()  # what the verdict rests on: "this run", and evidence files with their devices
    fingerprint: str = ""
    inputs: tuple[str, ...] = ()
    device: str = ""
    simulated: bool = False
    partial: bool = False  # a partial selection ran only some of its items: judged on those, never evidence (issue 25)
    leg_of: str = ""  # the gate whose `upstream:` parity or deviation leg this is ("": a gate as written)


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
    absent = [i for i in items if i.outcome == "skipped" and _NOT_IMPLEMENTED_SKIP.match(i.detail)]
    if absent:
        return Verdict.NOT_IMPLEMENTED, _not_implemented_reason(absent, items)
    if all(i.outcome == "skipped" for i in items):
        return Verdict.SKIPPED, items[0].detail
    if any(i.outcome == "skipped" for i in items):
        return Verdict.SKIPPED, "partly skipped: " + ", ".join(i.name for i in items if i.outcome == "skipped")
    if sum(i.checks for i in items) == 0:
        return Verdict.EMPTY, "its items ran no check"
    if not has_known_bad:
        return Verdict.WEAK, "no known-bad entry: the gate has not shown it can fail"
    return Verdict.PASS, ""


def _not_implemented_reason(absent: list[ItemResult], items: list[ItemResult]) -> str:
    """One reason for the gate's items the implementation did not implement: the operation's absence as it was
    given, or how many of the cases (the first one's why) and of the generated examples (issue 26)."""
    if len({i.detail for i in absent}) == 1 and len(absent) == sum(i.kind in ("case", "properties") for i in items):
        return absent[0].detail  # the whole operation: one reason for all
    prefix = _NOT_IMPLEMENTED_SKIP.match(absent[0].detail).group(0)  # type: ignore[union-attr]
    cases = [i for i in absent if i.kind == "case"]
    parts = [f"{len(cases)} of {sum(i.kind == 'case' for i in items)} cases (first {cases[0].name}: "
             f"{cases[0].detail.removeprefix(prefix)})"] if cases else []
    parts += [i.detail.removeprefix(prefix) for i in absent if i.kind == "properties"]
    return prefix + "; ".join(parts)


def _gpu_only_skips(gates: list[GateResult]) -> bool:
    return all("gpu" in g.markers for g in gates if g.verdict in (Verdict.SKIPPED, Verdict.UNPROVEN))


def _unproven(gates: list[GateResult]) -> str:
    return ", ".join(g.gate for g in gates if g.verdict is Verdict.UNPROVEN)


def claim_met(state: str, verdict: Verdict, gates: list[GateResult]) -> tuple[bool, str]:
    """README "Claims": DONE needs every gate PASS (here or on evidence); PARTIAL lets gpu gates be SKIPPED or
    UNPROVEN; the other states tolerate FAIL and NOT-IMPLEMENTED; no state excuses ERROR, INCOMPLETE or EMPTY."""
    if verdict in (Verdict.ERROR, Verdict.EMPTY, Verdict.INCOMPLETE):
        return False, f"{verdict.value} is never green"
    if state == "DONE" and verdict is Verdict.UNPROVEN:
        return False, f"claims DONE, but no run or evidence here proves {_unproven(gates)}"
    if state == "DONE" and verdict is not Verdict.PASS:
        return False, f"claims DONE but the verdict is {verdict.value}"
    if state == "PARTIAL":
        if verdict not in (Verdict.PASS, Verdict.SKIPPED, Verdict.UNPROVEN):
            return False, f"claims PARTIAL but the verdict is {verdict.value}"
        if not _gpu_only_skips(gates):
            which = ", ".join(g.gate for g in gates if g.verdict in (Verdict.SKIPPED, Verdict.UNPROVEN) and "gpu" not in g.markers)
            return False, f"claims PARTIAL, but gates that are not gpu gates were skipped or not proven: {which}"
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
    return GateResult(
        row, gate.id, gate.milestone, gate.markers, verdict,
        sum(i.outcome == "passed" for i in cases), len(gate.cases),
        sum(i.checks for i in items if i.kind == "properties" and i.outcome in ("passed", "skipped")),  # skipped: 0, or those compared
        sum(i.outcome == "passed" for i in known), len(gate.known_bad),
        sum(i.checks for i in items), reason,
        sum(i.values for i in items if i.kind == "properties"),
        sum(i.agreed_errors for i in items if i.kind == "properties"), not_run if executed else (),
        executed=executed and bool(items), run_verdict=first_hand[0], run_reason=first_hand[1], basis=basis,
        leg_of=gate.leg_of or "")


def _broken_gate(row: str, broken: BrokenGate, items: list[ItemResult]) -> GateResult:
    """A gate whose definition did not load: ERROR, for its definition item's first line (or its first problem)."""
    reason = next((i.detail for i in items if i.outcome == "error"), f"definition error: {broken.problems[0]}")
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
            met, why = claim_met(ms.state, verdict, ms_gates)
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
            met, why = claim_met(row.state, verdict, gate_results)
            if met and not all(m.claim_met for m in milestone_claims):
                met, why = False, "a milestone does not meet its claimed state"
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


_REQUIREMENT_SKIP = re.compile(r"^[a-z][a-z0-9_]* gate skipped: ")  # what requirement_skip() writes: marker names are lower-case


def requirement_skip(marker: str, reason: str) -> str:
    """The skip reason of a gate item whose marker requires what this machine lacks (plugin.RequirementSkips), e.g.
    "gpu gate skipped: no CUDA device (...)"; exit_code tells these skips from others by it."""
    return f"{marker} gate skipped: {reason}"


_NOT_IMPLEMENTED_SKIP = re.compile(r"^not implemented by '[^']+': ")


def not_implemented_skip(impl: str, why: str) -> str:
    """The skip reason of a gate item whose operation the judged implementation does not provide; gate_verdict
    makes the gate NOT-IMPLEMENTED by it (it backs no DONE or PARTIAL claim)."""
    return f"not implemented by {impl!r}: {why}"


def skipped_as_not_implemented(item: ItemResult) -> bool:
    """The item was skipped because the judged implementation does not provide its gate's operation."""
    return item.outcome == "skipped" and bool(_NOT_IMPLEMENTED_SKIP.match(item.detail))


def skipped_for_requirement(item: ItemResult) -> bool:
    """The item was skipped because a requirement of its marker (a CUDA device) is missing on this machine."""
    return item.outcome == "skipped" and bool(_REQUIREMENT_SKIP.match(item.detail))


def exit_code(report: RunReport) -> ExitCode:
    """0 every row in scope meets its claim; 130 interrupted; 3 a definition/harness ERROR; when nothing ran (here or
    on evidence): 7 nothing could run here (items were selected, and every one was skipped for want of what its
    marker requires), else 5; 1 a claim not met; 6 the only unmet claims are UNPROVEN."""
    if report.interrupted:
        return ExitCode.INTERRUPTED
    if any(r.claim.verdict is Verdict.ERROR or (r.parity is not None and r.parity.verdict is Verdict.ERROR) for r in report.rows):
        return ExitCode.ERROR
    ran = [i for i in report.items if i.outcome in ("passed", "failed", "error")]
    on_evidence = [g for r in report.rows for g in r.gates if any(b != THIS_RUN for b in g.basis)]
    if not report.rows or not (ran or on_evidence or report.evidence_offered):
        if report.rows and report.items and all(skipped_for_requirement(i) for i in report.items):
            return ExitCode.NOT_RUNNABLE
        return ExitCode.EMPTY
    unmet = [c for r in report.rows for c in (*r.milestones, r.claim) if not c.claim_met]
    if any(r.parity is not None and r.parity.met is False for r in report.rows):
        return ExitCode.CLAIM_NOT_MET
    if not unmet:
        return ExitCode.OK
    if all(c.verdict is Verdict.UNPROVEN for c in unmet):
        return ExitCode.UNPROVEN
    return ExitCode.CLAIM_NOT_MET


def interrupted(report: RunReport, signal_name: str) -> RunReport:
    """The same report, stopped by ``signal_name``: no claim of it is met."""
    def unmet(claim: ClaimResult) -> ClaimResult:
        why = f"the run was interrupted ({signal_name})" + (f"; {claim.reason}" if claim.reason else "")
        return replace(claim, claim_met=False, reason=why)

    rows = tuple(replace(r, claim=unmet(r.claim), milestones=tuple(unmet(m) for m in r.milestones)) for r in report.rows)
    return replace(report, rows=rows, interrupted=signal_name)
