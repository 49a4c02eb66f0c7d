"""What the judged implementation's workers may reach (docs/worker-protocol.md §2.2, README "The judge never runs the
judged"): they start in a scratch folder of their own, and where the kernel has Landlock they read nothing of the
project but what the implementation declares (`reads`), list its folders, and write nowhere in it.

Oracles' and known-bads' workers are not confined. Everything outside the project stays readable (the interpreter,
its libraries, the system); only the scratch folder, the temp folder and /dev are writable, not the home folder nor
the installed engine.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from dataclasses import dataclass, replace
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from _vllm_gates.definitions.patterns import files_matching
from _vllm_gates.workers.landlock import Rules, abi_version

if TYPE_CHECKING:
    from _vllm_gates.definitions.config import Config
    from _vllm_gates.definitions.implementations import Implementation

SCRATCH_VARIABLE = "VLLM_GATES_SCRATCH"  # set in a confined worker's environment: its scratch folder (also TMPDIR)
WRITABLE_VARIABLE = "VLLM_GATES_WORKER_WRITABLE"  # a folder confined workers may write too (`gates mutate`'s own)
WRITABLE_SYSTEM = ("/dev",)  # /dev/null, /dev/shm (torch's and multiprocessing's shared memory), a GPU's device files
ENGINE_PACKAGES = ("_vllm_gates", "vllm_gates")
_REFUSED_FILE = re.compile(r"Permission denied: '([^']+)'")  # how Python words the EACCES of open() and of imports


@dataclass(frozen=True)
class Sandbox:
    """How the judged implementation's workers start: ``rules`` (None: not confined by the kernel, each still starts
    in a scratch folder) and ``note``, the one line a run prints when they are not confined ('' when they are)."""

    rules: Rules | None
    note: str = ""

    def for_worker(self, scratch: str, command: tuple[str, ...] = ()) -> Rules | None:
        """The rules of one worker: these, its scratch folder writable, and the files its command names (absolute:
        its program, a script) readable."""
        if self.rules is None:
            return None
        named = tuple(word for word in command if os.path.isabs(word) and os.path.isfile(word))
        return replace(self.rules, read=self.rules.read + named, write=self.rules.write + (scratch,))


def default_reads(config: Config) -> tuple[str, ...]:
    """What the python implementation reads when it declares nothing: the Python files of the allowed roots,
    found from the root and from each of pytest's `pythonpath` entries inside it."""
    bases = [""] + [entry.rstrip("/") + "/" for entry in config.pythonpath if entry not in ("", ".", "./")]
    return tuple(f"{base}{root}{suffix}" for base in bases for root in config.allowed_roots for suffix in ("/**/*.py", ".py"))


def sandbox_for(config: Config, implementation: Implementation) -> Sandbox:
    """The sandbox of ``implementation``'s workers in this project: off where `sandbox = false` or the kernel has no
    Landlock (the note says which, once per run), else its rules."""
    if not config.sandbox:
        from _vllm_gates.definitions.config import setting_location

        return Sandbox(None, f"sandbox: off (`sandbox = false` in [tool.vllm-gates], {setting_location(config, 'sandbox')}): "
                             "the implementation's workers may read the expected answers and write in the project")
    abi = abi_version()
    if abi < 1:
        return Sandbox(None, "sandbox: none: this kernel has no Landlock (Linux 5.13 or later): the implementation's workers "
                             "start in a scratch folder but may read the expected answers and write in the project")
    return Sandbox(rules(config, implementation))


def rules(config: Config, implementation: Implementation) -> Rules:
    """The Landlock rules of ``implementation``'s workers (each worker's scratch folder and the files its command
    names come with it: ``Sandbox.for_worker``)."""
    root = Path(config.root).resolve()
    declared = implementation.reads
    if declared is None:  # undeclared: an external implementation's own sources, the python port's Python files
        declared = (tuple(p for p in implementation.sources if not p.startswith("!")) if implementation.external
                    else default_reads(config))
    read = [str(path) for pattern in declared for path in _granted(root, pattern)]
    read += [str(_under(root, value)) for name, value in implementation.settings if name in config.file_settings]
    read += [folder for folder in _interpreter_and_engine() if _inside(root, folder)]
    write: tuple[str, ...] = WRITABLE_SYSTEM
    writable = os.environ.get(WRITABLE_VARIABLE)
    if writable:  # `gates mutate`: its hook (on PYTHONPATH there) notes in the session's folder what each worker ran
        write += (str(Path(writable).resolve()),)
    return Rules(tuple(dict.fromkeys(read)), (str(root),), write, str(root), (tempfile.gettempdir(),))


def _granted(root: Path, pattern: str) -> list[Path]:
    """What a `reads` entry grants: a literal path its file or its whole folder, a glob the files it matches."""
    if not any(char in pattern for char in "*?["):
        return [root / pattern]
    return [root / found for found in files_matching(root, pattern)]


def _under(root: Path, value: str) -> Path:
    return Path(value) if os.path.isabs(value) else root / value


def _inside(root: Path, folder: str) -> bool:
    """Whether ``folder`` lies strictly inside the project (never the root itself or a folder above it)."""
    resolved = Path(folder).resolve()
    return resolved != root and resolved.is_relative_to(root)


def _interpreter_and_engine() -> list[str]:
    """The folders a Python worker cannot run without: the interpreter's prefixes (a virtual environment inside the
    project) and the engine's own packages (a checkout of the engine on PYTHONPATH)."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix]
    for name in ENGINE_PACKAGES:
        spec = find_spec(name)
        found += list(spec.submodule_search_locations or []) if spec is not None else []
    return found


def explain_refusal(sandbox: Sandbox | None, implementation: str, message: str) -> str:
    """``message`` (an impl worker's problem resolving a target, such as an import refused with EACCES) with, where
    it names a file of the project that the rules do not let the implementation read, how to grant it: its `reads`
    (docs/worker-protocol.md §2.2). Any other message is returned as it is."""
    found = _REFUSED_FILE.search(message)
    if found is None or sandbox is None or sandbox.rules is None or sandbox.rules.hidden is None:
        return message
    root = Path(sandbox.rules.hidden)
    refused = (root / found.group(1)).resolve()  # a relative name is the worker's, made relative to the root here
    if not _inside(root, str(refused)) or any(refused.is_relative_to(granted) for granted in sandbox.rules.read):
        return message
    return (f"{message} (the sandbox: implementation {implementation!r} may read of the project only what `reads` of "
            f"[tool.vllm-gates.implementations.{implementation}] names, not {refused.relative_to(root).as_posix()}, "
            "and write nowhere in it)")
