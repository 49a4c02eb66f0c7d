"""Requirement ids declared by a row's spec: list items or headings that start with a bold id (`- **MEM-1.2** ...`)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from _vllm_gates.base.yamlsource import read_definition_text

REQUIREMENT_ID = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)*-\d+(\.\d+)*$")
_DECLARATION = re.compile(r"^\s*(?:[-*+]|#{1,6}|\d+\.)\s+\*\*([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*-\d+(?:\.\d+)*)\*\*")


@dataclass(frozen=True)
class SpecRequirement:
    """A numbered requirement and the line that declares it."""

    id: str
    path: str
    line: int
    text: str


def requirements_in(path: Path, display_path: str | None = None) -> list[SpecRequirement]:
    """Every requirement declared in a Markdown spec, in file order.

    DefinitionError at the spec's first line when it is not a regular file, is over the size limit
    (yamlsource.MAX_FILE_BYTES) or is not UTF-8: it is stat-ed before it is opened, and never read past the limit.
    """
    shown = display_path or str(path)
    found = []
    for number, line in enumerate(read_definition_text(path, shown, "spec file").splitlines(), start=1):
        match = _DECLARATION.match(line)
        if match:
            text = line[match.end():].strip()
            found.append(SpecRequirement(match.group(1), shown, number, text))
    return found
