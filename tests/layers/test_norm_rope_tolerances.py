"""LAYERS-NORM-ROPE's tolerances (issue 29 item 7, the Numbers rule): each gate's policy, as gate.yaml states it,
rejects zeros, the expected mean as a constant, the expected tensor with its last axis permuted and 1%-of-RMS noise;
and the float16-variance known-bad really differs at a model's size (hidden 4096) under the float16 default."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from _vllm_gates.definitions.gatefile import load_gate_file
from _vllm_gates.values.policies import PerDtype, Policy
from _vllm_gates.values.tolerance import compare_under
from gates.rows.layers_norm_rope import build, known_bad
from gates.rows.layers_norm_rope.tensors import randn
from impl.model_executor.layers.layernorm import rms_norm
from impl.model_executor.layers.rotary_embedding import rope_forward
from oracles import norm_rope

pytestmark = pytest.mark.cpu

GATE_FILE = Path(__file__).resolve().parents[2] / "gates/rows/layers_norm_rope/gate.yaml"


def _policy(gate_id: str) -> Policy:
    """The gate's `compare:` policy as gate.yaml gives it."""
    gates = {gate["id"]: gate for gate in yaml.safe_load(GATE_FILE.read_text())["gates"]}
    compare = dict(gates[gate_id]["compare"])
    per_dtype = {key: PerDtype(tuple(value.items())) for key, value in compare.items() if isinstance(value, dict)}
    return Policy(compare.pop("policy"), **{**compare, **per_dtype})


def _case_input(gate_id: str, case: str) -> dict[str, Any]:
    """A named case's input as the judge reads it (its tensor spellings made numpy arrays)."""
    loaded = load_gate_file(GATE_FILE, GATE_FILE.parents[3], None, ("cpu", "upstream"), parity_marker="upstream")
    gate = next(gate for gate in loaded.gates if gate.id == gate_id)
    return next(item for item in gate.cases if item.name == case).input


def _expected(gate_id: str, case: str) -> np.ndarray:
    """The oracle's first tensor on one of the gate's named cases."""
    case_input = _case_input(gate_id, case)
    oracle, builder = {"rms-norm": (norm_rope.rms_norm, build.rms_oracle),
                       "rms-norm-float16-drawn": (norm_rope.rms_norm, build.rms_oracle),
                       "rope-cos-sin-cache": (norm_rope.cos_sin_cache, build.cache_call),
                       "rotary-embedding": (norm_rope.rope_forward, build.rope_oracle)}[gate_id]
    call = builder(case_input)
    result = oracle(*call.args, **call.kwargs)
    return result[0] if isinstance(result, tuple) else result


def _wrong_answers(expected: np.ndarray) -> dict[str, np.ndarray]:
    wide = expected.astype(np.float64)
    rms = float(np.sqrt(np.mean(wide * wide)))
    noise = np.random.Generator(np.random.PCG64(0)).standard_normal(expected.shape)
    return {"zeros": np.zeros_like(expected), "constant": np.full_like(expected, wide.mean()),
            "permuted": expected[..., np.random.Generator(np.random.PCG64(1)).permutation(expected.shape[-1])],
            "noise": (wide + 0.01 * rms * noise).astype(expected.dtype)}


@pytest.mark.parametrize(("gate_id", "case"), [
    ("rms-norm", "float32-hidden-4096"), ("rms-norm", "bfloat16-hidden-4096"), ("rms-norm", "float16-hidden-4096-unit"),
    ("rms-norm-float16-drawn", "float16-hidden-4096-x10"), ("rope-cos-sin-cache", "llama-3-128x8192"),
    ("rotary-embedding", "llama-3-neox-float32"), ("rotary-embedding", "llama-3-neox-bfloat16"),
    ("rotary-embedding", "llama-2-neox-float16")])
def test_each_tolerance_rejects_the_wrong_answers_a_loose_one_lets_through(gate_id: str, case: str) -> None:
    policy, expected = _policy(gate_id), _expected(gate_id, case)
    assert compare_under(policy, expected, expected).passed
    passed = [name for name, wrong in _wrong_answers(expected).items() if compare_under(policy, wrong, expected).passed]
    assert passed == [], f"{gate_id} under {policy.describe()} lets {passed} pass on {case}"


def test_an_atol_of_one_lets_a_wrong_answer_through() -> None:
    """The check above can fail: RMSNorm's outputs are O(1), so atol 1.0 (issue 29's example of a widened
    tolerance) lets the 1%-noise answer pass."""
    expected = _expected("rms-norm", "float32-hidden-4096")
    loose = Policy("allclose", rtol=1.3e-6, atol=1.0)
    assert compare_under(loose, _wrong_answers(expected)["noise"], expected).passed


def _float16_case(hidden: int, scale: float, seed: int = 4) -> dict[str, Any]:
    return {"x": randn((4, hidden), "float16", 10 * seed, scale), "weight": randn((hidden,), "float16", 10 * seed + 1, 0.1, 1.0),
            "eps": 1e-6, "residual": None}


def _float16_sum_passes(case: dict[str, Any]) -> bool:
    call = build.rms_impl(case)
    right, wrong = rms_norm(*call.args, **call.kwargs), known_bad.float16_variance(*call.args, **call.kwargs)
    return compare_under(Policy("allclose"), wrong.numpy(), right.numpy()).passed


