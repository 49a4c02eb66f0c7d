"""Changed-file selection: the rows that changes since a git ref can affect, each with the reasons why.

A row is affected when a file its gates import changes (found statically, _vllm_gates.definitions.sources), when a path its
`sources:` globs, row folder, gate file or spec name changes, when a pytest `conftest.py` above its gate file
changes, or when its roadmap entry changes. Every row is affected when the harness, pyproject.toml or a package
`__init__.py` on a row's import path changes; a row whose gate file does not load is always affected.
"""
from __future__ import annotations

import posixpath
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _vllm_gates.base.errors import DefinitionError, GatesError
from _vllm_gates.definitions.config import CONFIG_FILE, Config
from _vllm_gates.definitions.model import GateFile, Roadmap, Row
from _vllm_gates.definitions.patterns import declaring_pattern, excluded, folder_pattern, matches
from _vllm_gates.definitions.project import Project, unknown_row
from _vllm_gates.definitions.roadmap import load_roadmap
from _vllm_gates.definitions.sources import ImportGraph, import_graph, row_source_files, target_modules

if TYPE_CHECKING:
    from _vllm_gates.run.evidence import GateEvidence


class SelectionError(GatesError):
    """git could not tell what changed (unknown ref, not a repository, git not on PATH)."""


def _git(root: Path, *args: str) -> str:
    """The output of `git ARGS` run in ``root``; SelectionError when git cannot be run or fails."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise SelectionError("cannot find what changed: git is not on PATH") from None
    except OSError as exc:
        raise SelectionError(f"cannot run git to find what changed: {exc}") from None
    if done.returncode != 0:
        shown = " ".join(arg for arg in args if arg != "-z")
        raise SelectionError(f"git {shown} failed: {done.stderr.strip() or done.stdout.strip() or f'exit status {done.returncode}'}")
    return done.stdout


def changed_paths(root: Path, base: str) -> list[str]:
    """Paths under ``root``, relative to it, changed since ``base``: committed, staged, unstaged, untracked (not
    ignored); a rename counts as both of its paths."""
    try:
        _git(root, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    except SelectionError as error:
        if "not on PATH" in str(error) or "cannot run git" in str(error):
            raise
        raise SelectionError(f"{base!r} is not a commit git knows here (a branch, tag or commit id of the repository "
                             f"at {root})") from None
    listed = _git(root, "diff", "--name-only", "--no-renames", "--relative", "-z", base)
    listed += _git(root, "ls-files", "--others", "--exclude-standard", "-z")
    return sorted({path for path in listed.split("\0") if path})


# what each row depends on -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowInputs:
    """What one loaded row reads: the project files its gates import, and every module name they import."""

    files: frozenset[str]
    names: frozenset[str]


def row_inputs(config: Config, graph: ImportGraph, gate_file: GateFile) -> RowInputs:
    """The imported files of ``gate_file``'s targets (relative to the root) and the names imported on the way."""
    files = frozenset(shown for shown in (config.relative(path) for path in row_source_files(graph, gate_file)) if shown)
    targets = target_modules([ref for gate in gate_file.gates for ref in gate.targets()])
    closure = graph.closure(set(targets))
    names = set(targets) | set(closure) | {name for module in closure.values() for name in graph.imports(module)}
    return RowInputs(files, frozenset(names))


def module_names(config: Config, graph: ImportGraph, path: str) -> set[str]:
    """The dotted names a `.py` path (present or removed) has on the project's search path."""
    if not path.endswith(".py"):
        return set()
    names = set()
    for base in graph.search:
        try:
            parts = list((config.root.resolve() / path).relative_to(base).with_suffix("").parts)
        except ValueError:
            continue
        parts = parts[:-1] if parts and parts[-1] == "__init__" else parts
        if parts and all(part.isidentifier() for part in parts):
            names.add(".".join(parts))
    return names


# rows' reasons --------------------------------------------------------------------------------------------------------


