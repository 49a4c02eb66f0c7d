"""The one configuration of a gated project: `[tool.vllm-gates]` in its pyproject.toml, read by pytest and `gates`.

Defaults are this repository's layout; a project that has no `[tool.vllm-gates]` table is not a gated project,
and the plugin leaves it alone (docs/gate-files.md, "Configuration").
"""
from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from _vllm_gates.errors import DefinitionError, Location, Problem

CONFIG_FILE = "pyproject.toml"
SECTION = "tool.vllm-gates"
REQUIREMENTS = ("cuda",)  # what a marker may require of the machine
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MARKER = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Marker:
    """A marker gates may carry, its help text, and what it requires of the machine (None: nothing)."""

    name: str
    help: str
    requires: str | None = None


DEFAULT_MARKERS = (
    Marker("cpu", "runs on any machine"),
    Marker("gpu", "needs a CUDA device; skipped with the reason where none is present", "cuda"),
    Marker("dist", "starts several processes (torch.distributed); deselect with -m 'not dist'"),
)


@dataclass(frozen=True)
class Config:
    """What the engine needs to know about a project; paths are relative to ``root``."""

    root: Path
    roadmap: str = "spec/roadmap.yaml"
    rows: tuple[str, ...] = ("gates/rows/*/gate.yaml",)
    specs: tuple[str, ...] = ("spec/*.md",)
    allowed_roots: tuple[str, ...] = ("impl", "oracles", "gates")
    markers: tuple[Marker, ...] = DEFAULT_MARKERS
    default_marker: str | None = "cpu"
    independence: tuple[tuple[str, tuple[str, ...]], ...] = (("impl", ("oracles", "gates")), ("oracles", ("impl", "gates")))

    @property
    def marker_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.markers)

    def marker(self, name: str) -> Marker | None:
        return next((m for m in self.markers if m.name == name), None)

    def gate_files(self) -> list[Path]:
        """Every file under the root that a `rows` pattern matches, in path order."""
        found: set[Path] = set()
        for pattern in self.rows:
            found.update(p for p in self.root.glob(pattern) if p.is_file())
        return sorted(found)

    def is_gate_file(self, path: Path) -> bool:
        relative = self.relative(path)
        return relative is not None and any(fnmatch.fnmatch(relative, pattern) for pattern in self.rows)

    def spec_files(self) -> list[Path]:
        found: set[Path] = set()
        for pattern in self.specs:
            found.update(p for p in self.root.glob(pattern) if p.is_file())
        return sorted(found)

    def relative(self, path: Path) -> str | None:
        """``path`` relative to the root, in POSIX form; None when it lies outside."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None


class _Reader:
    """Reads the table's values, collecting problems that name the file, the key, its line and the value."""

    def __init__(self, path: Path, text: str):
        self.shown = path.name
        self.lines = text.splitlines()
        self.problems: list[Problem] = []

    def where(self, key: str) -> Location:
        leaf = key.rsplit(".", 1)[-1]
        for number, line in enumerate(self.lines, start=1):
            if re.match(rf"^\s*\"?{re.escape(leaf)}\"?\s*=", line):
                return Location(self.shown, number, 1)
        return Location(self.shown, 1, 1)

    def problem(self, key: str, message: str) -> None:
        self.problems.append(Problem(self.where(key), f"[{SECTION}] {key}", message))

    def string(self, table: Mapping[str, Any], key: str, default: str) -> str:
        value = table.get(key, default)
        if not isinstance(value, str) or not value.strip():
            self.problem(key, f"expected a non-empty string, got {value!r}")
            return default
        return value

    def strings(self, table: Mapping[str, Any], key: str, default: tuple[str, ...], pattern: re.Pattern[str] | None = None,
                prefix: str = "") -> tuple[str, ...]:
        value = table.get(key, list(default))
        name = f"{prefix}{key}"
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            self.problem(name, f"expected a list of non-empty strings, got {value!r}")
            return default
        for item in value:
            if pattern is not None and not pattern.match(item):
                self.problem(name, f"{item!r} is not a package name")
        return tuple(value)


