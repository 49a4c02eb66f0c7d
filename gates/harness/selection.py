"""Changed-file selection: a row is affected when a changed path matches its sources, gate file or spec."""
from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

from gates.harness.model import GateFile


class SelectionError(Exception):
    """git could not tell what changed (unknown ref, not a repository)."""


def changed_paths(root: Path, base: str) -> list[str]:
    """Paths changed since ``base``: committed, staged, unstaged and untracked (not ignored)."""
    def git(*args: str) -> list[str]:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
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
    """Sources use globs (`impl/v1/**`, `impl/*.py`); a `!pattern` excludes; the gate file and spec always count."""
    include = [p for p in gate_file.sources if not p.startswith("!")] + [gate_file.path, gate_file.spec]
    exclude = [p[1:] for p in gate_file.sources if p.startswith("!")]
    return any(any(_matches(path, p) for p in include) and not any(_matches(path, p) for p in exclude) for path in paths)


def affected_rows(gate_files: list[GateFile], paths: list[str]) -> list[str]:
    return [gf.row for gf in gate_files if is_affected(gf, paths)]
