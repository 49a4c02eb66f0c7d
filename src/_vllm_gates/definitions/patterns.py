"""Project-relative glob patterns (`sources:`, `rows`, `specs`): one meaning wherever a pattern meets a path.

pathlib's `Path.glob` meaning (docs/gate-files.md, "Sources"): `*`, `?` and `[...]` match within
one part of a path, never across `/`; `**` as a whole part matches zero or more folders, and at the end of a pattern
every file below. Files in cache folders (SKIPPED_FOLDERS) are never matched; a `**` does not enter symlinked folders.
"""
from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path

SKIPPED_FOLDERS = frozenset({".git", "__pycache__", ".pytest_cache", ".hypothesis"})
_WILDCARD = frozenset("*?[")


def pattern_parts(pattern: str) -> tuple[str, ...]:
    """The parts of ``pattern`` as pathlib reads them (empty and `.` parts dropped); ValueError for an empty pattern
    or a `**` inside a part (`a**b`), which Python 3.11's pathlib refuses."""
    parts = tuple(part for part in pattern.split("/") if part not in ("", "."))
    if not parts:
        raise ValueError(f"empty pattern {pattern!r}")
    inside = next((part for part in parts if "**" in part and part != "**"), None)
    if inside is not None:
        raise ValueError(f"invalid pattern {pattern!r}: '**' can only be an entire path component")
    return parts


def folder_pattern(folder: str) -> str:
    """The pattern of every file below the literal ``folder`` (its `*`, `?` and `[` taken as themselves)."""
    return f"{glob.escape(folder)}/**"


def matches(path: str, pattern: str) -> bool:
    """Whether the project-relative POSIX ``path`` of a file is one that ``pattern`` matches."""
    parts = tuple(path.split("/"))
    return not SKIPPED_FOLDERS & set(parts[:-1]) and _match(parts, pattern_parts(pattern))


def _match(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return bool(parts) if not rest else any(_match(parts[skip:], rest) for skip in range(len(parts)))
    return bool(parts) and fnmatchcase(parts[0], head) and _match(parts[1:], rest)


def files_matching(root: Path, pattern: str) -> Iterator[str]:
    """The files under ``root`` that ``pattern`` matches, as POSIX paths relative to it, each once, unsorted (lazy:
    `any(...)` stops at the first)."""
    seen: set[str] = set()
    for found in _walk(root, "", pattern_parts(pattern)):
        if found not in seen:
            seen.add(found)
            yield found


def _walk(folder: Path, prefix: str, pattern: tuple[str, ...]) -> Iterator[str]:
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        if not rest:
            yield from _below(folder, prefix)
            return
        yield from _walk(folder, prefix, rest)
        for entry in _entries(folder):
            if entry.name not in SKIPPED_FOLDERS and entry.is_dir(follow_symlinks=False):
                yield from _walk(Path(entry.path), f"{prefix}{entry.name}/", pattern)
        return
    if _WILDCARD.isdisjoint(head):  # a literal part: looked up, not listed
        names: Iterable[str] = (head,)
    else:
        names = (entry.name for entry in _entries(folder) if fnmatchcase(entry.name, head))
    for name in names:
        path = folder / name
        if not rest and path.is_file():
            yield prefix + name
        elif rest and name not in SKIPPED_FOLDERS and path.is_dir():
            yield from _walk(path, f"{prefix}{name}/", rest)


def _below(folder: Path, prefix: str) -> Iterator[str]:
    """Every file at any depth below ``folder``; cache folders and symlinked folders not entered."""
    for entry in _entries(folder):
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in SKIPPED_FOLDERS:
                yield from _below(Path(entry.path), f"{prefix}{entry.name}/")
        elif entry.is_file():
            yield prefix + entry.name


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of ``folder``; none when it is not a readable folder (as pathlib's glob skips it)."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except (OSError, ValueError):
        return []


# `sources:` lists: include patterns and `!` exclusions ------------------------------------------------------------


def excluded(path: str, patterns: Iterable[str]) -> bool:
    """Whether a `!` pattern of a `sources:` list matches ``path``."""
    return any(matches(path, pattern[1:]) for pattern in patterns if pattern.startswith("!"))


def declaring_pattern(path: str, patterns: Iterable[str]) -> str | None:
    """The first include pattern of a `sources:` list that matches ``path``; None when none does or a `!` excludes it."""
    patterns = tuple(patterns)
    if excluded(path, patterns):
        return None
    return next((pattern for pattern in patterns if not pattern.startswith("!") and matches(path, pattern)), None)


def declared_files(root: Path, patterns: Iterable[str]) -> list[str]:
    """The files under ``root`` a `sources:` list declares: matched by an include pattern, by no `!` pattern; sorted."""
    patterns = tuple(patterns)
    found = {path for pattern in patterns if not pattern.startswith("!") for path in files_matching(root, pattern)}
    return sorted(path for path in found if not excluded(path, patterns))
