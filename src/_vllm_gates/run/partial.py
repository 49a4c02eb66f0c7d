"""A run that selects part of a row (`-k`, a node id, `gates run --gate/--case`; docs/evidence.md §1) judges only what it
selected: the gates it did not select are left out, a gate it selected in part is judged on the items that ran and
marked partial (never evidence), claims are not judged, and the exit code (exitcodes.py) says whether the selected
items passed.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from _vllm_gates.results.verdicts import ClaimResult, GateResult, RowReport, RunReport, worst

NOT_JUDGED = "not judged: the run selected part of the row"


@dataclass(frozen=True)
class Selected:
    """How much of one gate a partial run selected: its items selected, of those it declares (0: unknown)."""

    items: int
    declared: int

    @property
    def whole(self) -> bool:
        return self.declared == 0 or self.items >= self.declared


def _gate(gate: GateResult, selected: Selected) -> GateResult:
    """A gate selected whole stays as judged (evidence, as in any run); one selected in part is marked, never evidence."""
    if selected.whole:
        return gate
    note = f"partial: {selected.items} of {selected.declared} items selected"
    return replace(gate, reason=f"{gate.reason}; {note}" if gate.reason else note, executed=False, partial=True)


def _claim(claim: ClaimResult, gates: list[GateResult]) -> ClaimResult:
    """A claim not judged: the worst of its selected gates (a row whose file did not load keeps its ERROR and why)."""
    if not gates:
        return replace(claim, claim_met=False, judged=False)
    return replace(claim, verdict=worst([g.verdict for g in gates]), claim_met=False, reason=NOT_JUDGED, judged=False)


def judge_partial(report: RunReport, selected: Mapping[tuple[str, str], Selected]) -> RunReport:
    """The report of a partial selection: only the selected gates (a row-level definition error counts as one),
    each partly selected gate marked; the claims of their rows and milestones not judged."""
    rows = []
    for row in report.rows:
        gates = [_gate(g, selected[(row.row, g.gate)]) for g in row.gates if (row.row, g.gate) in selected]
        if not gates and (row.row, "<file>") not in selected:
            continue
        milestones = tuple(_claim(m, [g for g in gates if g.milestone == m.milestone]) for m in row.milestones
                           if any(g.milestone == m.milestone for g in gates))
        rows.append(RowReport(row.row, row.title, _claim(row.claim, gates), milestones, tuple(gates), None))
    return replace(report, rows=tuple(rows), partial=True)


def selection(gates: Mapping[tuple[str, str], bool], declared: Mapping[tuple[str, str], list[str]],
              chosen: Mapping[tuple[str, str], set[str]]) -> dict[tuple[str, str], Selected] | None:
    """What a run selected of the rows it collected, or None when it selected every item of each gate that its
    marker expression keeps (a whole-row run, judged as ever). ``gates``: each gate of the collected rows (a row
    whose file did not load: its `<file>` item) and whether the marker expression keeps it; ``declared``: the
    items of each gate collected; ``chosen``: the items selected (after -k, node ids and the like)."""
    found: dict[tuple[str, str], Selected] = {}
    whole = True
    for key, kept in gates.items():
        names, picked = declared.get(key), chosen.get(key, set())
        if picked:
            found[key] = Selected(len(picked), len(names) if names else 0)
        if kept:
            whole = whole and bool(picked) and (names is None or set(names) <= picked)
    return None if whole else found
