"""The modules the judging process imports for each row (every `compare:` and `properties.strategy` target of its
gate file) import neither impl nor oracles, not even transitively, nor torch: the judge runs on plain data alone."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
GATE_FILES = sorted((ROOT / "gates" / "rows").glob("*/gate.yaml"))
FORBIDDEN = ("impl", "oracles", "torch")

pytestmark = pytest.mark.cpu


def _judge_modules(gate_file: Path) -> list[str]:
    """The modules of the gate file's compare and strategy targets (`.x` is relative to the row folder)."""
    gates = yaml.safe_load(gate_file.read_text(encoding="utf-8"))["gates"]
    targets = [gate["compare"] for gate in gates if "compare" in gate]
    targets += [gate["properties"]["strategy"] for gate in gates if "properties" in gate]
    package = gate_file.parent.relative_to(ROOT).as_posix().replace("/", ".")
    return sorted({(package + t.split(":")[0]) if t.startswith(".") else t.split(":")[0] for t in targets})


JUDGE_MODULES = [module for gate_file in GATE_FILES for module in _judge_modules(gate_file)]


def test_every_row_names_judge_side_modules():
    assert len(GATE_FILES) == 3 and all(_judge_modules(gate_file) for gate_file in GATE_FILES)


@pytest.mark.parametrize("module", JUDGE_MODULES)
def test_judge_side_module_imports_no_impl_oracles_or_torch(module):
    code = ("import importlib, json, sys; importlib.import_module(sys.argv[1]); "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code, module], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert not loaded & set(FORBIDDEN), f"{module} pulls in {sorted(loaded & set(FORBIDDEN))}"
