"""The shared example database of gate runs (README, "A shared example database"): the failing examples of
each gate's properties saved in Hypothesis' directory database, read back first by a later run of the same gate.

One directory is read and written (a CI job uploads it as an artifact); others are only read (a downloaded artifact,
wrapped in Hypothesis' ReadOnlyDatabase), all behind one MultiplexedDatabase. A path that cannot be used is refused
with the reason, and the run goes on without it.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DatabasePath:
    """A database directory as it was given: the path, and where it was given (the flag or the pyproject key)."""

    path: Path
    given_by: str


@dataclass(frozen=True)
class SharedExamples:
    """The run's example database (a Hypothesis ExampleDatabase) and how the summary names it."""

    database: Any
    shown: str

    def for_gate(self, row: str, gate: str, impl: str) -> GateExamples | None:
        """The database under the key of one gate's properties judged on ``impl``; None where the loaded profile
        does not read a database (no reuse phase, as `gates mutate`'s profile)."""
        from hypothesis import Phase, settings

        if Phase.reuse not in settings.default.phases:  # type: ignore[union-attr]  # typed Optional; a profile is always loaded
            return None
        return GateExamples(self.database, gate_key(row, gate, impl), self.shown)


def gate_key(row: str, gate: str, impl: str) -> bytes:
    """The key of a gate's properties: its examples replay for that gate and implementation alone."""
    return f"vllm-gates\0{row}\0{gate}\0properties\0{impl}".encode()


@dataclass(frozen=True)
class GateExamples:
    """One gate's examples in the run's database."""

    database: Any
    key: bytes
    shown: str

    def any_saved(self) -> bool:
        """Whether an earlier run saved an example under this gate's key (Hypothesis' primary or secondary corpus)."""
        return any(True for key in (self.key, self.key + b".secondary") for _ in self.database.fetch(key))

    def replayed(self) -> tuple[str, str]:
        """The failure report's line on an example that came from the database."""
        return ("database", f"a failing example saved in the example database ({self.shown}) by an earlier run; "
                            "it ran before any generated one (the seed alone may not draw it)")


def open_shared_examples(written: DatabasePath | None, read_only: Sequence[DatabasePath]) -> tuple[SharedExamples | None, list[str]]:
    """The database of ``written`` (read and written, created if missing) and ``read_only`` (read only), and the
    refusals of those that cannot be used: each names the path, where it was given and why."""
    from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase, ReadOnlyDatabase

    refusals: list[str] = []
    parts: list[Any] = []
    shown: list[str] = []
    if written is not None:
        why = _unwritable(written.path)
        if why:
            refusals.append(_refusal(written, why, "read and written"))
        else:
            parts.append(DirectoryBasedExampleDatabase(written.path))
            shown.append(f"{written.path} (read and written)")
    for entry in read_only:
        why = _unreadable(entry.path)
        if why:
            refusals.append(_refusal(entry, why, "read"))
        else:
            parts.append(ReadOnlyDatabase(DirectoryBasedExampleDatabase(entry.path)))
            shown.append(f"{entry.path} (read only)")
    if not parts:
        return None, refusals
    database = parts[0] if len(parts) == 1 else MultiplexedDatabase(*parts)
    return SharedExamples(database, ", ".join(shown)), refusals


def _refusal(entry: DatabasePath, why: str, use: str) -> str:
    return f"example database {entry.path} ({entry.given_by}) cannot be {use}: {why}; the run goes on without it"


def _unwritable(path: Path) -> str:
    """Why ``path`` cannot hold a database this run writes ("" when it can); a missing directory is created."""
    if path.exists() and not path.is_dir():
        return "it is not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        return f"it is not writable ({error.strerror or error})"
    return ""


def _unreadable(path: Path) -> str:
    """Why ``path`` cannot be read as a database ("" when it can): it must be an existing directory."""
    if not path.exists():
        return "no such directory"
    if not path.is_dir():
        return "it is not a directory"
    if not os.access(path, os.R_OK | os.X_OK):
        return "it is not readable"
    return ""
