"""Each C++ mutant built once (docs/mutation-cpp.md, "The build cache"): a private copy of the implementation's sources, built once; per
mutant its file is written into the copy, the build commands rerun (an incremental build recompiles what changed
and relinks), the executable kept under ``cache_dir/mutants/<key>/`` and the file restored. The key hashes the
implementation's build identity (its sources, commands, environment), the file and the mutated text, so a mutant
already built, or already refused by the compiler, costs nothing the second time."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _vllm_gates.base.errors import GatesError
from _vllm_gates.definitions.builds import identity, source_files
from _vllm_gates.definitions.implementations import Implementation
from _vllm_gates.mutation.mutate_operators import Mutant

REFUSED = "does-not-build.txt"  # beside a mutant's key: the compiler's last lines, so a refusal is cached too
_TAIL = 25  # compiler output lines kept


class MutantDoesNotBuild(GatesError):
    """The mutant's sources do not compile or link; the message ends with the build's last output lines."""


class MutantBuilds:
    """Builds of one implementation's mutants in ``cache_dir`` (one user at a time: a lock file guards the copy)."""

    def __init__(self, root: Path, implementation: Implementation, cache_dir: Path):
        if not implementation.build or not implementation.command:
            raise GatesError(f"implementation {implementation.name!r} has no `build` and `command` to build mutants with")
        if Path(implementation.command[0]).is_absolute():
            raise GatesError(f"implementation {implementation.name!r}: its command {implementation.command[0]!r} is "
                             f"not built in the project, so its mutants cannot be built")
        self.root = root
        self.impl = implementation
        self.cache_dir = cache_dir
        self.tree = cache_dir / "tree"  # the private copy; the build commands run here
        self._identity: str | None = None
        self._last_build_ns = 0

    def binary(self, mutant: Mutant) -> Path:
        """The executable built from ``mutant`` (cached); MutantDoesNotBuild when its sources do not build."""
        key = hashlib.sha256("\0".join([self._prepared(), mutant.file, mutant.source]).encode()).hexdigest()
        home = self.cache_dir / "mutants" / key
        target = home / Path(self.impl.command[0]).name
        with self._lock():
            if target.is_file():
                return target
            if (home / REFUSED).is_file():
                raise MutantDoesNotBuild((home / REFUSED).read_text(encoding="utf-8"))
            failure = self._build_mutant(mutant)
            home.mkdir(parents=True, exist_ok=True)
            if failure is not None:
                (home / REFUSED).write_text(failure, encoding="utf-8")
                raise MutantDoesNotBuild(failure)
            partial = home / (target.name + ".partial")
            shutil.copy2(self._executable(), partial)
            os.replace(partial, target)  # a half-copied binary is never found as built
            return target

    def _prepared(self) -> str:
        """The copy made (or brought up to date) and built unmutated, once per instance; its build identity."""
        if self._identity is None:
            with self._lock():
                self._copy_sources()
                failure = self._run_build()
                if failure is not None:
                    raise GatesError(f"implementation {self.impl.name!r} does not build unmutated in {self.tree}: {failure}")
            self._identity = identity(self.impl, self.root)
        return self._identity

    def _copy_sources(self) -> None:
        """Every source into the copy (files whose bytes differ only), and files no longer sources removed."""
        manifest = self.cache_dir / "sources.json"
        files = []
        for path in source_files(self.impl, self.root):
            if not path.is_relative_to(self.root):
                raise GatesError(f"implementation {self.impl.name!r}: source {path} is outside the project; mutants "
                                 f"are built only from project files")
            relative = path.relative_to(self.root).as_posix()
            files.append(relative)
            copy = self.tree / relative
            if not copy.is_file() or copy.read_bytes() != path.read_bytes():
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy)
        earlier = json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else []
        for gone in set(earlier) - set(files):
            (self.tree / gone).unlink(missing_ok=True)
        manifest.write_text(json.dumps(files), encoding="utf-8")

    def _build_mutant(self, mutant: Mutant) -> str | None:
        copy = self.tree / mutant.file
        if not copy.is_file():
            raise GatesError(f"mutant of {mutant.file}: not a source of implementation {self.impl.name!r}")
        original = copy.read_bytes()
        try:
            self._write(copy, mutant.source.encode("utf-8"))
            return self._run_build()
        finally:
            self._write(copy, original)  # newer than the mutant's object: the next build recompiles it

    def _write(self, path: Path, data: bytes) -> None:
        path.write_bytes(data)
        if path.stat().st_mtime_ns <= self._last_build_ns:  # a coarse clock: make the file newer than the last build
            os.utime(path, ns=(self._last_build_ns + 1_000_000_000,) * 2)

    def _run_build(self) -> str | None:
        """Every build command in the copy; None when all succeeded, else the failing command and its last lines."""
        try:
            for step in self.impl.build:
                try:
                    done = subprocess.run(list(step), cwd=self.tree, capture_output=True, text=True)
                except OSError as error:
                    return f"build step `{' '.join(step)}` could not start: {error}"
                if done.returncode != 0:
                    tail = "\n".join((done.stdout + done.stderr).rstrip().splitlines()[-_TAIL:])
                    return f"build step `{' '.join(step)}` exited with status {done.returncode}:\n{tail}"
            if not self._executable().is_file():
                return f"the build made no {self.impl.command[0]!r}"
            return None
        finally:
            self._last_build_ns = time.time_ns()

    def _executable(self) -> Path:
        return self.tree / self.impl.command[0]

    @contextmanager
    def _lock(self) -> Iterator[None]:
        """Exclusive use of the copy and the cache (another process building mutants in the same folder waits)."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with open(self.cache_dir / ".lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield  # closing the file releases the lock
