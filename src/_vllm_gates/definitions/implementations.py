"""Implementations by name (`[tool.vllm-gates.implementations.NAME]`): the built-in `python` port, and external
ones that speak the worker protocol (docs/worker-protocol.md §12), each with its build, sources and settings.

An external implementation answers a gate's `operation:` (the row's `operations.yaml`); its errors are the
language-neutral kinds of `[tool.vllm-gates.error-kinds]`, to which the Python port's exception classes map.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from _vllm_gates.base.errors import Location
from _vllm_gates.definitions.claims import Claim, read_claims

PYTHON = "python"  # the default implementation: the gate's Python targets, run by the engine's own worker
NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
KIND = re.compile(r"^[a-z][a-z0-9-]*$")
EXCEPTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEYS = {"command", "build", "sources", "build-env", "settings", "description", "claims", "reads"}


@dataclass(frozen=True)
class Implementation:
    """One implementation a run may judge: its worker command (empty: the Python port), how to build it, the files
    its build depends on, the environment variables that change a build, and settings its gates read."""

    name: str
    command: tuple[str, ...] = ()
    build: tuple[tuple[str, ...], ...] = ()
    sources: tuple[str, ...] = ()
    build_env: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    description: str = ""
    claims: tuple[Claim, ...] = ()  # its own claims per row and milestone (claims.py); the roadmap's elsewhere
    reads: tuple[str, ...] | None = None  # what its workers may read in the project (sandbox.py); None: the default

    @property
    def external(self) -> bool:
        return bool(self.command)

    def settings_map(self) -> dict[str, str]:
        return dict(self.settings)


DEFAULT_ERROR_KINDS: tuple[tuple[str, str], ...] = ()


def _argv(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    return None


def read_implementations(table: Any, problem: Callable[[str, str], None],
                         where: Callable[[str], Location] = lambda key: Location("pyproject.toml", 1, 1)) -> tuple[Implementation, ...]:
    """The `implementations` table: `python` (settings only) and external ones, each with its own claims; problems
    name the key and value (``where`` finds the line of a key)."""
    if not isinstance(table, dict):
        problem("implementations", f"expected a table of implementations, got {table!r}")
        return (Implementation(PYTHON),)
    found = {PYTHON: Implementation(PYTHON)}
    for name, body in table.items():
        key = f"implementations.{name}"
        if not NAME.match(name):
            problem(key, f"implementation name {name!r} must match {NAME.pattern}")
            continue
        if not isinstance(body, dict):
            problem(key, f"expected a table, got {body!r}")
            continue
        unknown = sorted(set(body) - KEYS)
        if unknown:
            problem(f"{key}.{unknown[0]}", f"unknown key (accepted: {', '.join(sorted(KEYS))})")
            continue
        settings = _settings(body.get("settings", {}), f"{key}.settings", problem)
        reads = _reads(body["reads"], f"{key}.reads", problem) if "reads" in body else None
        if name == PYTHON:
            extra = sorted(set(body) - {"settings", "description", "reads"})
            if extra == ["claims"]:
                problem(f"{key}.claims", "the roadmap states the python implementation's claims: lower or raise them there")
            elif extra:
                problem(f"{key}.{extra[0]}", "the python implementation is the engine's own worker: only `settings` and "
                                             "`reads` may be set")
            found[name] = Implementation(PYTHON, settings=settings, description=str(body.get("description", "")), reads=reads)
            continue
        command = _argv(body.get("command"))
        if command is None:
            problem(f"{key}.command", f"expected the worker command as a non-empty list of strings, got {body.get('command')!r}")
            continue
        build = body.get("build", [])
        steps = tuple(_argv(step) for step in build) if isinstance(build, list) else (None,)
        if any(step is None for step in steps):
            problem(f"{key}.build", f"expected a list of commands, each a non-empty list of strings, got {build!r}")
            continue
        sources, build_env = body.get("sources", []), body.get("build-env", [])
        if not (isinstance(sources, list) and all(isinstance(s, str) and s for s in sources)):
            problem(f"{key}.sources", f"expected a list of glob patterns, got {sources!r}")
            continue
        if steps and not sources:
            problem(f"{key}.sources", "an implementation with a build needs `sources`: the files whose hash says it is out of date")
            continue
        if not (isinstance(build_env, list) and all(isinstance(s, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", s) for s in build_env)):
            problem(f"{key}.build-env", f"expected a list of environment variable names, got {build_env!r}")
            continue
        claims = read_claims(name, body["claims"], problem, where) if "claims" in body else ()
        found[name] = Implementation(name, command, steps, tuple(sources), tuple(build_env), settings,  # type: ignore[arg-type]
                                     str(body.get("description", "")), claims, reads)
    return tuple(found.values())


def _settings(value: Any, key: str, problem: Callable[[str, str], None]) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        problem(key, f"expected a table of text settings (name = \"value\"), got {value!r}")
        return ()
    return tuple(sorted(value.items()))


def _reads(value: Any, key: str, problem: Callable[[str, str], None]) -> tuple[str, ...] | None:
    """`reads`: paths and glob patterns relative to the project root, what the implementation's workers may read
    (each is checked to stay inside the root where the configuration is read)."""
    if not (isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)):
        problem(key, f"expected a list of paths or glob patterns relative to the project root, got {value!r}")
        return None
    return tuple(value)


def read_error_kinds(table: Any, problem: Callable[[str, str], None]) -> tuple[tuple[str, str], ...]:
    """`error-kinds`: the Python port's exception class names mapped to language-neutral kinds."""
    if not isinstance(table, dict):
        problem("error-kinds", f"expected a table `ExceptionName = \"kind\"`, got {table!r}")
        return ()
    found = []
    for name, kind in table.items():
        if not EXCEPTION_NAME.match(name):
            problem(f"error-kinds.{name}", f"{name!r} is not an exception class name")
        elif not isinstance(kind, str) or not KIND.match(kind):
            problem(f"error-kinds.{name}", f"expected a kind such as \"invalid-argument\" (matching {KIND.pattern}), got {kind!r}")
        else:
            found.append((name, kind))
    return tuple(found)


def kind_of(classes: tuple[str, ...] | list[str], kinds: Mapping[str, str]) -> str | None:
    """The error kind of a Python exception, by the first class along its MRO that has one."""
    return next((kinds[name] for name in classes if name in kinds), None)
