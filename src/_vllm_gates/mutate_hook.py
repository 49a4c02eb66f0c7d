"""What `gates mutate` installs in every process of a gate run it starts (issue 28 item 2), through a generated
`sitecustomize` on PYTHONPATH: the mutant's text served in place of one file (the file on disk is never edited), and
the lines of the mutated files that a gate executes, recorded for the coverage pass. Standard library only.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
from types import FrameType, ModuleType
from typing import Any, Callable

MUTANT_VARIABLE = "VLLM_GATES_MUTANT"  # a JSON file: {"path": real file, "source": mutated text file, "failed": marker}
TRACE_VARIABLE = "VLLM_GATES_TRACE"  # a JSON file: {"files": [real files], "out": file the executed lines go to}
WORKER_MODULE = "_vllm_gates.worker_main"
PROFILE = "vllm-gates-mutation"  # registered in the judge of a mutant's run (`--hypothesis-profile`)


class _MutantLoader(importlib.abc.SourceLoader):
    """Loads the real file's module from the mutant's text; an import that raises leaves the `failed` marker."""

    def __init__(self, path: str, source: str, failed: str):
        self.path, self.source, self.failed = path, source, failed

    def get_filename(self, fullname: str) -> str:
        return self.path

    def get_data(self, path: str) -> bytes:
        if path == self.path:
            with open(self.source, "rb") as handle:
                return handle.read()
        with open(path, "rb") as handle:
            return handle.read()

    def path_stats(self, path: str) -> dict[str, Any]:
        raise OSError("no bytecode cache for a mutant")  # never read nor write a .pyc for it

    def exec_module(self, module: ModuleType) -> None:
        try:
            super().exec_module(module)
        except BaseException:
            with open(self.failed, "a", encoding="utf-8") as handle:
                handle.write(f"{module.__name__}\n")
            raise


class _MutantFinder(importlib.abc.MetaPathFinder):
    """Finds modules as the path finder does; the one whose file is the mutated file gets the mutant's loader."""

    def __init__(self, path: str, source: str, failed: str):
        self.loader = _MutantLoader(path, source, failed)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.origin and os.path.realpath(spec.origin) == self.loader.path:
            spec.loader = self.loader
            spec.cached = None
        return spec


def _line_tracer(files: frozenset[str], out: str) -> Callable[..., Any]:
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    seen: set[tuple[str, int]] = set()

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            key = (frame.f_code.co_filename, frame.f_lineno)
            if key not in seen:
                seen.add(key)
                os.write(fd, f"{os.path.realpath(key[0])}\t{key[1]}\n".encode())
        return local

    known: dict[str, bool] = {}

    def call(frame: FrameType, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        if name not in known:
            known[name] = os.path.realpath(name) in files
        return local if known[name] else None

    return call


def _register_profile() -> None:
    """The judge's Hypothesis profile for mutants: `ci`'s derandomized examples, without the shrink phase (a mutant
    needs one failing example, not the smallest; shrinking through worker calls is most of a killed mutant's cost)."""
    from hypothesis import HealthCheck, Phase, settings

    settings.register_profile(PROFILE, derandomize=True, database=None, deadline=None, print_blob=False,
                              phases=[Phase.explicit, Phase.generate],
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def install() -> None:
    """Install what the environment asks for; nothing when neither variable is set."""
    mutant, trace = os.environ.get(MUTANT_VARIABLE), os.environ.get(TRACE_VARIABLE)
    if "pytest" in getattr(sys, "orig_argv", ()):  # the judge of a run that `gates mutate` started
        _register_profile()
    if mutant:
        with open(mutant, encoding="utf-8") as handle:
            spec = json.load(handle)
        sys.meta_path.insert(0, _MutantFinder(os.path.realpath(spec["path"]), spec["source"], spec["failed"]))
    if trace and WORKER_MODULE in getattr(sys, "orig_argv", ()):  # only the workers run the judged code
        with open(trace, encoding="utf-8") as handle:
            spec = json.load(handle)
        tracer = _line_tracer(frozenset(spec["files"]), spec["out"])
        sys.settrace(tracer)
        threading.settrace(tracer)


SITECUSTOMIZE = "from _vllm_gates import mutate_hook\nmutate_hook.install()\n"
