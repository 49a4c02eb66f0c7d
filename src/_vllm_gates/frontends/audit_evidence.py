"""`gates audit --evidence F`: the audit table from a run that already judged the audit items, known-bads and
known-goods.

Every gate run judges each gate's audit stand-in, known-bads and known-goods as items (README, `gates audit`), so a
run's JSON report holds the audit. A gate's audit is taken from a report only when that report executed the gate
under the fingerprint the gate has now, with the implementation audited here, on a real device, and holds its audit
item and an item for every known-bad and known-good the gate declares now; the other gates' items are run (no item
runs twice).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from _vllm_gates.definitions.model import Gate, GateFile
from _vllm_gates.definitions.project import Project
from _vllm_gates.results.records import ItemKind, ItemResult
from _vllm_gates.results.report_files import RunReportFile
from _vllm_gates.run.audit import AuditLine, audit_lines, audit_table
from _vllm_gates.run.evidence import evidence_in, read_run_report
from _vllm_gates.run.exitcodes import ExitCode, combined, exit_code
from _vllm_gates.run.fingerprints import Fingerprinter
from _vllm_gates.values.policies import has_tolerance

AUDIT_KINDS = frozenset(kind.value for kind in (ItemKind.AUDIT, ItemKind.KNOWN_BAD, ItemKind.KNOWN_GOOD, ItemKind.STRENGTH))


@dataclass(frozen=True)
class Split:
    """The selected gates' audit items found in evidence (with the report each came from), and the node ids of the
    items of the gates that must run here."""

    found: Mapping[tuple[str, str], tuple[str, tuple[ItemResult, ...]]]
    to_run: tuple[str, ...]


def _audit_items(report: RunReportFile) -> dict[tuple[str, str], list[ItemResult]]:
    """The audit, known-bad, known-good and strength items of a run report, by (row, gate)."""
    found: dict[tuple[str, str], list[ItemResult]] = {}
    for item in report.items:
        if item.kind in AUDIT_KINDS:
            found.setdefault((item.row, item.gate), []).append(item)
    return found


def _wanted(gate: Gate) -> set[str]:
    return {"audit", *(f"known_bad[{kb.name}]" for kb in gate.known_bad), *(f"known_good[{kg.name}]" for kg in gate.known_good),
            *(["strength"] if has_tolerance(gate.policy) else [])}


def selected_gates(project: Project, rows: list[str], markexpr: str) -> list[tuple[GateFile, Gate]]:
    """The gates `gates audit ROW… --marker M` audits: those of the rows asked for (all when none) whose markers the
    -m expression selects (every gate for ``all``)."""
    from _vllm_gates.run.pytest_compat import marker_expression

    keeps = marker_expression(markexpr) if markexpr else None
    return [(gf, gate) for gf in project.gate_files if not rows or gf.row in rows for gate in gf.gates
            if keeps is None or keeps(gate.markers)]


def split(project: Project, gates: list[tuple[GateFile, Gate]], evidence: list[str], impl: str) -> Split:
    """Which gates' audits the evidence reports hold as the gates are now, and which must run; EvidenceError names a
    report that cannot be read."""
    usable: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (row, gate) -> [(fingerprint, report)]
    items: dict[str, dict[tuple[str, str], list[ItemResult]]] = {}
    for shown in evidence:
        report = read_run_report(Path(shown), shown)
        for entry in evidence_in(report, shown):
            if entry.impl == impl and not entry.simulated:
                usable.setdefault((entry.row, entry.gate), []).append((entry.fingerprint, shown))
        items[shown] = _audit_items(report)
    maker = Fingerprinter(project.config, impl)
    found: dict[tuple[str, str], tuple[str, tuple[ItemResult, ...]]] = {}
    to_run: list[str] = []
    for gate_file, gate in gates:
        key = (gate_file.row, gate.id)
        now = maker.gate(gate_file, gate, project.roadmap.row(gate_file.row)).fingerprint if key in usable else None
        for fingerprint, shown in usable.get(key, ()):
            held = [i for i in items[shown].get(key, ()) if i.name in _wanted(gate)]
            if fingerprint == now and {i.name for i in held} == _wanted(gate):
                found[key] = (shown, tuple(held))
                break
        else:
            to_run.extend(f"{gate_file.path}::{gate.id}::{name}" for name in sorted(_wanted(gate)))
    return Split(found, tuple(to_run))


def audit_on_evidence(project: Project, rows: list[str], markexpr: str, impl: str, evidence: list[str],
                      run: Callable[[list[str]], int]) -> int:
    """Print the audit table of the gates the evidence holds, run the audit of the others through ``run`` (given
    their items' node ids; it prints its own table), and return the worse of the two exit codes."""
    parts = split(project, selected_gates(project, rows, markexpr), evidence, impl)
    lines: list[AuditLine] = audit_lines([i for _, held in parts.found.values() for i in held])
    sources = sorted({shown for shown, _ in parts.found.values()})
    if lines:
        print(f"from evidence ({', '.join(sources)}): {len(lines)} gate(s) audited there, under the fingerprints "
              f"they have now; not run again")
        print(audit_table(lines))
    codes = [exit_code(lines)] if lines else []
    if parts.to_run:
        gates = len({node.rsplit("::", 1)[0] for node in parts.to_run})
        print(f"\nno usable evidence for {gates} gate(s) (not in a report, stale, or another implementation): "
              f"running their audit here")
        codes.append(ExitCode(run(list(parts.to_run))))
    if not codes:
        print("nothing to audit: no gate is selected")
        return ExitCode.EMPTY
    return combined(codes)

