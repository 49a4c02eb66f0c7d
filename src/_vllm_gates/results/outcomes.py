"""An item's outcome and why it was skipped, as data from where the skip arises to the verdict (never parsed back from its text).

The sentences reports show are rendered from these (``text``); nothing reads a sentence back. A cause crosses
pytest-xdist as plain data (``to_data`` / ``from_data``) beside the item's report.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class ItemOutcome(str, Enum):
    """What one gate item did in a run (its phases folded: a failure outside the call is an error)."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"


@dataclass(frozen=True)
class RequirementUnmet:
    """Skipped: the item's marker requires what this machine lacks (e.g. marker gpu, requirement cuda)."""

    marker: str
    requirement: str
    reason: str

    def text(self) -> str:
        return f"{self.marker} gate skipped: {self.reason}"


@dataclass(frozen=True)
class NotImplementedBy:
    """Skipped: the judged implementation does not provide (all of) the gate's operation; the gate is NOT-IMPLEMENTED."""

    impl: str
    why: str

    def text(self) -> str:
        return f"not implemented by {self.impl!r}: {self.why}"

    def but(self, why: str) -> NotImplementedBy:
        """The same implementation, another account of what it lacks."""
        return NotImplementedBy(self.impl, why)


SkipCause = RequirementUnmet | NotImplementedBy
_KINDS: dict[str, type[RequirementUnmet] | type[NotImplementedBy]] = {
    "requirement-unmet": RequirementUnmet, "not-implemented": NotImplementedBy}


def to_data(cause: SkipCause) -> dict[str, str]:
    """The cause as plain data (it travels in a report's ``user_properties`` between xdist processes)."""
    kind = next(name for name, cls in _KINDS.items() if isinstance(cause, cls))
    return {"kind": kind, **{name: str(value) for name, value in vars(cause).items()}}


def from_data(data: Mapping[str, Any]) -> SkipCause:
    """The cause ``to_data`` wrote."""
    fields = dict(data)
    return _KINDS[fields.pop("kind")](**fields)


@dataclass(frozen=True)
class OperationCount:
    """The operations a row's gates use, split into those the implementation answers and those it does not; and the
    gates naming a Python target instead of an operation, which only the python implementation can answer."""

    impl: str
    implemented: tuple[str, ...]
    missing: tuple[str, ...]
    python_only: tuple[str, ...] = ()  # gate ids

    @property
    def text(self) -> str:
        """E.g. "myport: 2/17 operations implemented (missing: kv-plan, …)"."""
        used = len(self.implemented) + len(self.missing)
        text = f"{self.impl}: {len(self.implemented)}/{used} operations implemented"
        if self.missing:
            shown = ", ".join(self.missing[:5]) + (f" and {len(self.missing) - 5} more" if len(self.missing) > 5 else "")
            text += f" (missing: {shown})"
        if self.python_only:
            text += f"; {len(self.python_only)} gate(s) name a Python target, not an operation: {', '.join(self.python_only)}"
        return text
