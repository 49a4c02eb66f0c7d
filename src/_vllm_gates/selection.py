"""Changed-file selection: a row is affected when a changed path matches its sources, gate file or spec."""
from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from _vllm_gates.model import GateFile

if TYPE_CHECKING:
    from _vllm_gates.project import Project


class SelectionError(Exception):
    """git could not tell what changed (unknown ref, not a repository)."""


def changed_paths(root: Path, base: str) -> list[str]:
    """Paths changed since ``base``: committed, staged, unstaged and untracked (not ignored)."""
    def git(*args: str) -> list[str]:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        except OSError as exc:
            raise SelectionError(f"cannot run git to find what changed: {exc}") from None
        if done.returncode != 0:
            raise SelectionError(f"git {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
        return [line for line in done.stdout.splitlines() if line.strip()]

    git("rev-parse", "--verify", "--quiet", f"{base}^{{commit}}")
    paths = git("diff", "--name-only", base) + git("ls-files", "--others", "--exclude-standard")
    return sorted(set(paths))


def _matches(path: str, pattern: str) -> bool:
    if pattern.endswith("/**"):
        return path == pattern[:-3] or path.startswith(pattern[:-2])
    return fnmatch.fnmatch(path, pattern) or path == pattern


def is_affected(gate_file: GateFile, paths: list[str]) -> bool:
    """Sources use globs (`impl/v1/**`, `impl/*.py`); a `!pattern` excludes; the row folder, gate file and spec always count."""
    sources = gate_file.all_sources
    include = [p for p in sources if not p.startswith("!")] + [gate_file.path, gate_file.spec]
    exclude = [p[1:] for p in sources if p.startswith("!")]
    return any(any(_matches(path, p) for p in include) and not any(_matches(path, p) for p in exclude) for path in paths)


def affected_rows(gate_files: "Sequence[GateFile]", paths: list[str]) -> list[str]:
    return [gf.row for gf in gate_files if is_affected(gf, paths)]


def rows_affected_since(project: "Project", base: str) -> list[str]:
    """Rows in roadmap order (then rows whose gate file does not load, always) affected by changes since ``base``."""
    paths = changed_paths(project.config.root, base)
    affected = set(affected_rows(project.gate_files, paths)) | set(project.broken)
    ordered = [r.id for r in project.roadmap.rows] + [row for row in project.broken if project.roadmap.row(row) is None]
    return [row for row in ordered if row in affected]
