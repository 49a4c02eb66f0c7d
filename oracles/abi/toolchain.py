"""Compile C against the spec header with the system compiler, cached by content hash (CAPI-1.1, CAPI-2.1).

Flags as the C++ port's header test (tests/capi/c_header_compile.c): C11, all warnings as errors.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

C_FLAGS = ("-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic")
CACHE_ENV = "VLLM_GATES_CACHE_DIR"
COMPILER_ENV = "CC"


class CompilerUnavailable(RuntimeError):
    """No working C compiler: compiled oracles cannot run here (a skip reason, never a pass)."""


class CompileError(RuntimeError):
    """The compiler refused the sources; the message carries its diagnostics."""


@dataclass(frozen=True)
class Compiler:
    """A C compiler found on this machine and the version line it reports."""

    path: str
    version: str


def find_compiler() -> Compiler:
    """The compiler named by $CC, else ``cc``; raise CompilerUnavailable with the reason."""
    name = os.environ.get(COMPILER_ENV) or "cc"
    path = shutil.which(name)
    if path is None:
        raise CompilerUnavailable(f"no C compiler: {name!r} is not on PATH (set ${COMPILER_ENV} or install cc)")
    return _working_compiler(path, os.stat(path).st_mtime_ns)


@lru_cache(maxsize=8)
def _working_compiler(path: str, mtime_ns: int) -> Compiler:
    """``path --version``, run once per compiler file and its modification time (a failure is not kept: each
    call retries it); every ABI gate item and example asks, and spawning it each time cost ~960 runs a suite."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompilerUnavailable(f"the C compiler {path} does not run: {exc}") from exc
    if done.returncode != 0:
        raise CompilerUnavailable(f"the C compiler {path} does not run: exit {done.returncode}: {done.stderr.strip()}")
    first = done.stdout.strip().splitlines()
    return Compiler(path=path, version=first[0] if first else "")


def cache_root() -> Path:
    """$VLLM_GATES_CACHE_DIR, else a per-user folder under the system temp dir."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"vllm-gates-cache-{user}"


def build(kind: str, header: str, source: str, *, shared: bool) -> Path:
    """Compile ``source`` (which includes "vllm.h") against ``header`` text; return the cached output.

    The cache key hashes the header, the source, the flags and the compiler's version, so an edited
    header never reuses a stale build. Outputs are written beside and renamed into place.
    """
    compiler = find_compiler()
    flags = C_FLAGS + (("-shared", "-fPIC") if shared else ())
    digest = hashlib.sha256("\0".join((kind, header, source, " ".join(flags), compiler.version)).encode()).hexdigest()
    folder = cache_root() / "abi" / f"{kind}-{digest[:24]}"
    output = folder / (f"lib{kind}.so" if shared else kind)
    if output.is_file():
        return output
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        (Path(work) / "vllm.h").write_text(header, encoding="utf-8")
        (Path(work) / f"{kind}.c").write_text(source, encoding="utf-8")
        partial = Path(work) / output.name
        command = [compiler.path, *flags, "-I", work, str(Path(work) / f"{kind}.c"), "-o", str(partial)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise CompileError(f"{compiler.path} failed on {kind}.c (exit {done.returncode}):\n{done.stderr.strip()}")
        os.replace(partial, output)
    return output


def run_program(program: Path) -> str:
    """Run a compiled probe and return its standard output; a failing probe is an error."""
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise CompileError(f"probe {program} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout
