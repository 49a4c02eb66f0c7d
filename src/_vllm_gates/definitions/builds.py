"""Build an external implementation when it is out of date: its identity is the hash of its source files, its
build commands and the build environment variables it names, stamped beside the build (as the ABI oracles cache
their compiled C by the hash of what they compile)."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from _vllm_gates.definitions.implementations import Implementation
from _vllm_gates.definitions.patterns import files_matching

STAMP_DIR = "build/vllm-gates"  # under the project root (ignored by this repository's .gitignore)


def source_files(impl: Implementation, root: Path) -> list[Path]:
    """The files the implementation's `sources` globs match (regular files, in path order): a project-relative
    pattern as every project glob (patterns.py); an absolute one, for a port's checkout outside the project, by glob.glob."""
    found: set[Path] = set()
    for pattern in impl.sources:
        if Path(pattern).is_absolute():
            found.update(p for p in map(Path, glob.glob(pattern, recursive=True)) if p.is_file() and "__pycache__" not in p.parts)
        else:
            found.update(root / path for path in files_matching(root, pattern))
    return sorted(found)


def identity(impl: Implementation, root: Path) -> str:
    """A hash of everything that decides what the build produces: sources, commands, build-env values, settings."""
    digest = hashlib.sha256()
    record = {"name": impl.name, "command": impl.command, "build": impl.build, "settings": impl.settings,
              "env": {name: os.environ.get(name) for name in impl.build_env}}
    digest.update(json.dumps(record, sort_keys=True).encode())
    for path in source_files(impl, root):
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def stamp_path(impl: Implementation, root: Path) -> Path:
    return root / STAMP_DIR / f"{impl.name}.stamp"


@dataclass(frozen=True)
class BuildFailure:
    """Why an implementation could not be built: the setting at fault (`build`, or `command` when the build made no
    such file) and what went wrong."""

    setting: str
    message: str

    def __str__(self) -> str:
        return self.message


def ensure_built(impl: Implementation, root: Path, log: TextIO = sys.stderr) -> BuildFailure | None:
    """Run the build when its identity changed since the last good build (or the command is missing); None on
    success, else what failed, naming the command and its last output lines."""
    if not impl.build:
        return None
    want = identity(impl, root)
    stamp = stamp_path(impl, root)
    executable = root / impl.command[0] if not Path(impl.command[0]).is_absolute() else Path(impl.command[0])
    if stamp.is_file() and stamp.read_text().strip() == want and executable.exists():
        return None
    print(f"vllm-gates: building implementation {impl.name!r} (its sources or build settings changed)", file=log, flush=True)
    stamp.unlink(missing_ok=True)
    for step in impl.build:
        try:
            done = subprocess.run(list(step), cwd=root, capture_output=True, text=True)
        except OSError as error:
            return BuildFailure("build", f"build step `{' '.join(step)}` could not start: {error}")
        if done.returncode != 0:
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-8:])[-1500:]
            return BuildFailure("build", f"build step `{' '.join(step)}` exited with status {done.returncode}: {tail}")
    if not executable.exists():
        return BuildFailure("command", f"the build finished but made no {impl.command[0]!r}, the worker command it names")
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(want + "\n")
    return None
