"""The strength audit measures both terms of a tolerance (docs/gate-files.md, "The strength audit of a tolerance"):
relative noise e·(1 ± ρ) beside the RMS-scaled noise, per dtype, so that a loose rtol shows even where outputs cross
zero and atol alone rejects RMS-scaled noise; its figures per dtype (relative and absolute, ulp in units, nmse in
relative L2); the note on `equal_nan: true` that nothing tests; and the activation experiment through `gates audit`.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from _vllm_gates.base.errors import DefinitionError
from _vllm_gates.values.policies import ALLCLOSE_DEFAULTS, PerDtype, Policy
from _vllm_gates.values.tolerance_audit import (BISECTION_RATIO, RELATIVE_FACTOR, Sample, StrengthFinding, audit_tolerance,
                                                relative_level, smallest_rejected)
from _vllm_gates.values.wrong_answers import RELATIVE, wrong_answer
from tests.harness.test_tolerance_audit import _gates, _project

pytestmark = pytest.mark.cpu

REPO = Path(__file__).resolve().parents[2]


def _normal(seed: int, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return scale * np.random.Generator(np.random.PCG64(seed)).standard_normal(shape)


def _silu_mul(x: np.ndarray) -> np.ndarray:
    """The activation silu(x[..., :d]) * x[..., d:] in float64, rounded once to x's dtype: outputs that cross zero."""
    wide = x.astype(np.float64)
    d = wide.shape[-1] // 2
    gate, up = wide[..., :d], wide[..., d:]
    return (gate / (1 + np.exp(-gate)) * up).astype(x.dtype)


def _activation_samples(dtype: str = "float16", count: int = 6) -> list[Sample]:
    return [Sample(f"case 'c{seed}'", "case", (_silu_mul(_normal(seed, (4, 128)).astype(dtype)),)) for seed in range(count)]


def _names(finding: StrengthFinding) -> set[str]:
    return {answer.name for answer in finding.weak}


# ---- relative noise: the rtol term ---------------------------------------------------------------------------------

def test_an_activation_crossing_zero_is_strong_at_the_defaults_and_weak_at_rtol_half():
    """The experiment: at rtol 0.5 the RMS-scaled noise is still rejected (by the elements near zero, where atol alone
    applies), so only the relative noise shows the rtol 500x the float16 default, naming it."""
    samples = _activation_samples()
    assert all((s.references[0] < 0).any() and (s.references[0] > 0).any() for s in samples), "outputs cross zero"
    defaults = audit_tolerance(Policy("allclose"), samples, 0.01)
    assert defaults.strong, defaults.summary()
    loose = audit_tolerance(Policy("allclose", rtol=0.5, atol=1e-5), samples, 0.01)
    assert _names(loose) == {"relative noise of 1% in float16"}, loose.summary()
    assert loose.summary().startswith("WEAK: relative noise of 1% in float16 passes allclose (rtol 0.5, atol 1e-05) "
                                      "on all 6 cases"), loose.summary()
    noise = next(a for a in loose.answers if a.name == "noise of 1% of RMS")
    assert noise.rejected_by, "the RMS-scaled noise alone would have called this gate strong"
    figure = loose.figures[0]
    assert figure.dtype == "float16" and 0.5 <= figure.relative <= 0.5 * 1.05, figure
    assert figure.absolute is not None and figure.absolute < 1e-3, "the absolute figure tracks atol, not rtol"


def test_a_per_dtype_rtol_wide_on_float16_alone_is_weak_in_float16_alone():
    """A float32 case rejecting relative noise does not hide a float16 rtol that lets it through: each wrong answer
    must be rejected in each dtype, and the report names the dtype and its tolerance."""
    samples = _activation_samples("float16", 3) + [Sample("case 'f32'", "case", (_silu_mul(_normal(9, (4, 128)).astype("float32")),))]
    rtol = PerDtype((("float16", 0.5),), "gates[0].compare.rtol")
    atol = PerDtype((("float16", 1e-5),), "gates[0].compare.atol")
    finding = audit_tolerance(Policy("allclose", rtol=rtol, atol=atol), samples, 0.01)
    assert _names(finding) == {"relative noise of 1% in float16"}, finding.summary()
    assert "passes allclose (float16: rtol 0.5, atol 1e-05) on all 3 cases" in finding.summary()
    assert [f.dtype for f in finding.figures] == ["float16", "float32"]
    assert finding.figures[1].relative < 1e-5, "float32 keeps its default"


