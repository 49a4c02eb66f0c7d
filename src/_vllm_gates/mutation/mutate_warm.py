"""The warm impl worker of `gates mutate` (docs/mutation.md, "How a mutant is judged"): what a second fork server
imports once, unmutated, after the first pass, and, for each mutated file, which of those modules a worker forked from
it must load again so that it runs the mutant (the file's module and every module that imports it, read from the
static import graph; mutate_hook purges them, and any project module the graph does not know, in the child)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from _vllm_gates.definitions.config import Config
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.definitions.sources import ModuleFile, import_graph, target_modules

ENGINE_PACKAGES = ("_vllm_gates", "vllm_gates")  # the worker's own code: never imported again in a worker


@dataclass(frozen=True)
class WarmPlan:
    """The modules the warm server imports (the impl side's targets and builders), the real paths of every project
    module they import (``known``), the folders of their top packages (``roots``), and per file what to purge."""

    modules: tuple[str, ...]
    known: tuple[str, ...]
    roots: tuple[str, ...]
    purge: dict[str, tuple[str, ...]]  # real path of a mutated file -> real paths of the modules that import it, itself included

    def control(self) -> dict[str, list[str]]:
        """The control file's part a forked worker reads (mutate_hook._forked)."""
        return {"warm_known": list(self.known), "warm_roots": list(self.roots)}


def warm_plan(config: Config, gate_file: GateFile, files: list[str]) -> WarmPlan:
    """What the impl role's warm server of ``gate_file`` imports, and what each of ``files`` forces to load again."""
    graph = import_graph(config)
    names = target_modules([r for g in gate_file.gates for r in (g.impl, g.build_impl) if r])
    closure = {name: module for name, module in graph.closure(set(names)).items()
               if name.split(".")[0] not in ENGINE_PACKAGES}
    reaches = {name: {os.path.realpath(m.path) for m in graph.closure({name}).values()} for name in closure}
    purge = {}
    for file in files:
        real = os.path.realpath(config.root / file)
        purge[real] = tuple(sorted(os.path.realpath(closure[n].path) for n in closure if real in reaches[n]))
    roots = sorted({form for module in closure.values() for top in [_top_folder(module)]
                    for form in (top, os.path.realpath(top) + (os.sep if top.endswith(os.sep) else ""))})
    return WarmPlan(tuple(sorted(n for n in names if n in closure)),
                    tuple(sorted(os.path.realpath(m.path) for m in closure.values())), tuple(roots), purge)


def _top_folder(module: ModuleFile) -> str:
    """The folder of the module's top package (`ROOT/impl` for `impl.v1.x`), as the worker's sys.path spells it and
    as its real path, whichever the module's __file__ starts with."""
    depth = module.name.count(".") + (1 if module.package else 0)
    return str(Path(module.path).parents[depth - 1]) + os.sep if depth else str(module.path)
