"""The one configuration of a gated project: `[tool.vllm-gates]` in its pyproject.toml, read by pytest and `gates`.

Defaults are this repository's layout; a project that has no `[tool.vllm-gates]` table is not a gated project,
and the plugin leaves it alone (docs/gate-files.md, "Configuration").
"""
from __future__ import annotations

import os
import posixpath
import re
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from _vllm_gates.base.errors import DefinitionError, Location, Problem
from _vllm_gates.base.tomlsource import SECTION, TOOL_KEY, setting_line
from _vllm_gates.base.yamlsource import file_kind, read_definition_text
from _vllm_gates.definitions.implementations import PYTHON, Implementation, read_error_kinds, read_implementations
from _vllm_gates.definitions.patterns import files_matching, matches
from _vllm_gates.definitions.preread import recall, remember
from _vllm_gates.definitions.requirements import BUILT_IN, CUDA, DETECT_FORMAT, MarkerRequirement
from _vllm_gates.wire.channel import MAX_BUFFER_BYTES

CONFIG_FILE = "pyproject.toml"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MARKER = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Marker:
    """A marker gates may carry, its help text, and what it requires of the machine (None: nothing)."""

    name: str
    help: str
    requires: MarkerRequirement | None = None


DEFAULT_MARKERS = (
    Marker("cpu", "runs on any machine"),
    Marker("gpu", "needs a CUDA device; skipped with the reason where none is present", CUDA),
    Marker("dist", "starts several processes (torch.distributed); deselect with -m 'not dist'"),
)


