"""The modules the judging process imports for each row (every `compare:` and `properties.strategy` target of its
gate file) import neither impl nor oracles, not even transitively, nor torch: the judge runs on plain data alone."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _vllm_gates.definitions.config import load_config
from _vllm_gates.definitions.model import GateFile
from _vllm_gates.definitions.project import load_project

ROOT = Path(__file__).resolve().parents[1]
PROJECT = load_project(load_config(ROOT))
GATE_FILES = PROJECT.gate_files  # with their part files and `upstream:` legs
FORBIDDEN = ("impl", "oracles", "torch")

pytestmark = pytest.mark.cpu


def _judge_modules(gate_file: GateFile) -> list[str]:
    """The modules of the gate file's compare and strategy targets, its gates' legs included."""
    targets = [gate.compare for gate in gate_file.gates if gate.compare]
    targets += [gate.properties.strategy for gate in gate_file.gates if gate.properties]
    return sorted({t.module for t in targets})


JUDGE_MODULES = sorted({module for gate_file in GATE_FILES for module in _judge_modules(gate_file)})


def test_every_rows_gate_file_is_read_and_some_name_judge_side_modules():
    """The modules below come from every row of the roadmap (a row whose gates name no compare or strategy target,
    as MODEL-TAPS, has none), and there are some to check."""
    assert {gate_file.row for gate_file in GATE_FILES} == {row.id for row in PROJECT.roadmap.rows}
    assert JUDGE_MODULES


@pytest.mark.parametrize("module", JUDGE_MODULES)
def test_judge_side_module_imports_no_impl_oracles_or_torch(module):
    code = ("import importlib, json, sys; importlib.import_module(sys.argv[1]); "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code, module], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert not loaded & set(FORBIDDEN), f"{module} pulls in {sorted(loaded & set(FORBIDDEN))}"
