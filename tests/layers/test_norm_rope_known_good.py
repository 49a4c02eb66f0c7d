"""LAYERS-NORM-ROPE's known-goods (docs/gate-files.md, "Known-goods"): every one passes its gate as gate.yaml
declares it, and a tolerance tightened tenfold makes the audit report the gate TOO TIGHT, naming the known-good,
the case and the error it saw. The known-goods import neither the port nor the oracle."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _vllm_gates.definitions.gatefile import load_gate_file

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[2]
ROW = "gates/rows/layers_norm_rope"
COPIED = ("impl", "oracles", "gates", "spec", "upstream", "pyproject.toml")


def _known_goods(row: str) -> list[tuple[str, str]]:
    """(gate, known-good name) of every known-good the row's gate file (and its parts) declares."""
    loaded = load_gate_file(REPO / row / "gate.yaml", REPO, None, ("cpu", "dist", "gpu", "upstream"), parity_marker="upstream")
    return [(gate.id, good.name) for gate in loaded.gates for good in gate.known_good]


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "CI": "true"}, timeout=600)


def every_known_good_passes(row: str, gates: set[str]) -> None:
    """Run the row's known-good items alone; each declared one passed, none failed (shared with the TP row's test)."""
    declared = _known_goods(row)
    assert gates <= {gate for gate, _ in declared}, f"{row}: {gates - {gate for gate, _ in declared}} declare no known-good"
    ran = _pytest(REPO, f"{row}/gate.yaml", "-k", "known_good", "-rA")
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert f"{len(declared)} passed" in ran.stdout, ran.stdout[-2000:]
    for gate, name in declared:
        assert f"PASSED {row}/gate.yaml::{gate}::known_good[{name}]" in ran.stdout, ran.stdout[-2000:]


def tightened_audit(tmp_path: Path, row: str, gate: str, written: str, tighter: str) -> subprocess.CompletedProcess[str]:
    """The audit of one gate in a copy of the project whose gate files have ``written`` replaced by ``tighter``
    (once, in the gate's own block)."""
    for name in COPIED:
        source = REPO / name
        (shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__")) if source.is_dir()
         else shutil.copy(source, tmp_path / name))
    for path in sorted((tmp_path / row).glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        start = text.find(f"  - id: {gate}\n")
        if start < 0:
            continue
        at = text.index(written, start)
        path.write_text(text[:at] + tighter + text[at + len(written):], encoding="utf-8")
        gate_file = f"{row}/gate.yaml"
        return _pytest(tmp_path, "--gates-audit", f"{gate_file}::{gate}")
    raise AssertionError(f"no gate {gate} in {row}")


def test_every_known_good_of_the_row_passes_its_gate() -> None:
    every_known_good_passes(ROW, {"rms-norm", "rms-norm-float16-drawn", "rms-norm-recorded", "rope-cos-sin-cache",
                                  "rotary-embedding"})


def test_a_float16_rtol_tightened_tenfold_is_too_tight_naming_the_known_good_case_and_error(tmp_path: Path) -> None:
    ran = tightened_audit(tmp_path, ROW, "rms-norm-float16-drawn", "rtol: 2.0e-3", "rtol: 2.0e-4")
    assert ran.returncode == 3, ran.stdout[-4000:] + ran.stderr[-2000:]
    headline = next(line for line in ran.stdout.splitlines() if "TOO TIGHT" in line and "float32-round-once" in line)
    assert (f"{ROW}/gate.yaml:" in headline and "TOO TIGHT: gate rms-norm-float16-drawn rejects known-good "
            "float32-round-once on case 'float16-hidden-4096-x10'") in headline, headline
    assert "max abs error 0.00390625; max rel error 0.00204" in headline, headline
    assert "result: float16, shape [4, 4096] (rtol 0.0002, atol 1e-05)" in headline, headline
    table = next(line for line in ran.stdout.splitlines() if line.startswith("LAYERS-NORM-ROPE  rms-norm-float16-drawn"))
    assert "ERROR" in table and "0/2 passed" in table, table
    assert "audit exit 3" in ran.stdout


@pytest.mark.parametrize("module", [f"{ROW}/known_good.py", "gates/rows/backend_distributed_tp/known_good.py"])
def test_the_known_goods_import_neither_the_port_nor_the_oracle(module: str) -> None:
    """Independent ports: a known-good that imported the impl or the oracle would pass by being them."""
    tree = ast.parse((REPO / module).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    assert imported and not imported & {"impl", "oracles", "upstream", "vllm"}, imported


def _rotation_nmse(case: str, rotation) -> float:
    """The worst NMSE of ``rotation``'s query and key against the oracle on one named rotary-embedding case."""
    import numpy as np
    import torch

    from gates.rows.layers_norm_rope import build
    from oracles import norm_rope

    loaded = load_gate_file(REPO / ROW / "gate.yaml", REPO, None, ("cpu", "upstream"), parity_marker="upstream")
    data = next(c for gate in loaded.gates if gate.id == "rotary-embedding" for c in gate.cases if c.name == case).input
    impl_call, oracle_call = build.rope_impl(data), build.rope_oracle(data)
    found = []
    for got, want in zip(rotation(*impl_call.args, **impl_call.kwargs), norm_rope.rope_forward(*oracle_call.args, **oracle_call.kwargs)):
        if want is not None:
            got64, want64 = got.to(torch.float64).numpy(), want.astype(np.float64)
            found.append(float(np.sum((got64 - want64) ** 2) / np.sum(want64 ** 2)))
    return max(found)


@pytest.mark.parametrize("name", ["rope_fused", "rope_float64"])
def test_a_rotation_rounded_once_needs_the_bfloat16_bound_alone(name: str) -> None:
    """Why rotary-embedding's NMSE bound is per dtype (its description, docs/numeric-gates.md): on the named bfloat16
    cases a rotation rounded once exceeds 1e-5 and stays inside bfloat16's 1e-4; float16 and float32 are far inside
    1e-5."""
    from gates.rows.layers_norm_rope import known_good

    rotation = getattr(known_good, name)
    for case in ("llama-3-neox-bfloat16", "gptj-bfloat16"):
        assert 1e-5 < _rotation_nmse(case, rotation) < 1e-4
    assert _rotation_nmse("llama-2-neox-float16", rotation) < 1e-6
    assert _rotation_nmse("llama-3-neox-float32", rotation) < 1e-8
    assert _rotation_nmse("llama-3-neox-bfloat16", known_good.rope_own_table) < 1e-6, "the declared one: per-step rounding"
