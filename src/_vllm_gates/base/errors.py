"""The engine's errors: GatesError, the base of every kind it raises, and where a definition is wrong (places in
files, problems at those places, and the DefinitionError that carries them). Imports nothing of the engine."""
from __future__ import annotations

from dataclasses import dataclass


class GatesError(Exception):
    """The base of every error kind the engine raises (docs/architecture.md); `except GatesError` catches the engine's
    own errors, never one raised by the code under gate. Internal control flow (checks._StopShrinking, a
    BaseException on purpose, and plain._Irregular) is not an error kind and stays outside."""


@dataclass(frozen=True)
class Location:
    """A place in a definition file; line and column are 1-based."""

    path: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One definition error: where, which key, what is wrong; ``cause`` names the root error it follows from (such
    as "row ROAD-V1-MEM" for a reference to a row whose gate file does not load), so a report can fold it there."""

    location: Location
    key: str
    message: str
    cause: str = ""

    def __str__(self) -> str:
        where = f"{self.key}: " if self.key else ""
        return f"{self.location}: {where}{self.message}"


class DefinitionError(GatesError):
    """A gate file, roadmap, spec, target or configuration that cannot be used as written: a list of problems."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