def _why_path(gate_file: GateFile, inputs: RowInputs, path: str, names: set[str]) -> str | None:
    """Why the changed ``path`` (with module ``names``) affects the row; None when it does not.

    The gate file, the spec and imported files always count; a `!pattern` excludes only from the declared globs
    and the row folder.
    """
    if path == gate_file.path:
        return f"its gate file {path} changed"
    if path == posixpath.normpath(gate_file.spec):
        return f"its spec {path} changed"
    if path in inputs.files:
        return f"imports {path} (changed)"
    imported = sorted(names & inputs.names)
    if imported:
        return f"imports {imported[0]} ({path} changed)"
    if posixpath.basename(path) == "conftest.py" and _is_above(posixpath.dirname(path), gate_file.path):
        return f"pytest's {path} changed (it applies to its gate file)"
    if excluded(path, gate_file.sources):
        return None
    declared = declaring_pattern(path, gate_file.sources)
    if declared is not None:
        return f"{path} changed (its sources pattern {declared!r})"
    if gate_file.folder and matches(path, folder_pattern(gate_file.folder)):
        return f"{path} changed (in its row folder {gate_file.folder})"
    return None


def _is_above(folder: str, path: str) -> bool:
    return folder == "" or path.startswith(folder + "/")


def _path_reasons(gate_file: GateFile, inputs: RowInputs, paths: dict[str, set[str]]) -> list[str]:
    """The reasons, one per changed path (with its module names), that ``paths`` affect a loaded row."""
    found = (_why_path(gate_file, inputs, path, names) for path, names in paths.items())
    return [reason for reason in found if reason]


def _listed(paths: list[str], most: int = 3) -> str:
    more = f", and {len(paths) - most} more" if len(paths) > most else ""
    return ", ".join(paths[:most]) + more


def _engine_folders(config: Config) -> list[str]:
    """The engine packages' folders (from their `__file__`), relative to the root, where they lie inside it."""
    import _vllm_gates
    import vllm_gates

    folders = (config.relative(Path(module.__file__).parent) for module in (_vllm_gates, vllm_gates) if module.__file__)
    return [folder for folder in folders if folder and folder != "."]


@dataclass(frozen=True)
class Cause:
    """A change that affects every row: the reason shown, and the changed paths it accounts for."""

    reason: str
    paths: frozenset[str]


def _every_row_causes(project: Project, inputs: dict[str, RowInputs], paths: list[str]) -> list[Cause]:
    """Changes that affect every row: pyproject.toml, the harness, a package `__init__.py` on a row's import path."""
    causes = []
    if CONFIG_FILE in paths:
        causes.append(Cause(f"{CONFIG_FILE} changed: every row", frozenset({CONFIG_FILE})))
    engine = _engine_folders(project.config)
    harness = [path for path in paths if any(path.startswith(folder + "/") for folder in engine)]
    if harness:
        causes.append(Cause(f"the harness changed ({_listed(harness)}): every row", frozenset(harness)))
    imported = {path for row in inputs.values() for path in row.files}
    packages = [path for path in paths if path in imported and posixpath.basename(path) == "__init__.py"]
    if packages:
        causes.append(Cause(f"package file {_listed(packages)} on a row's import path changed: every row", frozenset(packages)))
    return causes


# roadmap entries ------------------------------------------------------------------------------------------------------


def _roadmap_at(config: Config, base: str) -> Roadmap | str:
    """The roadmap as it was at ``base``, or why it cannot be read there (missing, does not parse)."""
    try:
        text = _git(config.root, "show", f"{base}:./{config.roadmap}")
    except SelectionError as error:
        return f"cannot be read at {base} ({error})"
    shown = f"{base}:{config.roadmap}"
    with tempfile.TemporaryDirectory(prefix="gates-roadmap-") as folder:
        path = Path(folder) / "roadmap.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_roadmap(path, shown)
        except DefinitionError as error:
            return f"does not load at {base} ({error.problems[0] if error.problems else error})"


def entry_changes(old: Row, new: Row) -> list[str]:
    """What differs between two roadmap entries of a row, in the roadmap's words (`state ACTIVE -> DONE`)."""
    changes = [f"state {old.state} -> {new.state}"] if old.state != new.state else []
    changes += ["title"] if old.title != new.title else []
    before = {m.id: m for m in old.milestones}
    for milestone in new.milestones:
        was = before.get(milestone.id)
        if was is None:
            changes.append(f"milestone {milestone.id} added ({milestone.state})")
        elif was.state != milestone.state:
            changes.append(f"milestone {milestone.id} state {was.state} -> {milestone.state}")
        elif was.title != milestone.title:
            changes.append(f"milestone {milestone.id} title")
    changes += [f"milestone {m} removed" for m in before if new.milestone(m) is None]
    return changes or (["milestone order"] if old != new else [])