def _markers(reader: _Reader, value: Any) -> tuple[Marker, ...]:
    if not isinstance(value, dict) or not value:
        reader.problem("markers", f"expected a table of markers, got {value!r}")
        return DEFAULT_MARKERS
    found = []
    for name, body in value.items():
        key = f"markers.{name}"
        if not _MARKER.match(name):
            reader.problem(key, f"marker name {name!r} must match {_MARKER.pattern}")
            continue
        if isinstance(body, str):
            found.append(Marker(name, body))
            continue
        if not isinstance(body, dict) or set(body) - {"help", "requires"}:
            reader.problem(key, f"expected a help string or a table with `help` and `requires`, got {body!r}")
            continue
        requires = body.get("requires")
        if requires is not None and requires not in REQUIREMENTS:
            reader.problem(key, f"requires = {requires!r} is not known (accepted: {', '.join(REQUIREMENTS)})")
            continue
        found.append(Marker(name, str(body.get("help", "")), requires))
    return tuple(found) or DEFAULT_MARKERS


def _independence(reader: _Reader, value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        reader.problem("independence", f"expected a table `package = [packages it must not import]`, got {value!r}")
        return ()
    contracts = []
    for package, forbidden in value.items():
        if not _IDENTIFIER.match(package):
            reader.problem(f"independence.{package}", f"{package!r} is not a package name")
            continue
        contracts.append((package, reader.strings(value, package, (), _IDENTIFIER, "independence.")))
    return tuple(contracts)


KNOWN_KEYS = {"roadmap", "rows", "specs", "allowed-roots", "markers", "default-marker", "independence"}


def read_table(path: Path) -> dict[str, Any] | None:
    """The `[tool.vllm-gates]` table of a pyproject.toml, or None when the file or the table is absent."""
    if not path.is_file():
        return None
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DefinitionError([Problem(Location(path.name, 1, 1), "", f"cannot read {path.name}: {exc}")]) from None
    table = document.get("tool", {}).get("vllm-gates")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise DefinitionError([Problem(Location(path.name, 1, 1), f"[{SECTION}]", f"expected a table, got {table!r}")])
    return table


def load_config(root: Path) -> Config | None:
    """The configuration of the project at ``root``, None when it declares no gates; DefinitionError when malformed."""
    path = root / CONFIG_FILE
    table = read_table(path)
    if table is None:
        return None
    reader = _Reader(path, path.read_text(encoding="utf-8"))
    for key in sorted(set(table) - KNOWN_KEYS):
        reader.problem(key, f"unknown key (accepted: {', '.join(sorted(KNOWN_KEYS))})")
    base = Config(root)
    default_marker = table.get("default-marker", base.default_marker)
    markers = _markers(reader, table["markers"]) if "markers" in table else base.markers
    if default_marker == "":
        default_marker = None
    elif not isinstance(default_marker, str) or default_marker not in {m.name for m in markers}:
        reader.problem("default-marker", f"{default_marker!r} is not one of the markers ({', '.join(m.name for m in markers)}), "
                                         "or \"\" to leave unmarked tests alone")
        default_marker = None
    config = Config(
        root=root,
        roadmap=reader.string(table, "roadmap", base.roadmap),
        rows=reader.strings(table, "rows", base.rows),
        specs=reader.strings(table, "specs", base.specs),
        allowed_roots=reader.strings(table, "allowed-roots", base.allowed_roots, _IDENTIFIER),
        markers=markers,
        default_marker=default_marker,
        independence=_independence(reader, table["independence"]) if "independence" in table else base.independence,
    )
    if reader.problems:
        raise DefinitionError(reader.problems)
    return config


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` whose pyproject.toml has a `[tool.vllm-gates]` table."""
    for candidate in (start, *start.parents):
        path = candidate / CONFIG_FILE
        if path.is_file():
            try:
                if read_table(path) is not None:
                    return candidate
            except DefinitionError:
                return candidate  # malformed, but declared: loading it reports the problem
    return None
