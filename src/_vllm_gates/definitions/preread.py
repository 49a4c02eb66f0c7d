"""A pyproject.toml already read in this process, handed on so that a run reads it once
(one snapshot per run: the command and the plugin see the same file).

The pytest entry reads the file to decide whether the engine loads; the engine's configuration reader, and the
entry after `gates` read it, take the text from here instead of opening the file again. A text is handed on only
while the file's identity, size and modification time are those it was read with, and only once.
"""
from __future__ import annotations

import os

_TEXTS: dict[str, tuple[tuple[int, int, int, int], str]] = {}


def _identity(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def remember(path: os.PathLike[str] | str, text: str) -> None:
    """Keep ``text``, just read from ``path``, for the next reader of the same unchanged file."""
    try:
        _TEXTS[os.path.realpath(path)] = (_identity(os.fspath(path)), text)
    except OSError:
        pass  # gone already: the next reader reads (and reports) it


def recall(path: os.PathLike[str] | str) -> str | None:
    """The text remembered for ``path`` if the file is unchanged since, once; None: read it."""
    kept = _TEXTS.pop(os.path.realpath(path), None)
    if kept is None:
        return None
    try:
        return kept[1] if _identity(os.fspath(path)) == kept[0] else None
    except OSError:
        return None