@dataclass(frozen=True)
class Upstream:
    """The upstream release the project mirrors (`[tool.vllm-gates.upstream]`): the package, its pinned version,
    how to install it, and the file of declared deviations from it."""

    package: str
    version: str
    install: str = ""
    deviations: str = "spec/deviations.yaml"


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
    worker_preload: tuple[str, ...] = ()  # modules a fork server imports once for every worker (e.g. torch)
    call_timeout: float = 60.0  # seconds one call of a worker may take, unless a gate sets `timeout:`
    run_budget: float | None = None  # seconds the workers of a whole run may take; None: no budget
    max_tensor_bytes: int = MAX_BUFFER_BYTES  # a message's tensor bytes in all, both ways (hello's max_buffer_bytes, docs/worker-protocol.md §3.1)
    pythonpath: tuple[str, ...] = ()  # [tool.pytest.ini_options] pythonpath: where, besides the root, modules are found
    implementations: tuple[Implementation, ...] = (Implementation(PYTHON),)  # the python port first, then external ones
    error_kinds: tuple[tuple[str, str], ...] = ()  # Python exception class name -> language-neutral error kind
    upstream: Upstream | None = None  # the pinned upstream release (None: the project pins none)
    file_settings: tuple[str, ...] = ()  # implementation settings that name a file: it must be readable before a run
    sandbox: bool = True  # the judged implementation's workers confined by Landlock where the kernel has it (sandbox.py)
    examples_db: str | None = None  # the example database a run reads and writes (examples_db.py); None: none
    examples_db_read_only: tuple[str, ...] = ()  # example databases a run only reads (a CI artifact)
    source: str | None = field(default=None, compare=False, repr=False)  # the pyproject.toml text it was read from

    def parity_marker(self) -> str | None:
        """The marker whose gates compare with the pinned upstream release (it requires `upstream`)."""
        return next((m.name for m in self.markers if m.requires is not None and m.requires.upstream), None)

    def implementation(self, name: str) -> Implementation | None:
        return next((i for i in self.implementations if i.name == name), None)

    @property
    def implementation_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.implementations)

    @property
    def marker_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.markers)

    @property
    def device_markers(self) -> frozenset[str]:
        """The markers whose requirement is a device (gpu): a PARTIAL claim may leave their gates skipped or unproven."""
        return frozenset(m.name for m in self.markers if m.requires is not None and m.requires.device)

    def marker(self, name: str) -> Marker | None:
        return next((m for m in self.markers if m.name == name), None)

    def gate_files(self) -> list[Path]:
        """Every file under the root that a `rows` pattern matches, in path order."""
        return sorted({self.root / path for pattern in self.rows for path in files_matching(self.root, pattern)})

    def is_gate_file(self, path: Path) -> bool:
        relative = self.relative(path)
        return relative is not None and any(matches(relative, pattern) for pattern in self.rows)

    def spec_files(self) -> list[Path]:
        """Every regular file under the root that a `specs` pattern matches, in path order; DefinitionError when a
        match leads outside the root through a symlink."""
        found: set[Path] = set()
        for pattern in self.specs:
            for shown in files_matching(self.root, pattern):
                path = self.root / shown
                why = outside_root(self.root, shown, "spec file")
                if why:
                    raise DefinitionError([Problem(Location(shown, 1, 1), "", f"{why} (matched by specs pattern {pattern!r} "
                                                                               f"in [{SECTION}] of {CONFIG_FILE})")])
                found.add(path)
        return sorted(found)

    def relative(self, path: Path) -> str | None:
        """``path`` relative to the root, in POSIX form; None when it lies outside."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None


def implementation_refused(config: Config, flag: str, name: str) -> str | None:
    """Why ``flag name`` (`--impl`, `--gates-impl`) names no implementation of the project, naming the known ones;
    None when it names one."""
    if config.implementation(name) is not None:
        return None
    return (f"{flag} {name}: unknown implementation (known: {', '.join(config.implementation_names)}; "
            f"declare others under [{SECTION}.implementations] in {CONFIG_FILE})")


# paths stay inside the project ------------------------------------------------------------------------------------

_GLOB_CHARS = re.compile(r"[*?\[]")
_DRIVE = re.compile(r"^[A-Za-z]:")


def is_absolute(value: str) -> bool:
    """An absolute path on any system: `/etc/passwd`, a UNC path (backslash first), `C:/x`."""
    return value.startswith(("/", "\\")) or bool(_DRIVE.match(value))


def outside_root(root: Path, value: str, what: str, resolve: Callable[[Path], Path] = Path.resolve) -> str | None:
    """Why the path ``value``, named relative to ``root``, is refused; None when it stays inside the root.

    Refused: an absolute path, a `..` that leaves the root, and a path that leads outside the root through a
    symlink (the path is resolved with ``resolve`` and must stay relative to the resolved root).
    """
    if "\x00" in value:
        return f"{what} {value!r} contains a NUL character"
    if is_absolute(value):
        return f"{what} {value!r} is an absolute path: it must be relative to the project root"
    normal = posixpath.normpath(value.replace("\\", "/"))
    if normal == ".." or normal.startswith("../"):
        return f"{what} {value!r} leaves the project root"
    try:
        real_root = resolve(root)
        target = resolve(root / value)
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name the system refuses
        return f"{what} {value!r} cannot be resolved: {exc}"
    try:
        target.relative_to(real_root)
    except ValueError:
        return f"{what} {value!r} leaves the project root through a symlink (it resolves to {str(target)!r})"
    return None


def pattern_outside_root(root: Path, pattern: str, what: str) -> str | None:
    """Why the glob ``pattern`` is refused: absolute, a `..` segment, or a literal leading part (the folders before
    the first wildcard) that leads outside the root through a symlink; None when it is a pattern inside the root.

    Matches found through a symlink in a wildcard part are refused where they are read (gate files, spec files).
    """
    if "\x00" in pattern:
        return f"{what} {pattern!r} contains a NUL character"
    if is_absolute(pattern):
        return f"{what} {pattern!r} is an absolute path: patterns are relative to the project root"
    parts = re.split(r"[\\/]", pattern)
    if ".." in parts:
        return f"{what} {pattern!r} has a '..' segment: patterns match inside the project root"
    literal = []
    for part in parts:
        if _GLOB_CHARS.search(part):
            break
        literal.append(part)
    leading = "/".join(part for part in literal if part)
    why = outside_root(root, leading, f"{what} {pattern!r}: its folder") if leading else None
    return why


def setting_location(config: Config, key: str) -> Location:
    """Where ``key`` of `[tool.vllm-gates]` (`implementations.cpp.command`) is set in the pyproject.toml the
    configuration was read from (line 1 where it cannot be told)."""
    text = config.source
    if text is None:  # a configuration made in code: the file as it is now
        try:
            text = read_definition_text(config.root / CONFIG_FILE, CONFIG_FILE, CONFIG_FILE)
        except DefinitionError:
            text = ""
    return Location(CONFIG_FILE, setting_line(text.splitlines(), key), 1)


class _Reader:
    """Reads the table's values, collecting problems that name the file, the key, its line and the value."""

    def __init__(self, path: Path, text: str):
        self.shown = path.name
        self.lines = text.splitlines()
        self.problems: list[Problem] = []

    def where(self, key: str) -> Location:
        """The line that writes ``key`` (a dotted key of the table, as problems name it): the line that reaches
        furthest along its path, through `[section]` headers, dotted keys and inline tables; the first such."""
        return Location(self.shown, setting_line(self.lines, key), 1)

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
        requires = _requirement(reader, f"{key}.requires", body["requires"]) if "requires" in body else None
        if requires is None and "requires" in body:
            continue
        found.append(Marker(name, str(body.get("help", "")), requires))
    return tuple(found) or DEFAULT_MARKERS


