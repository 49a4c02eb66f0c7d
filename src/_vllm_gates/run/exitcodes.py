"""The exit codes of `gates` and of a pytest run that collected gates (README, "Exit codes"), and the one function
that decides a run's code from its report (README, "Exit codes"): the session, partial runs and the audit only pass
their data in.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

import pytest

from _vllm_gates.results.outcomes import ItemOutcome
from _vllm_gates.results.verdicts import THIS_RUN, RunReport, Verdict

if TYPE_CHECKING:
    from _vllm_gates.run.audit import AuditLine


class ExitCode(IntEnum):
    """0 claims met; 1 a claim not met; 2 usage; 3 a definition or harness error; 5 nothing ran; 6 claims unproven;
    7 nothing could run here; 130 interrupted. (4 is left to pytest's usage error, which `gates` reports as 2.)"""

    OK = 0
    CLAIM_NOT_MET = 1
    USAGE = 2
    ERROR = 3
    EMPTY = 5
    UNPROVEN = 6  # nothing that ran failed, but a claim rests on gates this run did not execute and no evidence covers
    NOT_RUNNABLE = 7  # items were selected, but every one was skipped for want of what its marker requires (CUDA)
    INTERRUPTED = 130  # SIGINT or SIGTERM stopped the run: its reports say `interrupted`, no claim is met


@dataclass(frozen=True)
class SessionEnd:
    """What the pytest session said beside the verdicts: a signal stopped it, pytest's own status, failing tests
    that are not gate items, and `--changed-since` finding no affected row (nothing to judge: green)."""

    interrupted: bool = False
    pytest_status: int = pytest.ExitCode.OK
    other_failures: int = 0
    nothing_affected: bool = False


_PYTEST_ABORTS = (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR)
_PARTIAL_FAILING = (Verdict.FAIL, Verdict.INCOMPLETE, Verdict.EMPTY)  # a selected gate whose items did not pass


def exit_code(judged: RunReport | Sequence[AuditLine], session: SessionEnd = SessionEnd()) -> ExitCode:
    """The exit code of a run from what it judged (a run report, or the audit's lines) and how its session ended:
    the verdicts decide, except that an interrupt, pytest's aborts and failing tests that are not gate items count."""
    pytest_status: int
    if session.nothing_affected:
        verdicts, pytest_status = ExitCode.OK, pytest.ExitCode.OK
    else:
        verdicts, pytest_status = _of_judged(judged), session.pytest_status
    if session.interrupted:
        return ExitCode.INTERRUPTED
    if pytest_status in _PYTEST_ABORTS:
        return ExitCode.ERROR
    if session.other_failures and verdicts in (ExitCode.OK, ExitCode.EMPTY, ExitCode.UNPROVEN, ExitCode.NOT_RUNNABLE):
        return ExitCode.CLAIM_NOT_MET
    return verdicts


def combined(codes: Iterable[int]) -> ExitCode:
    """One command's code from the codes of its parts (`gates audit --evidence`: the table from evidence and the run
    of the rest): an error, then a claim not met, an interrupt, a usage error; else 0 if a part passed; 5 for none."""
    found = [ExitCode(code) for code in codes]
    for code in (ExitCode.ERROR, ExitCode.CLAIM_NOT_MET, ExitCode.INTERRUPTED, ExitCode.USAGE):
        if code in found:
            return code
    return ExitCode.OK if ExitCode.OK in found else (found[0] if found else ExitCode.EMPTY)


def _of_judged(judged: RunReport | Sequence[AuditLine]) -> ExitCode:
    if not isinstance(judged, RunReport):
        return _audit(judged)
    return _partial(judged) if judged.partial else _claims(judged)


def _nothing_ran(report: RunReport) -> ExitCode:
    """7 when items were selected and every one was skipped for want of what its marker requires; else 5."""
    if report.items and all(i.requirement_unmet for i in report.items):
        return ExitCode.NOT_RUNNABLE
    return ExitCode.EMPTY


def _claims(report: RunReport) -> ExitCode:
    """0 every row in scope meets its claim; 130 interrupted; 3 a definition/harness ERROR; when nothing ran (here or
    on evidence): 7 or 5 (_nothing_ran); 1 a claim not met; 6 the only unmet claims are UNPROVEN."""
    if report.interrupted:
        return ExitCode.INTERRUPTED
    if any(r.claim.verdict is Verdict.ERROR or (r.parity is not None and r.parity.verdict is Verdict.ERROR) for r in report.rows):
        return ExitCode.ERROR
    ran = [i for i in report.items if i.outcome in (ItemOutcome.PASSED, ItemOutcome.FAILED, ItemOutcome.ERROR)]
    on_evidence = [g for r in report.rows for g in r.gates if any(b != THIS_RUN for b in g.basis)]
    if not report.rows or not (ran or on_evidence or report.evidence_offered):
        return _nothing_ran(report) if report.rows else ExitCode.EMPTY
    unmet = [c for r in report.rows for c in (*r.milestones, r.claim) if not c.claim_met]
    if any(r.parity is not None and r.parity.met is False for r in report.rows):
        return ExitCode.CLAIM_NOT_MET
    if not unmet:
        return ExitCode.OK
    if all(c.verdict is Verdict.UNPROVEN for c in unmet):
        return ExitCode.UNPROVEN
    return ExitCode.CLAIM_NOT_MET


def _partial(report: RunReport) -> ExitCode:
    """A partial selection (partial.py): 130 interrupted; 3 an item or a selected gate in ERROR; 5 or 7 nothing ran
    (_nothing_ran); 1 a selected gate FAIL, INCOMPLETE or EMPTY; else 0."""
    if report.interrupted:
        return ExitCode.INTERRUPTED
    gates = [g for r in report.rows for g in r.gates]
    if any(i.outcome == ItemOutcome.ERROR for i in report.items) or any(g.verdict is Verdict.ERROR for g in gates) \
            or any(r.claim.verdict is Verdict.ERROR for r in report.rows):
        return ExitCode.ERROR
    if not any(i.outcome in (ItemOutcome.PASSED, ItemOutcome.FAILED) for i in report.items):
        return _nothing_ran(report)
    if any(g.verdict in _PARTIAL_FAILING for g in gates):
        return ExitCode.CLAIM_NOT_MET
    return ExitCode.OK


def _audit(lines: Sequence[AuditLine]) -> ExitCode:
    """`gates audit`: 3 a gate errored; 1 a gate cannot fail, a known-bad passed, or a tolerance let a wrong answer
    through (or was checked against none); 5 nothing was audited; else 0."""
    from _vllm_gates.run.audit import StandIn

    if not lines:
        return ExitCode.EMPTY
    if any(line.stand_in is StandIn.ERROR for line in lines):
        return ExitCode.ERROR
    if any(line.stand_in is StandIn.STILL_PASSES or line.known_bad_passed or line.tolerance_failed for line in lines):
        return ExitCode.CLAIM_NOT_MET
    return ExitCode.OK