@pytest.mark.parametrize("rtol, atol", [(1e-3, 1e-5), (0.05, 0.0), (2e-3, 1e-2)])
def test_the_smallest_relative_noise_rejected_is_the_analytic_value(rtol, atol):
    """Relative noise ρ moves every element e by ρ|e| (float64: exactly enough), so allclose first rejects it at
    min over elements of (atol + rtol |e|) / |e| = rtol + atol / max |e|."""
    expected = _normal(3, (5, 40), scale=3.0)
    found = smallest_rejected(Policy("allclose", rtol=rtol, atol=atol), [Sample("case 'c'", "case", (expected,))],
                              RELATIVE, "float64")
    exact = rtol + atol / float(np.max(np.abs(expected)))
    assert found is not None and exact <= found * (1 + 1e-9) and found <= exact * BISECTION_RATIO * (1 + 1e-9), (found, exact)


def test_nmse_is_audited_in_relative_l2():
    """Relative noise ρ has NMSE ρ² exactly: the figure is the square root of the bound, and a bound over the
    required level's square is WEAK."""
    sample = [Sample("case 'c'", "case", (_normal(4, (8, 64)),))]
    found = smallest_rejected(Policy("nmse", max=1e-4), sample, RELATIVE, "float64")
    assert found is not None and 1e-2 <= found <= 1e-2 * BISECTION_RATIO * (1 + 1e-9), found
    assert audit_tolerance(Policy("nmse", max=1e-5), sample, 0.01).strong
    weak = audit_tolerance(Policy("nmse", max=0.02), sample, 0.01)
    assert "relative noise of 1% in float64" in _names(weak), weak.summary()
    assert math.sqrt(0.02) <= weak.figures[0].relative <= math.sqrt(0.02) * BISECTION_RATIO * (1 + 1e-9)
    assert f"float64: rejects relative noise from {weak.figures[0].relative:.3g} (relative L2)" in weak.summary()


def test_ulp_is_audited_in_units_in_the_last_place():
    """Under `ulp` the relative noise moves each element by whole units: the smallest rejected is max + 1, exactly;
    the required level is the relative one over the dtype's spacing."""
    expected = _normal(5, (6, 32)).astype(np.float32)
    sample = [Sample("case 'c'", "case", (expected,))]
    assert smallest_rejected(Policy("ulp", max=7), sample, RELATIVE, "float32") == 8.0
    moved = wrong_answer(RELATIVE, expected, Policy("ulp", max=7), 0, 8.0)
    from _vllm_gates.values.tolerance import _ulps
    assert (_ulps(moved, expected) == 8).all()
    required = relative_level(Policy("ulp", max=0), "float16", 0.01)
    assert required == math.ceil(0.01 / 2.0 ** -10)
    assert audit_tolerance(Policy("ulp", max=2), sample, 0.01).strong
    weak = audit_tolerance(Policy("ulp", max=10 ** 6), sample, 0.01)
    assert f"relative noise of {relative_level(Policy('ulp', max=0), 'float32', 0.01):.0f} units in the last place in float32" \
        in _names(weak), weak.summary()
    assert "rejects relative noise from 1000001 units in the last place" in weak.summary()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_every_dtype_at_its_defaults_is_strong_where_outputs_cross_zero(dtype):
    """The required relative level (RELATIVE_FACTOR x the default rtol, at least 1%) is over what the default lets
    through, after the rounding to the dtype."""
    samples = _activation_samples(dtype, 3)
    finding = audit_tolerance(Policy("allclose"), samples, 0.01)
    assert finding.strong, finding.summary()
    assert relative_level(Policy("allclose"), dtype, 0.01) == max(0.01, RELATIVE_FACTOR * ALLCLOSE_DEFAULTS[dtype][0])
    assert finding.figures[0].relative <= relative_level(Policy("allclose"), dtype, 0.01)


