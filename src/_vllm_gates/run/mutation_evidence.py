"""A mutation run's report (`gates mutate`, schema vllm-gates/mutation/1) read as evidence of each row's strength.

A row's score counts only for the sources it was measured on (docs/reports.md), so each row carries the fingerprint
of the files its mutants were made from; ``sources_fingerprint`` computes it the same way for the tree as it is now.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _vllm_gates.base.errors import GatesError
from _vllm_gates.results.mutation_records import MutationReport
from _vllm_gates.results.records import RecordError
from _vllm_gates.run.evidence import read_report

MUTATION_SCHEMA = "vllm-gates/mutation/1"  # the one schema id: `gates mutate` writes it (mutate_report), claims read it
MISSING_FILE = "(missing)"  # what a file that no longer exists contributes to a fingerprint


class MutationEvidenceError(GatesError):
    """A mutation report that cannot be used: not there, not JSON, another schema, a malformed row."""


@dataclass(frozen=True)
class RowStrength:
    """One row as a mutation run measured it: its score and what the score counts."""

    row: str
    sources_fingerprint: str
    files: tuple[str, ...]  # the project files its mutants were made from (the fingerprint's inputs)
    killed: int
    counted: int  # generated - equivalent - not_compiling - not_run_here: the score's denominator
    score: float | None  # None: no mutant counted
    survivors: tuple[str, ...]  # the survivors' fingerprints

    def describe(self) -> str:
        shown = "no score" if self.score is None else f"{self.score:.2f}"
        return f"{shown} (killed {self.killed} of {self.counted})"


def read_mutation_report(path: Path, shown: str) -> dict[str, Any]:
    """The report's document; MutationEvidenceError naming ``shown`` when it cannot be read or is not one."""
    return read_report(path, f"--mutation {shown}", MUTATION_SCHEMA, "mutation report",
                       "the --json report of `gates mutate`", MutationEvidenceError)


def row_strengths(document: Mapping[str, Any], shown: str) -> dict[str, RowStrength]:
    """Each row of a mutation report by id; MutationEvidenceError naming the row whose record is malformed."""
    try:
        report = MutationReport.from_data(document, f"--mutation {shown}")
    except RecordError as exc:
        raise MutationEvidenceError(str(exc)) from None
    if report.families:  # `gates mutate --family`: a score of some operator families, which no claim on the row may read
        raise MutationEvidenceError(f"--mutation {shown}: measured with --family {' --family '.join(report.families)}: "
                                    f"its scores count only those families' mutants, not a row's; measure without --family")
    found: dict[str, RowStrength] = {}
    for index, row in enumerate(report.rows):
        killed, counted = row.counts["killed"], row.counted
        if counted < 0 or killed > max(counted, 0):
            raise MutationEvidenceError(f"--mutation {shown}: rows[{index}] is malformed (killed {killed} of {counted} "
                                        f"counted mutants)")
        survivors = tuple(m.fingerprint for m in row.mutants if m.verdict.status == "survived")
        found[row.row] = RowStrength(row.row, row.sources_fingerprint, row.files, killed, counted,
                                     killed / counted if counted else None, survivors)
    return found


def sources_fingerprint(root: Path, files: tuple[str, ...] | list[str]) -> str:
    """The sha256 of the project files ``files`` (relative POSIX paths), in path order: for each, its path, a NUL,
    the sha256 of its bytes (or "(missing)"), a newline. `gates mutate` records this per row."""
    digest = hashlib.sha256()
    for relative in sorted(set(files)):
        try:
            content = hashlib.sha256((root / relative).read_bytes()).hexdigest()
        except OSError:
            content = MISSING_FILE
        digest.update(f"{relative}\0{content}\n".encode())
    return digest.hexdigest()
