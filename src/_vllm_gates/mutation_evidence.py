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

from _vllm_gates.errors import GatesError
from _vllm_gates.evidence import read_report
from _vllm_gates.mutate_report import MUTATION_SCHEMA  # the one schema id, written by gates mutate

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
    found: dict[str, RowStrength] = {}
    families = document.get("families")
    if families:  # `gates mutate --family`: a score of some operator families, which no claim on the row may read
        raise MutationEvidenceError(f"--mutation {shown}: measured with --family {' --family '.join(map(str, families))}: "
                                    f"its scores count only those families' mutants, not a row's; measure without --family")
    rows = document.get("rows")
    if not isinstance(rows, list):
        raise MutationEvidenceError(f"--mutation {shown}: `rows` is {type(rows).__name__}, expected a list")
    for index, row in enumerate(rows):
        try:
            strength = _strength(row)
        except (KeyError, TypeError, ValueError) as exc:
            raise MutationEvidenceError(f"--mutation {shown}: rows[{index}] is malformed ({type(exc).__name__}: {exc})") from None
        found[strength.row] = strength
    return found


def _count(row: Mapping[str, Any], key: str) -> int:
    value = row[key]
    if type(value) is not int or value < 0:
        raise ValueError(f"{key} = {value!r}, expected a whole number >= 0")
    return value


def _strength(row: Mapping[str, Any]) -> RowStrength:
    name, fingerprint = row["row"], row["sources_fingerprint"]
    if not isinstance(name, str) or not isinstance(fingerprint, str):
        raise TypeError("row and sources_fingerprint must be text")
    mutants = row.get("mutants") or []
    files = row.get("files") or sorted({m["file"] for m in mutants})
    if not all(isinstance(f, str) for f in files):
        raise TypeError("a mutant's file must be text")
    killed = _count(row, "killed")
    counted = (_count(row, "generated") - _count(row, "equivalent") - _count(row, "not_compiling")
               - (_count(row, "not_run_here") if "not_run_here" in row else 0))  # reports before it had none
    if counted < 0 or killed > max(counted, 0):
        raise ValueError(f"killed {killed} of {counted} counted mutants")
    survivors = tuple(str(m.get("fingerprint", "")) for m in mutants if m.get("status") == "survived")
    return RowStrength(name, fingerprint, tuple(files), killed, counted, killed / counted if counted else None, survivors)


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
