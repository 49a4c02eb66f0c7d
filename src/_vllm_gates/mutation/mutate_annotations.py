"""A mutation report's survivors as GitHub Actions workflow commands (`::warning file=F,line=L,title=T::message`), the
annotation format a pull request's review shows on the changed lines (docs/mutation.md, "Changed lines")."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def _escaped(text: str, in_property: bool = False) -> str:
    """GitHub's escaping of a workflow command's message (and, with ``in_property``, of a property's value)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if in_property else text


def mutated_line(diff: str) -> str:
    """The first line a mutant's unified diff adds, without its `+` (empty when it adds none)."""
    return next((line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")), "")


def survivor_annotations(document: Mapping[str, Any]) -> Iterator[str]:
    """One `::warning` line per survivor of every row, in report order: where it is, its operator, the gates that ran
    it and passed, and the mutated line."""
    for row in document.get("rows", []):
        for mutant in row.get("mutants", []):
            if mutant.get("status") != "survived":
                continue
            gates = ", ".join(mutant.get("gates_run") or []) or "no gate"
            title = f"Mutant survived ({row['row']})"
            message = (f"{mutant['operator']} survived every gate that ran it ({gates}): the gates cannot tell "
                       f"`{mutated_line(mutant.get('diff', ''))}` from the code. Add a case that fails it, or declare it "
                       f"equivalent (id {mutant['id']}, fingerprint {mutant['fingerprint']}).")
            yield (f"::warning file={_escaped(mutant['file'], True)},line={int(mutant['line'])},"
                   f"title={_escaped(title, True)}::{_escaped(message)}")
