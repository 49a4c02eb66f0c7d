"""An implementation that cannot be used, told once, not per gate: its build fails, its worker command cannot
start, or a setting named in `file-settings` names no readable file. Each is one definition error at the line of
that setting in pyproject.toml; every gate judged with the implementation is ERROR with a one-line pointer to it.
"""
from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from _vllm_gates.base.errors import Location, Problem
from _vllm_gates.base.tomlsource import SECTION
from _vllm_gates.base.yamlsource import file_kind
from _vllm_gates.definitions.config import Config, setting_location
from _vllm_gates.definitions.implementations import Implementation


def setting_problem(config: Config, impl: Implementation, setting: str, message: str) -> Problem:
    """A definition error of ``impl``'s ``setting`` (`command`, `build`, `settings.header`), at its pyproject.toml line."""
    key = f"implementations.{impl.name}.{setting}"
    return Problem(setting_location(config, key), f"[{SECTION}] {key}", message)


def before_run(config: Config, impl: Implementation) -> list[Problem]:
    """What keeps ``impl`` from being used, told before any gate runs: its build (an external one is built first
    when out of date), else each file setting that names no readable file."""
    if impl.external:
        from _vllm_gates.definitions.builds import ensure_built

        failure = ensure_built(impl, config.root)
        if failure is not None:
            return [setting_problem(config, impl, failure.setting, failure.message)]
    found = []
    for name, value in impl.settings:
        why = _unreadable(config.root, value) if name in config.file_settings else None
        if why:
            found.append(setting_problem(config, impl, f"settings.{name}", f"{name} = {value!r} {why}"))
    return found


def _unreadable(root: Path, value: str) -> str | None:
    """Why the file a setting names (relative to the project root, or absolute) cannot be read; None when it can."""
    path = Path(value) if Path(value).is_absolute() else root / value
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "names no file (a path relative to the project root, or absolute)"
    except (OSError, ValueError) as error:
        return f"names a file that cannot be read: {error}"
    if not stat.S_ISREG(mode):
        return f"names {file_kind(mode)}, not a regular file"
    if not os.access(path, os.R_OK):
        return "names a file this user may not read"
    return None


def not_started(config: Config, impl: Implementation, said: str, label: str) -> Problem:
    """The worker command of ``impl`` did not start (an OS error, or it ended or broke the protocol before its ready);
    ``said``: how, as the worker's ``label`` ("impl of gates/rows/x/gate.yaml") reported it."""
    how = said.removeprefix(f"worker {label} ")
    return setting_problem(config, impl, "command", f"the worker `{shlex.join(impl.command)}` "
                                                    + (how if how != said else f"did not start: {said}"))


def pointer(problems: list[Problem], impl: str, where: Location) -> Problem:
    """What each gate judged with an implementation that cannot be used says, at the gate's line: one line that
    points at the definition error (reported once in the run, not again here)."""
    first = problems[0]
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return Problem(where, f"implementation {impl}",
                   f"cannot be used: see the definition error at {first.location.path}:{first.location.line} "
                   f"({first.key.removeprefix(f'[{SECTION}] ')}){more}, reported once in this run")