@pytest.mark.parametrize(("hidden", "scale"), [(4096, 1.0), (4096, 10.0)])
def test_a_float16_running_sum_fails_the_float16_default_at_hidden_4096(hidden: int, scale: float) -> None:
    assert not any(_float16_sum_passes(_float16_case(hidden, scale, seed)) for seed in range(10))


def test_a_float16_running_sum_is_mostly_within_the_default_on_a_toy_row() -> None:
    """Why the cases are of a model's size: at hidden 8, values ~1, the float16 sum stays within the default on
    most seeds (it reaches up to ~1.2 of it on the others), so a toy row would let it through."""
    assert sum(_float16_sum_passes(_float16_case(8, 1.0, seed)) for seed in range(20)) >= 10


def _vllm_float32_table(rotary_dim: int, max_position: int, base: float) -> np.ndarray:
    """The table as vLLM computes it (NR-2.3): inv_freq by float32 pow and reciprocal, angles and cos/sin in float32."""
    inv_freq = 1.0 / (float(base) ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
    angles = torch.arange(max_position, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return np.concatenate((angles.cos().numpy(), angles.sin().numpy()), axis=-1)


def test_rope_oracle_rounds_where_vllm_rounds() -> None:
    """On vLLM's own float32 table, the complex-multiplication oracle's rotation is bit-equal to the port in every
    dtype (NR-3.3), GPT-J and partial too: only the table (exact, rounded once) sets the two apart in the gate."""
    for dtype in ("float32", "float16", "bfloat16"):
        for neox, rotary_dim in ((True, 64), (False, 32)):
            case = {"positions": np.array([4095, 0, 7, 1000, 2048]), "query": randn((5, 128), dtype, 34),
                    "key": randn((5, 64), dtype, 35), "head_size": 64, "rotary_dim": rotary_dim,
                    "max_position": 4096, "base": 10000.0, "neox": neox}
            impl_call, oracle_call = build.rope_impl(case), build.rope_oracle(case)
            ours = rope_forward(*impl_call.args, **impl_call.kwargs)
            config = dict(oracle_call.kwargs)
            table = _vllm_float32_table(config["rotary_dim"], config.pop("max_position"), config.pop("base"))
            theirs = norm_rope.rotate_by_table(table, *oracle_call.args, **config)
            for port, oracle in zip(ours, theirs):
                as_bits = port.view(torch.int16 if port.dtype != torch.float32 else torch.int32).numpy()
                assert np.array_equal(as_bits, oracle.view(as_bits.dtype)), (dtype, neox)


def _row_copy(tmp_path: Path, gate_id: str, written: str, widened: str) -> subprocess.CompletedProcess[str]:
    """This row copied to ``tmp_path`` with gate ``gate_id``'s `compare:` ``written`` replaced by ``widened``, and
    that gate's strength item run there."""
    import os
    import shutil
    import sys

    repo = GATE_FILE.parents[3]
    for name in ("impl", "oracles", "gates", "spec", "upstream", "pyproject.toml"):
        source = repo / name
        (shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__")) if source.is_dir()
         else shutil.copy(source, tmp_path / name))
    gate_file = tmp_path / "gates/rows/layers_norm_rope/gate.yaml"
    text = gate_file.read_text(encoding="utf-8")
    start = text.index(f"  - id: {gate_id}\n")
    at = text.index(written, start)
    gate_file.write_text(text[:at] + widened + text[at + len(written):], encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "_vllm_gates.frontends.cli", "--root", str(tmp_path), "run", "LAYERS-NORM-ROPE",
                           "--gate", gate_id, "--case", "strength"], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "CI": "true"}, timeout=600)


def test_rms_norm_widened_to_atol_1_is_weak_naming_the_noise_that_passes(tmp_path):
    """Issue 29's Done-when: with `atol: 1.0` the rms-norm gate's strength item fails, WEAK, naming the wrong answer
    that passed (noise of 1% of the RMS, in each dtype, in the plain result and in the fused add's normed output)."""
    ran = _row_copy(tmp_path, "rms-norm", "compare: {policy: allclose}", "compare: {policy: allclose, rtol: 1.3e-6, atol: 1.0}")
    assert ran.returncode == 1, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "gate rms-norm: WEAK: noise of 1% of RMS in float32 passes allclose (rtol 1.3e-06, atol 1) on all " \
        in ran.stdout, ran.stdout[-3000:]
    assert "noise of 1% of RMS in float16 in the result[0] passes allclose (rtol 1.3e-06, atol 1) on all 2 cases" \
        in ran.stdout, ran.stdout[-3000:]


def test_rms_norm_float16_drawn_at_rtol_half_is_weak_naming_relative_noise(tmp_path):
    """The row's float16 gate (rtol 2e-3, argued) set to `rtol: 0.5`: its outputs cross zero, so RMS-scaled noise is
    still rejected where atol alone applies; the relative noise is not, and the strength item names it and the rtol."""
    ran = _row_copy(tmp_path, "rms-norm-float16-drawn", "compare: {policy: allclose, rtol: 2.0e-3, atol: 1.0e-5}",
                    "compare: {policy: allclose, rtol: 0.5, atol: 1.0e-5}")
    assert ran.returncode == 1, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "gate rms-norm-float16-drawn: WEAK: relative noise of 1% in float16 passes allclose (rtol 0.5, atol 1e-05) " \
        "on all 1 case and " in ran.stdout, ran.stdout[-3000:]
    assert "noise of 1% of RMS passes" not in ran.stdout and "float16: rejects relative noise from 0.5" in ran.stdout, \
        ran.stdout[-3000:]
