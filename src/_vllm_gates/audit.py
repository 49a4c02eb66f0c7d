"""The audit: every gate must reject the wrong-everywhere stand-in and each of its known-bads (README, `gates audit`).

The audit stand-in runs in every gate run as one more item; `gates audit` runs only those items and prints this table.
"""
from __future__ import annotations

from dataclasses import dataclass

from _vllm_gates.exitcodes import ExitCode
from _vllm_gates.items import ItemKind
from _vllm_gates.reports import display_width, fixed_width, one_line
from _vllm_gates.verdicts import ItemResult


@dataclass(frozen=True)
class AuditLine:
    """One gate's audit: what the stand-in did, and how many known-bads its gate rejected."""

    row: str
    gate: str
    state: str
    rejected: int
    known_bad: int
    code: ExitCode


def audit_lines(items: list[ItemResult]) -> list[AuditLine]:
    by_gate: dict[tuple[str, str], list[ItemResult]] = {}
    for item in items:
        by_gate.setdefault((item.row, item.gate), []).append(item)
    lines = []
    for (row, gate), found in sorted(by_gate.items()):
        audit = [i for i in found if i.kind == ItemKind.AUDIT]
        known = [i for i in found if i.kind == ItemKind.KNOWN_BAD]
        code = ExitCode.OK
        if any(i.outcome == "error" for i in found) or not audit:
            state, code = "ERROR: " + next((i.detail for i in found if i.outcome == "error"), "no audit item"), ExitCode.ERROR
        elif audit[0].outcome == "skipped":
            state = "not audited: " + audit[0].detail
        elif audit[0].outcome == "failed":
            state, code = "STILL PASSES: the gate cannot fail", ExitCode.CLAIM_NOT_MET
        else:
            state = "fails (" + audit[0].detail.split(":")[0] + ")"
        if code is ExitCode.OK and any(i.outcome == "failed" for i in known):
            code = ExitCode.CLAIM_NOT_MET
        lines.append(AuditLine(row, gate, state, sum(i.outcome == "passed" for i in known), len(known), code))
    return lines


def audit_exit_code(lines: list[AuditLine]) -> ExitCode:
    """3 a gate errored; 1 a gate cannot fail or a known-bad passed; 5 nothing was audited; else 0."""
    if not lines:
        return ExitCode.EMPTY
    codes = {line.code for line in lines}
    for code in (ExitCode.ERROR, ExitCode.CLAIM_NOT_MET):
        if code in codes:
            return code
    return ExitCode.OK


STAND_IN_WIDTH = 60  # terminal columns of the stand-in cell; a longer state is cut there and shown whole under the table


def audit_table(lines: list[AuditLine]) -> str:
    """Fixed-width columns sized to their longest cell (in terminal columns), so no cell runs into the next; a
    stand-in state longer than STAND_IN_WIDTH is cut with "…" in its cell and given whole under the table."""
    body = [(line.row, line.gate, line.state, f"{line.rejected}/{line.known_bad} rejected") for line in lines]
    out = fixed_width(("row", "gate", "stand-in", "known-bad"), body, {2: STAND_IN_WIDTH})
    cut = [f"{line.row}::{line.gate}: {one_line(line.state)}" for line in lines if display_width(one_line(line.state)) > STAND_IN_WIDTH]
    return "\n".join(out + ([""] + cut if cut else []))