def _requirement(reader: _Reader, key: str, value: Any) -> MarkerRequirement | None:
    """A built-in requirement by name, or the project's own: `{ detect = "package.module:function", device = BOOL }`."""
    if isinstance(value, str):
        if value not in BUILT_IN:
            reader.problem(key, f"{value!r} is not known (accepted: {', '.join(BUILT_IN)}, or a table "
                                f"{{ detect = \"package.module:function\", device = true|false }})")
        return BUILT_IN.get(value)
    if not isinstance(value, dict) or "detect" not in value or set(value) - {"detect", "device"}:
        reader.problem(key, f"expected {', '.join(map(repr, BUILT_IN))} or a table with `detect` and optionally `device`, got {value!r}")
        return None
    detect, device = value["detect"], value.get("device", False)
    if not isinstance(detect, str) or not DETECT_FORMAT.match(detect):
        reader.problem(f"{key}.detect", f"expected \"package.module:function\" (a function returning why the requirement is "
                                        f"unmet, or None), got {detect!r}")
        return None
    if not isinstance(device, bool):
        reader.problem(f"{key}.device", f"expected true or false, got {device!r}")
        return None
    return MarkerRequirement(detect, device, detect, reader.where(f"{key}.detect"), key)


_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([a-z]+[0-9]*)?(\.post[0-9]+)?$")


def _upstream(reader: _Reader, value: Any) -> Upstream | None:
    """`[tool.vllm-gates.upstream]`: package and version (an exact release), optionally install and deviations."""
    if not isinstance(value, dict):
        reader.problem("upstream", f"expected a table with `package` and `version`, got {value!r}")
        return None
    unknown = sorted(set(value) - {"package", "version", "install", "deviations"})
    if unknown:
        reader.problem(f"upstream.{unknown[0]}", "unknown key (accepted: deviations, install, package, version)")
    package, version = value.get("package"), value.get("version")
    if not isinstance(package, str) or not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", package):
        reader.problem("upstream.package", f"expected a package name, got {package!r}")
        return None
    if not isinstance(version, str) or not _VERSION.match(version):
        reader.problem("upstream.version", f"expected an exact release such as \"0.33.0\", got {version!r}")
        return None
    install = value.get("install", "")
    deviations = value.get("deviations", "spec/deviations.yaml")
    if not isinstance(install, str) or not isinstance(deviations, str) or not deviations:
        reader.problem("upstream", "`install` and `deviations` are text (a command; a path under the root)")
        return None
    return Upstream(package, version, install, deviations)