def test_relative_noise_leaves_zeros_and_integer_arrays_as_they_are():
    expected = {"ids": np.arange(6), "out": np.array([0.0, 1.0, -2.0, 0.0], dtype=np.float32)}
    wrong = wrong_answer(RELATIVE, expected, Policy("allclose"), 0, 0.25)
    assert wrong["ids"] is expected["ids"]
    assert wrong["out"][0] == 0 and wrong["out"][3] == 0
    assert np.allclose(np.abs(wrong["out"][1:3] / expected["out"][1:3] - 1), 0.25)
    assert wrong_answer(RELATIVE, np.zeros(4), Policy("allclose"), 0, 0.25) is None


def test_the_figures_and_notes_round_trip_as_plain_data():
    finding = audit_tolerance(Policy("allclose", rtol=0.5, atol=1e-5, equal_nan=True), _activation_samples(count=2), 0.01)
    data = json.loads(json.dumps(finding.to_data()))
    assert StrengthFinding.from_data(data) == finding
    assert data["figures"][0]["dtype"] == "float16" and data["figures"][0]["relative"] >= 0.5
    assert data["notes"] and data["unit"] == "share"


def test_bfloat16_relative_noise_is_rounded_to_the_dtype():
    expected = np.array([1.0, 3.0, -7.0, 0.5], dtype=ml_dtypes.bfloat16)
    wrong = wrong_answer(RELATIVE, expected, Policy("allclose"), 0, 0.064)
    assert wrong.dtype == expected.dtype and (wrong != expected).all()


# ---- equal_nan with nothing to test ---------------------------------------------------------------------------------

def test_equal_nan_on_results_without_nan_is_noted_never_failed():
    samples = _activation_samples(count=2)
    finding = audit_tolerance(Policy("allclose", equal_nan=True), samples, 0.01)
    assert finding.strong and len(finding.notes) == 1
    assert finding.summary().endswith("; note: equal_nan: true, but none of the 2 expected results (cases' and "
                                      "oracle's) holds a NaN where the policy compares: the option is untested here")
    with_nan = samples[0].references[0].copy()
    with_nan[0, 0] = np.nan
    tested = audit_tolerance(Policy("allclose", equal_nan=True), [Sample("case 'n'", "case", (with_nan,))] + samples, 0.01)
    assert tested.notes == ()
    assert audit_tolerance(Policy("allclose"), samples, 0.01).notes == (), "no option, no note"


# ---- per-dtype tolerances against the outputs' dtypes ---------------------------------------------------------------

def test_a_per_dtype_tolerance_for_a_dtype_no_output_has_is_a_definition_error():
    from _vllm_gates.base.errors import Location

    where = Location("gates/rows/r/gate.yaml", 12, 20)
    rtol = PerDtype((("float16", 2e-3), ("float64", 1e-9)), "gates[0].compare.rtol", (where, where))
    atol = PerDtype((("float16", 1e-5), ("float64", 1e-12)), "gates[0].compare.atol", (where, where))
    with pytest.raises(DefinitionError) as raised:
        audit_tolerance(Policy("allclose", rtol=rtol, atol=atol), _activation_samples(count=2), 0.01)
    text = str(raised.value)
    assert "gates/rows/r/gate.yaml:12:20: gates[0].compare.rtol.float64: the gate's outputs never have dtype float64" in text
    assert "gates[0].compare.atol.float64" in text and "hold float16" in text


def test_a_per_dtype_max_missing_a_dtype_of_the_outputs_is_a_definition_error():
    from _vllm_gates.base.errors import Location

    bound = PerDtype((("float16", 1e-5),), "gates[0].compare.max", (None,), Location("g.yaml", 7, 5))
    samples = _activation_samples(count=1) + [Sample("case 'f32'", "case", (_normal(1, (4, 8)).astype(np.float32),))]
    with pytest.raises(DefinitionError) as raised:
        audit_tolerance(Policy("nmse", max=bound), samples, 0.01)
    assert "g.yaml:7:5: gates[0].compare.max: names no bound for float32, a dtype of the gate's outputs (case 'f32')" \
        in str(raised.value)


