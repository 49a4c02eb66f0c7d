"""The engine's import contract (docs/architecture.md): `[tool.importlinter]` in pyproject.toml is kept, each of its
contracts breaks on an import that violates it, an import planted across any boundary between layers breaks the
layers, and the map's subpackages, their modules and inner layers are the contract's."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from copy import deepcopy
from itertools import pairwise, permutations
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.contracts.layers import LayersContract

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "architecture.md"
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"

# One import per contract, each breaking that contract alone: contract id -> (file, the line appended to it).
VIOLATIONS = {
    "layers": ("src/_vllm_gates/base/errors.py", "from _vllm_gates.wire import settings"),  # base imports the wire above it
    "frontends": ("src/_vllm_gates/frontends/html_report.py", "from _vllm_gates.frontends import plugin"),  # a command imports a door
    "run": ("src/_vllm_gates/run/checks.py", "from _vllm_gates.run import pick"),  # one gate's checks import what picks the run
    "acyclic": ("src/_vllm_gates/wire/channel.py", "from _vllm_gates.wire import plain"),  # plain imports channel: a ring in wire
    "engine-imports-no-content": ("src/_vllm_gates/values/render.py", "import impl"),
    "public-face": ("src/vllm_gates/__init__.py", "from _vllm_gates.definitions import config"),
    "content-independence": ("oracles/__init__.py", "import impl"),
    "content-no-gates": ("upstream/__init__.py", "import gates"),
    "only-upstream-imports-vllm": ("oracles/layout.py", "import vllm"),
    "only-upstream-imports-transformers": ("oracles/norm_rope.py", "import transformers"),
}
COPIED = ("src/_vllm_gates", "src/vllm_gates", "oracles", "upstream")  # the packages the violations edit


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def contracts() -> list[dict[str, Any]]:
    return pyproject()["tool"]["importlinter"]["contracts"]


def lint_imports(cwd: Path, search_path: list[Path]) -> tuple[dict[str, str], str]:
    """Run lint-imports in its own process from ``cwd`` (which it puts first on the path): each contract's name ->
    KEPT or BROKEN, and what it printed (the offending imports)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, search_path)), "COLUMNS": "400", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", LINT, "--no-cache", "--no-logo", "--config", str(cwd / "pyproject.toml")],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    printed = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)  # no colour codes, whatever the environment forces
    found = dict(re.findall(r"^(.+?) (KEPT|BROKEN)\b", printed, re.MULTILINE))
    assert found, f"lint-imports checked no contract (exit {done.returncode}):\n{printed}\n{done.stderr}"
    assert (done.returncode == 0) == all(v == "KEPT" for v in found.values()), printed + done.stderr
    return found, printed


def test_the_engine_keeps_its_import_contract() -> None:
    found, printed = lint_imports(ROOT, [ROOT / "src", ROOT])
    assert found == {c["name"]: "KEPT" for c in contracts()}, printed


def test_each_contract_breaks_on_its_violation(tmp_path: Path) -> None:
    assert set(VIOLATIONS) == {c["id"] for c in contracts()}, "every contract needs a violation that proves it can fail"
    for folder in COPIED:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for file, line in VIOLATIONS.values():
        with open(tmp_path / file, "a", encoding="utf-8") as handle:
            handle.write(f"\n{line}\n")
    found, printed = lint_imports(tmp_path, [tmp_path / "src", tmp_path, ROOT])
    assert found == {c["name"]: "BROKEN" for c in contracts()}, printed


def test_contracts_cover_the_independence_table() -> None:
    """Every pair of `[tool.vllm-gates.independence]` (what `gates check-independence` checks) is a contract too."""
    forbidden: set[tuple[str, str]] = set()
    for contract in contracts():
        if contract["type"] == "independence":
            forbidden |= set(permutations(contract["modules"], 2))
        if contract["type"] == "forbidden":
            forbidden |= {(s, f) for s in contract["source_modules"] for f in contract["forbidden_modules"]}
    table = pyproject()["tool"]["vllm-gates"]["independence"]
    assert {(package, other) for package, others in table.items() for other in others} <= forbidden


SECTION = re.compile(r"### (\d+)\. `(\w+)/`")
INNER = "Inner layers, from the top: "


def sections_of_the_map() -> list[tuple[int, str, set[str], list[str]]]:
    """docs/architecture.md's subpackage sections in order: (layer, subpackage, its modules, its inner layers)."""
    sections: list[tuple[int, str, set[str], list[str]]] = []
    for line in MAP.read_text(encoding="utf-8").splitlines():
        heading = SECTION.match(line)
        if heading:
            sections.append((int(heading.group(1)), heading.group(2), set(), []))
        elif line.startswith("### ") and sections:  # past the subpackages (the public package)
            break
        elif sections and (module := re.match(r"- `(\w+)\.py`:", line)):
            sections[-1][2].add(module.group(1))
        elif sections and line.startswith(INNER):
            sections[-1][3].extend(re.findall(r"`([^`]+)`", line[len(INNER):]))
    return sections