def _roadmap_reasons(project: Project, base: str, paths: list[str]) -> dict[str, str]:
    """Rows whose roadmap entry changed since ``base`` (or cannot be compared), with why."""
    if posixpath.normpath(project.config.roadmap) not in paths:
        return {}
    old = _roadmap_at(project.config, base)
    if isinstance(old, str):
        return {row.id: f"the roadmap {old}: its entry cannot be compared" for row in project.roadmap.rows}
    reasons = {}
    for row in project.roadmap.rows:
        was = old.row(row.id)
        changes = entry_changes(was, row) if was is not None else []
        if was is None:
            reasons[row.id] = f"it is new in the roadmap (not in {project.config.roadmap} at {base})"
        elif changes:
            reasons[row.id] = f"its roadmap entry changed ({'; '.join(changes)})"
    return reasons


# the API ---------------------------------------------------------------------------------------------------------------


def _ordered_rows(project: Project) -> list[str]:
    """The roadmap's rows in order, then rows whose gate file does not load and that the roadmap lacks."""
    return [r.id for r in project.roadmap.rows] + [row for row in project.broken if project.roadmap.row(row) is None]


def explain_affected(project: Project, base: str) -> dict[str, list[str]]:
    """Every row affected by changes since ``base``, in roadmap order, with the reasons; SelectionError from git."""
    paths = changed_paths(project.config.root, base)
    graph = import_graph(project.config)
    inputs = {gf.row: row_inputs(project.config, graph, gf) for gf in project.gate_files} if paths else {}
    every = _every_row_causes(project, inputs, paths)
    accounted = {path for cause in every for path in cause.paths}
    remaining = {path: module_names(project.config, graph, path) for path in paths if path not in accounted}
    roadmap = _roadmap_reasons(project, base, paths)
    explained: dict[str, list[str]] = {}
    for row in _ordered_rows(project):
        gate_file = project.gate_file(row)
        reasons = [cause.reason for cause in every] + ([roadmap[row]] if row in roadmap else [])
        reasons += ["its gate file does not load"] if row in project.broken else []
        reasons += _path_reasons(gate_file, inputs[row], remaining) if gate_file is not None and row in inputs else []
        if reasons:
            explained[row] = reasons
    return explained


def rows_affected_since(project: Project, base: str) -> list[str]:
    """Rows in roadmap order (then rows whose gate file does not load, always) affected by changes since ``base``."""
    return list(explain_affected(project, base))


# The rows a run judges, resolved once for `gates run` and `pytest --gates-*` alike (one resolution, one answer) ---


@dataclass(frozen=True, eq=False)
class Handover:
    """What `gates run` and `gates audit` hand the pytest run they start (a plugin object of pytest.main): the snapshot
    they loaded, the rows and evidence they resolved from their arguments. The plugin then loads and resolves none of
    it again; an xdist worker, another process, resolves the `--gates-*` options it is passed itself."""

    project: Project
    rows: tuple[str, ...] | None  # None: every collected row
    evidence: tuple[GateEvidence, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)  # entries the run's JSON report records in `meta` (a shard's)


class RowsRefused(GatesError):
    """Rows a run cannot narrow to: what changed since a git ref cannot be found (git's error)."""


class UnknownRow(RowsRefused):
    """A row asked for (a positional ROW, --gates-row) that the roadmap does not have."""


def requested_rows(project: Project, rows: list[str], changed_since: str | None) -> tuple[str, ...] | None:
    """The rows a run judges, for `gates run ROW... --changed-since REF` and `pytest --gates-row --gates-changed-since`
    alike: those named (all when none), narrowed to the rows changes since REF can affect; None: no narrowing.
    UnknownRow for a row the roadmap lacks (unchecked while the roadmap does not load: the run reports that);
    RowsRefused when git cannot tell what changed; DefinitionError when REF is given and the roadmap does not load."""
    if not rows and not changed_since:
        return None
    roadmap, _ = project.roadmap_or_problems
    refused = unknown_row(roadmap, rows) if roadmap is not None else None
    if refused:
        raise UnknownRow(refused)
    if not changed_since:
        return tuple(rows)
    try:
        affected = rows_affected_since(project, changed_since)
    except SelectionError as error:
        raise RowsRefused(str(error)) from None
    return tuple(row for row in affected if not rows or row in rows)
