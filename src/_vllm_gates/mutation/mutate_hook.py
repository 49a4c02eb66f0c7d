"""What `gates mutate` installs in the processes of its warm gate session (docs/mutation.md), through a generated
`sitecustomize` on PYTHONPATH: in each worker, as it is forked, the mutant's text served in place of one file (the
file on disk is never edited), a record of which workers imported a mutated file (so only those are restarted for
the next mutant), and, for the first pass, the lines of those files a gate executes. Standard library only.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

CONTROL_VARIABLE = "VLLM_GATES_MUTATION_CONTROL"  # a JSON file the session rewrites before each mutant
PLAN_VARIABLE = "VLLM_GATES_MUTATION_PLAN"  # a JSON file: what the session (mutate_session) is to judge
WORKER_MODULE = "_vllm_gates.workers.worker_main"
PROFILE = "vllm-gates-mutation"  # registered in the judge of a mutation session (`--hypothesis-profile`)

# The control file: {"watch": [real paths of the files that may be mutated], "touched": file where a worker notes
# "pid<TAB>path" when it imports one of them, "mutant": {"path", "source", "failed"} or null, "trace": file the
# executed lines of watched files go to, or null}. Read by a worker when it imports a watched file, never by the fork
# server (which imports none).


class _MutantLoader(importlib.abc.SourceLoader):
    """Loads the real file's module from the mutant's text; an import that raises leaves the `failed` marker."""

    def __init__(self, path: str, source: str, failed: str):
        self.path, self.source, self.failed = path, source, failed

    def get_filename(self, fullname: str) -> str:
        return self.path

    def get_data(self, path: str) -> bytes:
        with open(self.source if path == self.path else path, "rb") as handle:
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


class _WatchingFinder(importlib.abc.MetaPathFinder):
    """Finds modules as the path finder does. When a watched file is imported it reads the control file as it is
    then: notes the import (this worker now holds that file's text, so the session ends it before the next mutant),
    starts the line tracer if asked, and gives the mutated file the mutant's loader."""

    def __init__(self, control: str):
        self.control = control
        self.watch: frozenset[str] | None = None
        self.tracing = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = os.path.realpath(spec.origin) if spec is not None and spec.origin else None
        if origin is None or (self.watch is not None and origin not in self.watch):
            return spec
        try:
            with open(self.control, encoding="utf-8") as handle:
                now = json.load(handle)
            self.watch = frozenset(now["watch"])
            if origin not in self.watch:
                return spec
            with open(now["touched"], "a", encoding="utf-8") as handle:
                handle.write(f"{os.getpid()}\t{origin}\n")
            if now.get("trace") and not self.tracing:
                tracer = _line_tracer(self.watch, now["trace"])
                sys.settrace(tracer)
                threading.settrace(tracer)
                self.tracing = True
        except BaseException as error:
            with open(hook_errors(self.control), "a", encoding="utf-8") as handle:
                handle.write(f"worker {os.getpid()} importing {origin}: {type(error).__name__}: {error}\n")
            raise
        mutant = now.get("mutant")
        if mutant and spec is not None and origin == os.path.realpath(mutant["path"]):
            spec.loader = _MutantLoader(origin, mutant["source"], mutant["failed"])
            spec.cached = None
        return spec


def _forked(control: str, server: int) -> None:
    """In a worker a fork server just forked: the finder first; then, where the server imported watched files (the
    warm server of the impl role, docs/mutation.md), the current mutant applied by purging its file's module, the
    modules that import it and every project module the import graph does not know, so they load again through the
    finder; the worker is noted as touched, so the session ends it before the next mutant."""
    sys.meta_path.insert(0, _WatchingFinder(control))
    if os.getppid() != server:
        return  # forked by a worker (a gloo world's rank): it shares its worker's modules, mutant included
    try:
        with open(control, encoding="utf-8") as handle:
            now = json.load(handle)
        roots = tuple(now.get("warm_roots") or ())
        loaded = {name: _origin(module) for name, module in list(sys.modules.items())
                  if roots and str(getattr(module, "__file__", None) or "").startswith(roots)}
        if not set(now["watch"]) & set(loaded.values()):
            return  # a server holding no watched file (the plain one): nothing of a mutant's can be stale here
        if now.get("trace"):
            raise RuntimeError("a warm worker cannot trace the lines of files its server imported")
        mutant, known = now.get("mutant") or {}, frozenset(now.get("warm_known", ()))
        purge = frozenset(mutant.get("purge", ())) | ({os.path.realpath(mutant["path"])} if mutant else set())
        for name, origin in loaded.items():
            if origin is not None and (origin in purge or origin not in known):
                _forget(name)
        with open(now["touched"], "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\t(warm)\n")
    except Exception as error:
        with open(hook_errors(control), "a", encoding="utf-8") as handle:
            handle.write(f"warm worker {os.getpid()}: {type(error).__name__}: {error}\n")
        os._exit(70)


def _forget(name: str) -> None:
    """Drop a module from sys.modules and from its package's attributes, which `from package import module` reads
    before sys.modules: its next import loads it again."""
    module = sys.modules.pop(name)
    parent, _, child = name.rpartition(".")
    if parent in sys.modules and getattr(sys.modules[parent], child, None) is module:
        delattr(sys.modules[parent], child)


def _origin(module: Any) -> str | None:
    """The real path of a module's source file; None for a built-in, a namespace package or a module without one."""
    name = getattr(module, "__file__", None)
    return os.path.realpath(name) if isinstance(name, str) and name.endswith(".py") else None


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


def hook_errors(control: str) -> str:
    """Where a worker that could not apply the control file says why (the session then stops: a mutant that was not
    applied must never be judged as one that survived)."""
    return control + ".errors"


def install() -> None:
    """In the session's judge, the mutation profile; in its workers, the control file applied as each one starts
    (the fork server itself imports no judged code: it applies it in each child it forks)."""
    control, argv = os.environ.get(CONTROL_VARIABLE), getattr(sys, "orig_argv", ())
    if not control:
        return
    if "pytest" in argv:
        _register_profile()
    if WORKER_MODULE in argv:
        if "--zygote" in argv:
            server = os.getpid()
            os.register_at_fork(after_in_child=lambda: _forked(control, server))
        else:
            sys.meta_path.insert(0, _WatchingFinder(control))


SITECUSTOMIZE = "from _vllm_gates.mutation import mutate_hook\nmutate_hook.install()\n"