def layers_of_the_map() -> list[str]:
    """The map's layers from the top, each written as the contract writes it (`a | b` for one layer of two)."""
    layers: dict[int, list[str]] = {}
    for number, name, _, _ in sections_of_the_map():
        layers.setdefault(number, []).append(name)
    assert list(layers) == list(range(1, len(layers) + 1)), f"{MAP.name}: layers numbered {list(layers)}"
    return [" | ".join(names) for names in layers.values()]


def overview_of_the_map() -> list[str]:
    """The overview block's layers (`  2  mutation | taps   gates mutate ...`), from the top."""
    text = MAP.read_text(encoding="utf-8")
    block = text[text.index("## The subpackages"):text.index("### 1. ")].split("```")[1]
    return [found.group(1) for found in re.finditer(r"^ +\d+ +(\w+(?: \| \w+)*) ", block, re.MULTILINE)]


def normalized(layer: str) -> str:
    return re.sub(r"\s*([|:])\s*", r" \1 ", layer.strip())


def layers_contract(contract_id: str) -> dict[str, Any]:
    (found,) = [c for c in contracts() if c["id"] == contract_id]
    return found


def test_the_map_shows_the_contracts_layers() -> None:
    layers = [normalized(layer) for layer in layers_contract("layers")["layers"]]
    assert layers_of_the_map() == layers
    assert overview_of_the_map() == layers
    assert all(":" not in layer for layer in layers), "subpackages of one layer never import each other: write them `a | b`"


def test_each_subpackage_has_its_section_listing_its_modules() -> None:
    engine = ROOT / "src" / "_vllm_gates"
    folders = {path.parent.name for path in engine.glob("*/__init__.py")}
    assert {path.stem for path in engine.glob("*.py")} == {"__init__"}, "every engine module lives in a subpackage"
    sections = sections_of_the_map()
    assert sorted(name for _, name, _, _ in sections) == sorted(folders)
    for _, name, modules, _ in sections:
        assert modules == {path.stem for path in (engine / name).glob("*.py")} - {"__init__"}, f"section {name}/"


def test_the_map_shows_each_subpackages_inner_layers() -> None:
    inner = {c["containers"][0].removeprefix("_vllm_gates."): [normalized(layer) for layer in c["layers"]]
             for c in contracts() if c["type"] == "layers" and c["containers"] != ["_vllm_gates"]}
    assert {name: [normalized(layer) for layer in layers] for _, name, _, layers in sections_of_the_map() if layers} == inner


def layer_boundaries(layers: list[str]) -> list[tuple[str, str]]:
    """(lower, upper) for every pair across adjacent layers and every pair of one layer written `a | b`: each an
    import the contract refuses."""
    rows = [[name.strip() for name in re.split(r"[|:]", layer)] for layer in layers]
    pairs = [(lower, upper) for upper_row, lower_row in pairwise(rows) for upper in upper_row for lower in lower_row]
    pairs += [(a, b) for layer, row in zip(layers, rows) if "|" in layer for a, b in permutations(row, 2)]
    return pairs


def layers_contracts() -> list[dict[str, Any]]:
    return [c for c in contracts() if c["type"] == "layers"]


@pytest.fixture(scope="module")
def engine_graph() -> grimp.ImportGraph:
    return grimp.build_graph("_vllm_gates", cache_dir=None)


@pytest.mark.parametrize("contract", layers_contracts(), ids=lambda c: c["id"])
def test_an_import_planted_across_each_boundary_breaks_the_layers(contract: dict[str, Any], engine_graph: grimp.ImportGraph) -> None:
    """One import planted at a time across each boundary of the contract (upward to the next layer, between two
    subpackages of one layer; into `mutation` from anything but the front ends): the contract fails on it, naming it."""
    options = {key: (str(value).lower() if isinstance(value, bool) else value) for key, value in contract.items()
               if key not in ("id", "name", "type")}
    checker = LayersContract(contract["name"], {"root_packages": ["_vllm_gates"]}, options)
    assert checker.check(engine_graph, verbose=False).kept
    (container,) = contract["containers"]
    pairs = layer_boundaries(contract["layers"])
    if contract["id"] == "layers":  # mutation: only the front ends import it, however far below they sit
        pairs += [(name, "mutation") for layer in contract["layers"][2:] for name in re.split(r"\s*\|\s*", layer)]
    assert pairs
    for lower, upper in pairs:
        importer, imported = (_some_module(engine_graph, f"{container}.{name}") for name in (lower, upper))
        planted = deepcopy(engine_graph)
        planted.add_import(importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}")
        check = checker.check(planted, verbose=False)
        assert not check.kept, f"{importer} -> {imported} kept {contract['id']}"
        found = {(link["importer"], link["imported"]) for dependency in check.metadata["invalid_dependencies"]
                 for route in dependency["routes"] for link in route["chain"]}
        assert (importer, imported) in found, (importer, imported, check.metadata)


def _some_module(graph: grimp.ImportGraph, name: str) -> str:
    """The module itself, or the first module of the subpackage ``name``."""
    children = sorted(graph.find_children(name))
    return children[0] if children else name
