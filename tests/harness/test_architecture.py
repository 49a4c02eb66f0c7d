"""The engine's import contract (issue 27, item 6; docs/architecture.md): `[tool.importlinter]` in pyproject.toml is
kept, each of its contracts breaks on an import that violates it, and the map's rooms are the contract's layers."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from itertools import permutations
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "architecture.md"
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"

# One import per contract, each breaking that contract alone: contract id -> (file, the line appended to it).
VIOLATIONS = {
    "rooms": ("src/_vllm_gates/base/errors.py", "from _vllm_gates.wire import settings"),  # room 11 imports room 9
    "acyclic": ("src/_vllm_gates/wire/channel.py", "from _vllm_gates.wire import plain"),  # plain imports channel: a ring in room 9
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


def rooms_of_the_map() -> list[tuple[set[str], set[str]]]:
    """docs/architecture.md's rooms in order: (its modules, those marked new in issue 27)."""
    rooms: list[tuple[set[str], set[str]]] = []
    for line in MAP.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"### (\d+)\. ", line)
        if heading:
            assert int(heading.group(1)) == len(rooms) + 1, f"room {heading.group(1)} out of order in {MAP.name}"
            rooms.append((set(), set()))
            continue
        if line.startswith("### "):  # past the numbered rooms (the public package)
            break
        module = re.match(r"- `(\w+)\.py`( \(new in issue 27\))?:", line)
        if module and rooms:
            rooms[-1][0].add(module.group(1))
            if module.group(2):
                rooms[-1][1].add(module.group(1))
    return rooms


def rooms_of_the_contract() -> list[tuple[set[str], set[str]]]:
    """The layers of the `rooms` contract in order: (their modules, the optional ones, written `(name)`)."""
    (layers,) = [c["layers"] for c in contracts() if c["id"] == "rooms"]
    rooms = []
    for layer in layers:
        tails = [tail.strip() for tail in re.split(r"[|:]", layer)]
        rooms.append(({tail.strip("()") for tail in tails}, {tail.strip("()") for tail in tails if tail.startswith("(")}))
    return rooms


def test_the_map_shows_the_contracts_rooms() -> None:
    assert rooms_of_the_map() == rooms_of_the_contract()
    engine = {path.stem for path in (ROOT / "src" / "_vllm_gates").glob("*.py")} - {"__init__"}
    assert engine <= set().union(*(modules for modules, _ in rooms_of_the_map()))