# ---- through `gates audit`: the activation row, and this repository's rms-norm-float16-drawn ---------------------------

ACTIVATION_IMPL = '''import numpy as np


def silu_and_mul(x):
    """silu(x[..., :d]) * x[..., d:], computed in float32 and rounded once to x's dtype (a fused kernel's way)."""
    wide = np.asarray(x, dtype=np.float32)
    d = wide.shape[-1] // 2
    gate, up = wide[..., :d], wide[..., d:]
    return (gate / (np.float32(1) + np.exp(-gate)) * up).astype(x.dtype)


def halves_swapped(x):
    d = x.shape[-1] // 2
    return silu_and_mul(np.concatenate([x[..., d:], x[..., :d]], axis=-1))
'''
ACTIVATION_ORACLE = '''import numpy as np


def silu_and_mul(x):
    wide = np.asarray(x, dtype=np.float64)
    d = wide.shape[-1] // 2
    gate, up = wide[..., :d], wide[..., d:]
    return (gate / (1 + np.exp(-gate)) * up).astype(x.dtype)
'''
ACTIVATION_GATE = """row: R-0
title: row
spec: spec/s.md
gates:
  - id: silu-and-mul-float16
    impl: pkg.impl:silu_and_mul
    oracle: pkg.oracle:silu_and_mul
    compare: {compare}
    milestone: M1
    covers: [S-1.1]
    markers: [cpu]
    cases:
      hidden-256:
        input:
          x: {{tensor: {{randn: {{shape: [4, 512], dtype: float16, seed: 1}}}}}}
      hidden-64-x4:
        input:
          x: {{tensor: {{randn: {{shape: [8, 128], dtype: float16, seed: 2, scale: 4.0}}}}}}
    known_bad:
      halves-swapped: pkg.impl:halves_swapped
"""


def _activation_project(root: Path, compare: str) -> Path:
    _project(root, "{policy: allclose}")
    (root / "pkg" / "impl.py").write_text(ACTIVATION_IMPL)
    (root / "pkg" / "oracle.py").write_text(ACTIVATION_ORACLE)
    (root / "gates" / "rows" / "r0" / "gate.yaml").write_text(ACTIVATION_GATE.format(compare=compare))
    return root


def test_gates_audit_finds_the_activation_rows_loose_rtol(tmp_path):
    """The issue's experiment, as a new porting team would meet it: the float16 activation gate at `rtol: 0.5` passes
    its cases and rejects its known-bad, yet `gates audit` exits 1 naming relative noise and the rtol; at the
    defaults it exits 0."""
    strict = _activation_project(tmp_path / "defaults", "{policy: allclose}")
    ran = _gates(strict, "audit")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "rejects all 5 wrong answers; float16: rejects relative noise from " in ran.stdout, ran.stdout

    loose = _activation_project(tmp_path / "loose", "{policy: allclose, rtol: 0.5, atol: 1.0e-5}")
    ran = _gates(loose, "audit")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ("R-0::silu-and-mul-float16 tolerance: WEAK: relative noise of 1% in float16 passes allclose (rtol 0.5, "
            "atol 1e-05) on all 2 cases") in ran.stdout, ran.stdout
    assert "noise of 1% of RMS passes" not in ran.stdout, "the RMS-scaled noise is rejected near zero: not the finding"
    assert "1/1 rejected" in ran.stdout, "the known-bad does not show it"


def _repository_gate(gate_file: str, gate_id: str, oracle: str) -> tuple[Any, Any]:
    """A gate of this repository's rows as written, and its oracle's function (imported from the repository)."""
    import importlib
    import sys

    from _vllm_gates.definitions.gatefile import load_gate_file

    sys.path.insert(0, str(REPO))
    try:
        module, _, name = oracle.partition(":")
        function = getattr(importlib.import_module(module), name)
        loaded = load_gate_file(REPO / gate_file, REPO, None, ("cpu", "gpu", "dist", "upstream"), parity_marker="upstream")
    finally:
        sys.path.remove(str(REPO))
    return next(g for g in loaded.gates if g.id == gate_id), function