def _independence(reader: _Reader, value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, dict):
        reader.problem("independence", f"expected a table `package = [packages it must not import]`, got {value!r}")
        return ()
    contracts = []
    for package in value:
        if not _IDENTIFIER.match(package):
            reader.problem(f"independence.{package}", f"{package!r} is not a package name")
            continue
        contracts.append((package, reader.strings(value, package, (), _IDENTIFIER, "independence.")))
    return tuple(contracts)


KNOWN_KEYS = {"roadmap", "rows", "specs", "allowed-roots", "markers", "default-marker", "independence",
              "worker-preload", "call-timeout", "run-budget", "implementations", "error-kinds", "upstream", "file-settings",
              "max-tensor-bytes", "sandbox", "examples-db", "examples-db-read-only"}


def _seconds(reader: _Reader, table: dict[str, Any], key: str, default: float | None) -> float | None:
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        reader.problem(key, f"expected a number of seconds in (0, 86400], got {value!r}")
        return default
    return float(value)


def _byte_count(reader: _Reader, table: dict[str, Any], key: str, default: int) -> int:
    """A whole number of bytes, 1 to 2**63 - 1 (a buffer length is 8 bytes on the wire)."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2 ** 63 - 1:
        reader.problem(key, f"expected a whole number of bytes from 1 to {2 ** 63 - 1} "
                            f"(e.g. {MAX_BUFFER_BYTES} for 4 GiB), got {value!r}")
        return default
    return value


def _flag(reader: _Reader, table: dict[str, Any], key: str, default: bool) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        reader.problem(key, f"expected true or false, got {value!r}")
        return default
    return value


def read_table(path: Path) -> dict[str, Any] | None:
    """The `[tool.vllm-gates]` table of a pyproject.toml, or None when the file or the table is absent."""
    return _read(path)[2]


def _pytest_pythonpath(document: Mapping[str, Any]) -> tuple[str, ...]:
    """`pythonpath` of `[tool.pytest.ini_options]` (entries that are not strings are pytest's to refuse)."""
    tool = document.get("tool", {})
    pytest_table = tool.get("pytest", {}) if isinstance(tool, dict) else {}
    options = pytest_table.get("ini_options", {}) if isinstance(pytest_table, dict) else {}
    entries = options.get("pythonpath", []) if isinstance(options, dict) else []
    entries = entries.split() if isinstance(entries, str) else entries
    return tuple(e for e in entries if isinstance(e, str)) if isinstance(entries, list) else ()


def _read(path: Path) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """The text of a pyproject.toml, its document and its `[tool.vllm-gates]` table; None when the file (a regular
    one) or the table is absent. The one place the engine reads a pyproject.toml (read once per run: preread),
    within the size limit (yamlsource.MAX_FILE_BYTES)."""
    if not path.is_file():  # a FIFO or a device is not a file here: never opened
        return "", {}, None
    text = recall(path)  # the pytest entry's read of this run, or `gates`' own
    if text is None:
        text = read_definition_text(path, path.name, CONFIG_FILE)
        remember(path, text)  # for the pytest run `gates` starts: its entry then reads nothing
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DefinitionError([Problem(Location(path.name, 1, 1), "", f"cannot read {path.name}: {exc}")]) from None
    tool = document.get("tool", {})
    table = tool.get(TOOL_KEY) if isinstance(tool, dict) else None
    if table is None:
        return text, document, None
    if not isinstance(table, dict):
        raise DefinitionError([Problem(Location(path.name, 1, 1), f"[{SECTION}]", f"expected a table, got {table!r}")])
    return text, document, table


def _check_paths(reader: _Reader, root: Path, config: Config) -> None:
    """The roadmap, the `rows` and `specs` patterns and each implementation's `reads` stay inside the project root;
    the roadmap, where it exists, is a regular file (checked with stat, never opened here)."""
    for implementation in config.implementations:
        for entry in implementation.reads or ():
            key = f"implementations.{implementation.name}.reads"
            why = pattern_outside_root(root, entry, "entry")
            if why:
                reader.problem(key, f"{why} (an implementation's workers read everything outside the project already; "
                                    f"`reads` names what they may read inside it)")
    why = outside_root(root, config.roadmap, "roadmap")
    if why:
        reader.problem("roadmap", why)
    else:
        try:
            mode: int | None = os.stat(root / config.roadmap).st_mode
        except OSError:
            mode = None  # missing: reported when the roadmap is loaded
        if mode is not None and not stat.S_ISREG(mode):
            reader.problem("roadmap", f"roadmap {config.roadmap!r} is {file_kind(mode)}, not a regular file")
    for key, what, patterns in (("rows", "gate file", config.rows), ("specs", "spec file", config.specs)):
        for pattern in patterns:
            why = pattern_outside_root(root, pattern, f"{key} pattern")
            if why:
                reader.problem(key, why)
                continue
            for path in sorted(root.glob(pattern)):  # what the pattern matches that is neither a file nor a folder
                try:
                    mode = os.stat(path).st_mode
                except (OSError, ValueError):
                    continue
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    reader.problems.append(Problem(Location(path.relative_to(root).as_posix(), 1, 1), "",
                                                   f"{what} is {file_kind(mode)}, not a regular file: refused without opening it "
                                                   f"(matched by {key} pattern {pattern!r} in [{SECTION}] of {CONFIG_FILE})"))


def load_config(root: Path) -> Config | None:
    """The configuration of the project at ``root``, None when it declares no gates; DefinitionError when malformed."""
    return _config(root, *_read(root / CONFIG_FILE))


def _config(root: Path, text: str, document: dict[str, Any], table: dict[str, Any] | None) -> Config | None:
    """The configuration a pyproject.toml's text, document and `[tool.vllm-gates]` table (None: no gates) declare."""
    if table is None:
        return None
    reader = _Reader(root / CONFIG_FILE, text)
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
        worker_preload=reader.strings(table, "worker-preload", base.worker_preload, re.compile(r"^[A-Za-z_][\w.]*$")),
        call_timeout=_seconds(reader, table, "call-timeout", base.call_timeout) or base.call_timeout,
        run_budget=_seconds(reader, table, "run-budget", base.run_budget),
        max_tensor_bytes=_byte_count(reader, table, "max-tensor-bytes", base.max_tensor_bytes),
        pythonpath=_pytest_pythonpath(document),
        implementations=read_implementations(table.get("implementations", {}), reader.problem, reader.where),
        error_kinds=read_error_kinds(table.get("error-kinds", {}), reader.problem),
        upstream=_upstream(reader, table["upstream"]) if "upstream" in table else None,
        file_settings=reader.strings(table, "file-settings", base.file_settings),
        sandbox=_flag(reader, table, "sandbox", base.sandbox),
        examples_db=reader.string(table, "examples-db", "") or None if "examples-db" in table else None,
        examples_db_read_only=reader.strings(table, "examples-db-read-only", base.examples_db_read_only),
        source=text,
    )
    if config.upstream is None and config.parity_marker():
        reader.problem("markers", f"marker {config.parity_marker()!r} requires `upstream`, but [{SECTION}.upstream] pins no release")
    _check_paths(reader, root, config)
    if reader.problems:
        raise DefinitionError(reader.problems)
    return config


def find_config(start: Path) -> tuple[Path, Config | None] | None:
    """The nearest folder at or above ``start`` whose pyproject.toml has a `[tool.vllm-gates]` table, and its
    configuration (each pyproject.toml read once); None when there is none. DefinitionError: the nearest declaring
    or malformed one cannot be used."""
    for candidate in (start, *start.parents):
        path = candidate / CONFIG_FILE
        if path.is_file():
            text, document, table = _read(path)  # malformed, but maybe declared: the problem is the user's to see
            if table is not None:
                return candidate, _config(candidate, text, document, table)
    return None

