"""How much of a row the judged implementation answers (docs/gating-a-port.md): "myport: 2/17 operations implemented".

M is the operations the row's gates name (`operation:`); N those of them the implementation answers: all of them for
the python port (each operation has its Python binding), for an external one those its worker listed at the
handshake (docs/worker-protocol.md §12) and did not answer `not-implemented` when called in this run.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from _vllm_gates.definitions.implementations import PYTHON
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.results.outcomes import OperationCount

if TYPE_CHECKING:
    from _vllm_gates.results.verdicts import ClaimResult, RowReport, RunReport
    from _vllm_gates.run.evidence import Assessed

OWN_CLAIM_STATE = "GATING"  # the state the hint proposes: it tolerates NOT-IMPLEMENTED gates, as a port in progress reads


def count_operations(gate_file: GateFile, impl: str, listed: frozenset[str] | None,
                     absent: frozenset[str] = frozenset()) -> OperationCount | None:
    """The count for one row: ``listed`` the operations the worker listed (None: the python port, which answers every
    operation), ``absent`` the operations it answered `not-implemented` when called. None when the row's gates name
    no operation and the python port is judged (nothing to count)."""
    used = tuple(dict.fromkeys(g.operation for g in gate_file.gates if g.operation is not None))
    python_only = tuple(g.id for g in gate_file.gates if g.operation is None) if impl != PYTHON else ()
    if not used and not python_only:
        return None
    answered = set(used) if listed is None else set(listed) - absent
    return OperationCount(impl, tuple(op for op in used if op in answered), tuple(op for op in used if op not in answered),
                          python_only)


def with_operation_counts(report: RunReport, gate_files: Mapping[str, GateFile], impl: str,
                          listed: Mapping[str, frozenset[str]] | None) -> RunReport:
    """Each row's operation count, where it is known: the python port's always; an external implementation's for
    the rows whose worker this run asked (``listed``, by row)."""
    operation_of = {(gf.row, g.id): g.operation for gf in gate_files.values() for g in gf.gates}
    absent: dict[str, set[str]] = {}
    for item in report.items:
        operation = operation_of.get((item.row, item.gate))
        if operation is not None and item.not_implemented is not None:
            absent.setdefault(item.row, set()).add(operation)
    rows = []
    for row in report.rows:
        gate_file = gate_files.get(row.row)
        known = impl == PYTHON or (listed is not None and row.row in listed)
        count = None
        if gate_file is not None and known:
            count = count_operations(gate_file, impl, None if impl == PYTHON else listed[row.row],  # type: ignore[index]
                                     frozenset(absent.get(row.row, ())))
        rows.append(replace(row, operations=count))
    return replace(report, rows=tuple(rows))


def answered_on_evidence(assessed: Mapping[tuple[str, str], list[Assessed]]) -> dict[str, frozenset[str]]:
    """By row, the operations an earlier run's worker answered, from a report that holds usable evidence for a gate of
    the row: the same fingerprint, so the same build of the same implementation and the same gate file (`gates
    verdict` runs no worker to ask)."""
    found: dict[str, frozenset[str]] = {}
    for (row, _), entries in assessed.items():
        for entry in entries:
            if entry.usable and entry.evidence.answered is not None:
                found.setdefault(row, entry.evidence.answered)
    return found


def with_claims_hints(report: RunReport, impl: str) -> RunReport:
    """A row whose claim an external implementation misses only for want of operations (each unmet claim of it
    NOT-IMPLEMENTED) says so, and names the key of pyproject.toml that states the implementation's own claim
    (docs/gating-a-port.md, "Your port's own claims"). Run after ``with_operation_counts``."""
    from _vllm_gates.results.verdicts import Verdict

    if impl == PYTHON:
        return report
    rows = []
    for row in report.rows:
        unmet = [claim for claim in (*row.milestones, row.claim) if claim.judged and not claim.claim_met]
        if unmet and all(claim.verdict is Verdict.NOT_IMPLEMENTED for claim in unmet):
            row = replace(row, claim=replace(row.claim, reason=f"{row.claim.reason}: {_claims_hint(row, impl, unmet)}"))
        rows.append(row)
    return replace(report, rows=tuple(rows))


def _claims_hint(row: RowReport, impl: str, unmet: list[ClaimResult]) -> str:
    """What ``impl`` lacks of the row, and the claims entry that would state its own claim for it."""
    from _vllm_gates.base.tomlsource import SECTION, toml_key

    count = row.operations
    lacks = []
    if count is not None and count.missing:
        lacks.append(f"operation{'s' if len(count.missing) > 1 else ''} {', '.join(count.missing)}")
    if count is not None and count.python_only:
        lacks.append(f"the Python targets of gate{'s' if len(count.python_only) > 1 else ''} {', '.join(count.python_only)}")
    what = " nor ".join(lacks) or "the operations of the row's gates"
    milestones = [claim.milestone for claim in unmet if claim.milestone is not None]
    key = toml_key([row.row])
    if len(milestones) == len(row.milestones):
        entry = f'{key} = "{OWN_CLAIM_STATE}"'
    else:
        lowered = ", ".join(f'{toml_key([m])} = "{OWN_CLAIM_STATE}"' for m in milestones)
        entry = f'{key} = {{ state = "{OWN_CLAIM_STATE}", milestones = {{ {lowered} }} }}'
    own = [claim for claim in unmet if claim.claimed_by == impl]
    whose = (f"{impl}'s own claim in pyproject.toml says {own[0].state}: lower it to" if own else
             f"the roadmap's claims are the Python port's: to judge {impl} on a claim of its own, add")
    return (f"{impl!r} does not implement {what} ({whose} {entry} under [{SECTION}.implementations.{toml_key([impl])}.claims] "
            f"in pyproject.toml; docs/gating-a-port.md, \"Your port's own claims\")")