def _rms_norm_float16_drawn() -> tuple[Policy, list[Sample]]:
    """This repository's gate rms-norm-float16-drawn: its policy as written and the float64 oracle's outcomes on its
    case and on float16 inputs drawn as its strategy draws them (shapes, fused or not, values ~1 and ~10)."""
    gate, rms_norm = _repository_gate("gates/rows/layers_norm_rope/gate.yaml", "rms-norm-float16-drawn",
                                      "oracles.norm_rope:rms_norm")
    samples = [Sample(f"case {case.name!r}", "case", (rms_norm(case.input["x"], case.input["weight"], case.input["eps"],
                                                               residual=case.input["residual"]),)) for case in gate.cases]
    for seed, (rows, hidden, scale, fused) in enumerate([(2, 64, 1.0, False), (3, 256, 10.0, True), (1, 1024, 1.0, True)]):
        x = _normal(100 + seed, (rows, hidden), scale).astype(np.float16)
        weight = (1 + 0.1 * _normal(200 + seed, (hidden,))).astype(np.float16)
        residual = _normal(300 + seed, (rows, hidden), scale).astype(np.float16) if fused else None
        samples.append(Sample(f"the generated example {seed}", "example", (rms_norm(x, weight, 1e-6, residual=residual),)))
    return gate.policy, samples


def test_this_repositorys_rms_norm_float16_drawn_is_strong_as_written_and_weak_at_rtol_half():
    policy, samples = _rms_norm_float16_drawn()
    assert policy == Policy("allclose", rtol=2e-3, atol=1e-5)
    as_written = audit_tolerance(policy, samples, 0.01)
    assert as_written.strong, as_written.summary()
    loose = audit_tolerance(Policy("allclose", rtol=0.5, atol=1e-5), samples, 0.01)
    assert not loose.strong
    assert loose.summary().startswith("WEAK: relative noise of 1% in float16 passes allclose (rtol 0.5, atol 1e-05)"), \
        loose.summary()
    assert all("relative noise" in answer.name for answer in loose.weak), loose.summary()


def test_the_cuda_bfloat16_decode_gate_is_strong_at_its_declared_strength_on_its_oracles_logits():
    """model-greedy-cuda-bfloat16 runs only where CUDA is, but its audit needs only the float64 oracle: its logits
    (float32, largest 12.05) judged at atol 0.5 let relative noise of 5% through (0.6 nats at the largest), which the
    gate's description argues; at its declared strength 0.1 it is strong."""
    gate, greedy_reference = _repository_gate("gates/rows/backend_distributed_tp/gate.yaml", "model-greedy-cuda-bfloat16",
                                              "oracles.qwen3_reference:greedy_reference")
    samples = [Sample(f"case {case.name!r}", "case", (greedy_reference(**case.input),))
               for case in gate.cases if case.raises is None]
    assert gate.strength == 0.1
    declared = audit_tolerance(gate.policy, samples, gate.strength)
    assert declared.strong, declared.summary()
    half = audit_tolerance(gate.policy, samples, 0.05)
    assert _names(half) == {"relative noise of 5% in float32 in the result['logits']"}, half.summary()


def test_a_per_dtype_tolerance_through_gates_audit(tmp_path):
    """`rtol: {float16: ...}` judges the float16 gate and the audit finds it strong; naming float64, which no output
    of the gate has, is the strength item's definition error at the mapping's line, naming the key and the dtype."""
    good = _activation_project(tmp_path / "good", "{policy: allclose, rtol: {float16: 2.0e-3}, atol: {float16: 1.0e-5}}")
    ran = _gates(good, "audit")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "rejects all 5 wrong answers; float16: rejects relative noise from " in ran.stdout, ran.stdout

    stray = _activation_project(tmp_path / "stray", "{policy: allclose, rtol: {float16: 2.0e-3, float64: 1.0e-9}, "
                                                    "atol: {float16: 1.0e-5, float64: 1.0e-12}}")
    ran = _gates(stray, "audit")
    assert ran.returncode == 3, ran.stdout + ran.stderr  # an ERROR, not a WEAK gate
    assert ("gates/rows/r0/gate.yaml:8:" in ran.stdout and "gates[0].compare.rtol.float64: the gate's outputs never have "
            "dtype float64") in ran.stdout, ran.stdout
