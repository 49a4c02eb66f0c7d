"""The audit: every gate must reject the wrong-everywhere stand-in and each of its known-bads, and pass each of its
known-goods (README, `gates audit`).

The audit stand-in, the known-bads and the known-goods run in every gate run as items; `gates audit` runs only those
items and prints this table. A gate that rejects a known-good is TOO TIGHT: its known-good item is an ERROR.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from _vllm_gates.results.outcomes import ItemOutcome
from _vllm_gates.results.records import ItemKind, ItemResult
from _vllm_gates.results.reports import display_width, fixed_width, one_line


class StandIn(Enum):
    """What a gate did with the wrong-everywhere stand-in."""

    REJECTED = "rejected"  # the gate fails it: it can fail
    STILL_PASSES = "still passes"  # the gate cannot fail
    NOT_AUDITED = "not audited"  # its audit item was skipped
    ERROR = "error"  # an item of the gate errored, or it has no audit item


@dataclass(frozen=True)
class AuditLine:
    """One gate's audit: what the stand-in did (and the table's words for it), and how many known-bads its gate
    rejected, and passed."""

    row: str
    gate: str
    state: str
    rejected: int
    known_bad: int
    stand_in: StandIn
    known_bad_passed: int = 0
    tolerance: str = ""  # a gate with a tolerance: its strength audit's summary (tolerance_audit.py; "" for others)
    tolerance_failed: bool = False  # a wrong answer passed every case and example, or could be derived from none
    known_good: int = 0  # its known-goods, and how many it passed (one it rejects is an ERROR item: TOO TIGHT)
    known_good_passed: int = 0
    known_good_used: float | None = None  # the most of its tolerance a passing known-good used


def audit_lines(items: list[ItemResult]) -> list[AuditLine]:
    by_gate: dict[tuple[str, str], list[ItemResult]] = {}
    for item in items:
        by_gate.setdefault((item.row, item.gate), []).append(item)
    lines = []
    for (row, gate), found in sorted(by_gate.items()):
        audit = [i for i in found if i.kind == ItemKind.AUDIT]
        known = [i for i in found if i.kind == ItemKind.KNOWN_BAD]
        if any(i.outcome == ItemOutcome.ERROR for i in found) or not audit:
            stand_in = StandIn.ERROR
            state = "ERROR: " + next((i.detail for i in found if i.outcome == ItemOutcome.ERROR), "no audit item")
        elif audit[0].outcome == ItemOutcome.SKIPPED:
            stand_in, state = StandIn.NOT_AUDITED, "not audited: " + audit[0].detail
        elif audit[0].outcome == ItemOutcome.FAILED:
            stand_in, state = StandIn.STILL_PASSES, "STILL PASSES: the gate cannot fail"
        else:
            stand_in, state = StandIn.REJECTED, "fails (" + audit[0].detail.split(":")[0] + ")"
        strength = next((i for i in found if i.kind == ItemKind.STRENGTH), None)
        good = [i for i in found if i.kind == ItemKind.KNOWN_GOOD]
        used = [i.tolerance_used for i in good if i.outcome == ItemOutcome.PASSED and i.tolerance_used is not None]
        lines.append(AuditLine(row, gate, state, sum(i.outcome == ItemOutcome.PASSED for i in known), len(known), stand_in,
                               sum(i.outcome == ItemOutcome.FAILED for i in known), *_tolerance(strength), len(good),
                               sum(i.outcome == ItemOutcome.PASSED for i in good), max(used) if used else None))
    return lines


def _tolerance(item: ItemResult | None) -> tuple[str, bool]:
    """A strength item's summary for the table (its finding's, else what became of the item), and whether it failed."""
    from _vllm_gates.values.tolerance_audit import StrengthFinding

    if item is None:
        return "", False
    if item.strength is not None:
        try:
            finding = StrengthFinding.from_data(item.strength)
            return finding.summary(), not finding.strong
        except (KeyError, TypeError, ValueError):
            pass
    if item.outcome == ItemOutcome.SKIPPED:
        return "not audited: " + item.detail, False
    return ("ERROR: " if item.outcome == ItemOutcome.ERROR else "") + (item.detail or item.outcome.value), \
        item.outcome == ItemOutcome.FAILED


STAND_IN_WIDTH = 60  # terminal columns of the stand-in cell; a longer state is cut there and shown whole under the table


TOLERANCE_WIDTH = 70  # terminal columns of the tolerance cell, likewise


def known_good_cell(line: AuditLine) -> str:
    """"1/1 passed (49% of its tolerance)": how many known-goods the gate passed, and the most of its tolerance one
    used; "-" where the gate has none."""
    if not line.known_good:
        return "-"
    share = line.known_good_used
    used = "" if share is None else f" ({'under 1%' if 0 < share < 0.01 else f'{share:.0%}'} of its tolerance)"
    return f"{line.known_good_passed}/{line.known_good} passed{used}"


def audit_table(lines: list[AuditLine]) -> str:
    """Fixed-width columns sized to their longest cell (in terminal columns), so no cell runs into the next; a
    stand-in state longer than STAND_IN_WIDTH is cut with "…" in its cell and given whole under the table; the
    known-good column only where a gate has a known-good; the tolerance column (only where a gate has a tolerance)
    likewise cut at TOLERANCE_WIDTH."""
    tolerance = any(line.tolerance for line in lines)
    good = any(line.known_good for line in lines)
    body = [(line.row, line.gate, line.state, f"{line.rejected}/{line.known_bad} rejected",
             *([known_good_cell(line)] if good else []), *([line.tolerance or "-"] if tolerance else [])) for line in lines]
    out = fixed_width(("row", "gate", "stand-in", "known-bad", *(["known-good"] if good else []),
                       *(["tolerance"] if tolerance else [])), body, {2: STAND_IN_WIDTH, 4 + good: TOLERANCE_WIDTH})
    cut = [f"{line.row}::{line.gate}: {one_line(line.state)}" for line in lines if display_width(one_line(line.state)) > STAND_IN_WIDTH]
    cut += [f"{line.row}::{line.gate} tolerance: {one_line(line.tolerance)}" for line in lines
            if display_width(one_line(line.tolerance)) > TOLERANCE_WIDTH]
    return "\n".join(out + ([""] + cut if cut else []))
