"""Every engine module the README and docs/*.md name exists where they name it: a path such as
`src/_vllm_gates/run/session.py` (or a folder, `src/_vllm_gates/definitions/schema/`) and a dotted name such as
`_vllm_gates.run.session` or `_vllm_gates.wire.standins:wrong_everywhere` (docs/architecture.md, "Changing the map")."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PATH = re.compile(r"(?<![\w.])src/(?:_vllm_gates|vllm_gates)(?:/[\w.-]+)*/?")
DOTTED = re.compile(r"(?<![\w.])(?:_vllm_gates|vllm_gates)(?:\.\w+)+")


def named_paths() -> list[tuple[str, str]]:
    """(file:line, the path) for every engine path the docs name."""
    return [(f"{doc.name}:{number}", found.group(0)) for doc in DOCS
            for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1) for found in PATH.finditer(line)]


def named_modules() -> list[tuple[str, str]]:
    return [(f"{doc.name}:{number}", found.group(0)) for doc in DOCS
            for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1) for found in DOTTED.finditer(line)]


def module_exists(dotted: str) -> bool:
    """``dotted``'s leading names are a package's folders, then a module or a subpackage; what follows the module
    (an attribute) is not checked. `_vllm_gates.run` must be a subpackage, `_vllm_gates.run.session` a module of it;
    the engine's packages export nothing, the public package (`vllm_gates.Call`) what its __init__.py defines."""
    parts = dotted.split(".")
    folder = ROOT / "src" / parts[0]
    for name in parts[1:]:
        if (folder / name / "__init__.py").is_file():
            folder = folder / name
            continue
        if (folder / f"{name}.py").is_file():
            return True
        return parts[0] == "vllm_gates" and re.search(rf"\b{name}\b", (folder / "__init__.py").read_text(encoding="utf-8")) is not None
    return True


def test_the_docs_name_engine_paths_and_modules() -> None:
    """The scan finds what it is for: the architecture's paths and a dotted module (a scan that matched nothing
    would let every stale name through)."""
    assert any(path.endswith(".py") for _, path in named_paths())
    assert named_modules()


def test_every_engine_path_the_docs_name_exists() -> None:
    missing = [f"{where}: {path}" for where, path in named_paths() if not (ROOT / path.rstrip("/")).exists()]
    assert not missing, "\n".join(missing)


def test_every_engine_module_the_docs_name_exists() -> None:
    missing = [f"{where}: {dotted}" for where, dotted in named_modules() if not module_exists(dotted)]
    assert not missing, "\n".join(missing)


def test_a_moved_module_is_found_missing() -> None:
    """The check refuses a flat name that moved into a subpackage, and a module that is not there."""
    assert module_exists("_vllm_gates.run.session.GateRun") and module_exists("_vllm_gates.run")
    assert not module_exists("_vllm_gates.session") and not module_exists("_vllm_gates.run.sessions")
    assert module_exists("vllm_gates.Call") and not module_exists("vllm_gates.Calls")
