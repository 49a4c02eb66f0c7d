"""Claims that require strength (docs/reports.md): a milestone stating `mutation: 0.9` is DONE only when a mutation
report of its row, measured on the sources as they are now, scored at least that."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from _vllm_gates.definitions.model import Roadmap
from _vllm_gates.results.verdicts import MILESTONE_UNMET, ClaimResult, RowReport, RunReport
from _vllm_gates.run.mutation_evidence import RowStrength, read_mutation_report, row_strengths, sources_fingerprint


@dataclass(frozen=True)
class MutationEvidence:
    """The mutation reports a verdict was given (``shown``: their names as written), each row's strength in them."""

    shown: tuple[str, ...]
    rows: Mapping[str, RowStrength]


def load_mutation_evidence(shown: str | None) -> MutationEvidence:
    """The `--mutation` report's rows (None given: an empty record, so a `mutation:` claim is refused and says so);
    MutationEvidenceError naming the file when it cannot be used."""
    if shown is None:
        return MutationEvidence((), {})
    return MutationEvidence((shown,), row_strengths(read_mutation_report(Path(shown), shown), shown))


def shortfall(row: str, milestone: str, required: float, evidence: MutationEvidence, root: Path) -> str | None:
    """Why a DONE claim of ``milestone`` that requires mutation score ``required`` is not met (None: it is)."""
    wanted = f"{milestone} claims DONE with mutation >= {required:g}"
    if not evidence.shown:
        return f"{wanted}; no mutation report was given (--mutation F, from `gates mutate`)"
    strength = evidence.rows.get(row)
    if strength is None:
        return f"{wanted}; {', '.join(evidence.shown)} has no mutation run of {row}"
    if strength.sources_fingerprint != sources_fingerprint(root, strength.files):
        return (f"{wanted}; the mutation run of {row} measured other sources (its files changed since: "
                f"{', '.join(strength.files[:5])}{' ...' if len(strength.files) > 5 else ''})")
    if strength.score is None or strength.score < required:
        return f"{wanted}; the mutation run scored {strength.describe()}"
    return None


def judge_strength(report: RunReport, roadmap: Roadmap, evidence: MutationEvidence, root: Path) -> RunReport:
    """The report with each met DONE claim of a milestone stating `mutation:` refused where the evidence falls
    short (the reason names the score), and its row's claim with it."""
    rows = []
    for row_report in report.rows:
        row = roadmap.row(row_report.row)
        milestones = []
        for claim in row_report.milestones:
            required = getattr(row.milestone(claim.milestone), "mutation", None) if row and claim.milestone else None
            why = (shortfall(row_report.row, claim.milestone or "", required, evidence, root)
                   if required is not None and claim.state == "DONE" and claim.claim_met and claim.judged else None)
            milestones.append(replace(claim, claim_met=False, reason=why) if why else claim)
        rows.append(_with_milestones(row_report, tuple(milestones)))
    return replace(report, rows=tuple(rows))


def _with_milestones(row: RowReport, milestones: tuple[ClaimResult, ...]) -> RowReport:
    claim = row.claim
    if claim.claim_met and not all(m.claim_met for m in milestones):
        claim = replace(claim, claim_met=False, reason=MILESTONE_UNMET)
    return replace(row, milestones=milestones, claim=claim)
