"""Whether a target that raised ImportError lacks something not installed here (a package outside the project: a
skip with the reason, as `gates diverge` skips a reference) or is the project's own broken module (an error). At its
import it is read from the refusal targets.resolve writes (`cannot import module 'M' for target 'T': ...`)."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from _vllm_gates.base.errors import DefinitionError

UNAVAILABLE_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})
"""What a target raises, at its import or its call, when what it needs is not installed."""
_REFUSAL = re.compile(r"cannot import module '[^']+' for target '[^']+': (\w+): (.*)$", re.S)
_MISSING = re.compile(r"No module named '([^']+)'|cannot import name '[^']+' from '([^']+)'")


def missing_package(kind: str, message: str, path: Iterable[str]) -> str | None:
    """`KIND: MESSAGE` where an exception of class ``kind`` says something is not installed: an ImportError naming no
    module of the project's own (no folder or file of its top-level name on ``path``, the worker's import path);
    None for any other exception."""
    if kind not in UNAVAILABLE_ERRORS:
        return None
    missing = _MISSING.search(message)
    if missing is not None:
        top = (missing.group(1) or missing.group(2)).split(".")[0]
        if any((Path(folder) / top).is_dir() or (Path(folder) / f"{top}.py").is_file() for folder in path):
            return None  # the project's own module: its error, not a missing package
    return f"{kind}: {message}"


def not_installed(error: DefinitionError, path: Iterable[str]) -> str | None:
    """The reason a refused target cannot run here where its import raised missing_package's ImportError; None
    where any of the refusal's problems is another."""
    folders = tuple(path)
    reasons = []
    for problem in error.problems:
        refused = _REFUSAL.search(problem.message)
        reasons.append(missing_package(refused.group(1), refused.group(2), folders) if refused else None)
    return reasons[0] if reasons and all(reasons) else None
