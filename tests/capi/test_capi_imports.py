"""impl.capi imports only the stdlib, torch and impl; oracles.abi only the stdlib, torch and oracles."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATHS = [*sorted((ROOT / "impl" / "capi").glob("*.py")), ROOT / "impl" / "entrypoints" / "example_cli.py",
         *sorted((ROOT / "oracles" / "abi").glob("*.py"))]

pytestmark = pytest.mark.cpu


def _top_level_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", PATHS, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_allowed_imports(path):
    own = path.relative_to(ROOT).parts[0]
    outside = {name for name in _top_level_imports(path) if name not in sys.stdlib_module_names}
    assert outside <= {own, "torch"}, f"{path.relative_to(ROOT)} imports {sorted(outside - {own, 'torch'})}"
