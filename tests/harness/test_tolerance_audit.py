"""The strength audit of tolerances (issue 29 item 5): the wrong answers a too-wide tolerance lets through (zeros,
the expected mean, the last axis permuted, noise of a share of the RMS), WEAK naming the one that passed; the
smallest noise a gate rejects, by bisection; `strength:` read with file:line errors; an expectation no permutation
can change reported as unchecked, never as a pass; and all of it through `gates audit` and a run's JSON report.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _vllm_gates.values.policies import Policy
from _vllm_gates.values.tolerance_audit import (BISECTION_RATIO, NOISE_CEILING, NOISE_FLOOR, Sample, StrengthFinding,
                                                audit_tolerance, rejects, smallest_rejected)
from _vllm_gates.values.wrong_answers import MEAN, NOISE, PERMUTED, ZEROS, wrong_answer
from tests.harness.conftest import engine_env
from tests.harness.test_calls_ahead import _project as calls_ahead_project

pytestmark = pytest.mark.cpu

GATE_FILE = "gates/rows/example/gate.yaml"


def _normal(seed: int, shape: tuple[int, ...], loc: float = 0.0, scale: float = 1.0, dtype: str = "float32") -> np.ndarray:
    return (loc + scale * np.random.Generator(np.random.PCG64(seed)).standard_normal(shape)).astype(dtype)


def _cases(*expected: np.ndarray) -> list[Sample]:
    return [Sample(f"case 'c{n}'", "case", (e,)) for n, e in enumerate(expected)]


NOISE_1 = "noise of 1% of RMS"
REL_F32 = "relative noise of 1% in float32"  # the relative noise answer at the gate's strength (above 4x float32's rtol)


def _passed(finding: StrengthFinding) -> set[str]:
    return {answer.name for answer in finding.weak}


# ---- the wrong answers -------------------------------------------------------------------------------------------

def test_a_sane_tolerance_rejects_every_wrong_answer():
    samples = _cases(*(_normal(seed, (4, 64)) for seed in range(3)))
    finding = audit_tolerance(Policy("allclose"), samples, 0.01)
    assert finding.strong and not finding.weak and not finding.unchecked, finding
    assert [a.rejected_by for a in finding.answers] == ["case 'c0'"] * 5
    assert finding.summary().startswith("rejects all 5 wrong answers; float32: rejects relative noise from ")
    assert finding.smallest_rejected is not None and finding.smallest_rejected < 1e-4


def test_a_tolerance_that_lets_noise_through_is_weak_naming_it():
    """Values around 10, rtol 5%: noise of 1% of the RMS (about 0.1) and relative noise of 1% pass everywhere; the
    others do not."""
    samples = _cases(*(_normal(seed, (8, 32), loc=10.0) for seed in range(12)))
    finding = audit_tolerance(Policy("allclose", rtol=0.05, atol=1e-5), samples, 0.01)
    assert _passed(finding) == {"noise of 1% of RMS", REL_F32}
    assert finding.summary().startswith(
        "WEAK: noise of 1% of RMS passes allclose (rtol 0.05, atol 1e-05) on all 12 cases; relative noise of 1% in "
        "float32 passes allclose (rtol 0.05, atol 1e-05) on all 12 cases; float32: rejects relative noise from 0.05")


def test_a_declared_strength_sets_the_noise_level_and_is_named():
    samples = _cases(*(_normal(seed, (8, 32), loc=10.0) for seed in range(4)))
    finding = audit_tolerance(Policy("allclose", rtol=0.05, atol=1e-5), samples, 0.1)
    assert not finding.weak, "noise of 10% of the RMS (about 1) is over a 5% tolerance of values near 10"
    assert finding.answers[3].name == "noise of 10% of RMS" and finding.answers[3].rejected_by == "case 'c0'"


def test_a_tolerance_that_lets_the_mean_and_a_permutation_through_is_weak_naming_them():
    samples = _cases(*(_normal(seed, (4, 16), loc=10.0, scale=0.3) for seed in range(5)))
    finding = audit_tolerance(Policy("allclose", rtol=0.5, atol=0.0), samples, 0.01)
    assert _passed(finding) == {MEAN, PERMUTED, "noise of 1% of RMS", REL_F32}, "zeros are 100% off, the rest well under 50%"
    assert "the last axis permuted passes allclose (rtol 0.5, atol 0) on all 5 cases" in finding.summary()


def test_a_tolerance_wider_than_the_data_lets_everything_through():
    samples = _cases(*(_normal(seed, (3, 5)) for seed in range(2))) + [Sample("the generated example {'n': 3}", "example",
                                                                              (_normal(9, (2, 5)),))]
    finding = audit_tolerance(Policy("allclose", rtol=0.0, atol=100.0), samples, 0.01)
    assert _passed(finding) == {ZEROS, MEAN, PERMUTED, "noise of 1% of RMS", REL_F32}
    assert "zeros passes allclose (rtol 0, atol 100) on all 2 cases and 1 example" in finding.summary()
    assert finding.smallest_rejected is not None and finding.smallest_rejected > 10


def test_an_nmse_bound_that_lets_the_mean_through_is_weak():
    samples = _cases(*(_normal(seed, (64,), loc=10.0) for seed in range(3)))
    finding = audit_tolerance(Policy("nmse", max=0.5), samples, 0.01)
    assert MEAN in _passed(finding) and ZEROS not in _passed(finding)


def test_a_wrong_answer_is_compared_with_every_expected_result_of_the_case():
    """A case with `expect:` and an oracle: a wrong answer passes only if both let it through."""
    near = _normal(1, (4, 8), loc=10.0, scale=0.3)
    far = near + 100
    loose = Policy("allclose", rtol=0.5, atol=0.0)
    alone = audit_tolerance(loose, [Sample("case 'c'", "case", (near,))], 0.01)
    both = audit_tolerance(loose, [Sample("case 'c'", "case", (near, far))], 0.01)
    assert PERMUTED in _passed(alone) and not both.weak


def test_only_arrays_under_a_tolerance_are_replaced_the_rest_stays_exact():
    """An integer array beside the float one stays as expected: replacing it would fail any tolerance and hide a
    wide one."""
    expected = {"out": _normal(3, (4, 8)), "index": np.arange(8), "steps": 3}
    wrong = wrong_answer(ZEROS, expected, Policy("allclose"), 0, 0.01)
    assert wrong is not None and not wrong["out"].any()
    assert wrong["index"] is expected["index"] and wrong["steps"] == 3
    finding = audit_tolerance(Policy("allclose", rtol=0.0, atol=100.0), [Sample("case 'c'", "case", (expected,))], 0.01)
    assert f"{ZEROS} in the result['out']" in _passed(finding)


def test_each_output_is_made_wrong_by_itself_so_a_second_output_cannot_hide_a_wide_tolerance():
    """A fused RMSNorm's result is [normed (RMS ~1), new residual (RMS ~100)]: at atol 1 noise of 1% of the RMS is
    rejected in the residual but passes in the normed output, which the audit must name (issue 29 Done-when)."""
    expected = [_normal(1, (4, 64)), (100 * _normal(2, (4, 64))).astype(np.float32)]
    finding = audit_tolerance(Policy("allclose", rtol=1.3e-6, atol=1.0), [Sample("case 'c'", "case", (expected,))], 0.01)
    assert _passed(finding) == {f"{NOISE_1} in the result[0]", f"{REL_F32} in the result[0]"}, finding.summary()
    assert finding.summary().startswith(f"WEAK: {NOISE_1} in the result[0] passes allclose")
    whole = wrong_answer(NOISE, expected, Policy("allclose"), 0, 0.01)
    assert not (abs(whole[1] - expected[1]) <= 1.0).all(), "noise in both outputs at once is rejected by the residual"
    strict = audit_tolerance(Policy("allclose"), [Sample("case 'c'", "case", (expected,))], 0.01)
    assert strict.strong, strict.summary()


def test_the_permutation_moves_every_element_of_a_row_of_distinct_values():
    expected = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    permuted = wrong_answer(PERMUTED, expected, Policy("allclose"), 0, 0.01)
    assert permuted is not None and (permuted != expected).all()
    assert sorted(permuted[1, 2]) == sorted(expected[1, 2]), "each row keeps its own values, moved along the last axis"


def test_an_expectation_no_permutation_changes_is_reported_unchecked_never_a_pass():
    constant = np.full((4, 8), 3.0, dtype=np.float32)
    rows = np.repeat(np.arange(4, dtype=np.float32)[:, None], 8, axis=1)  # each row constant along the last axis
    assert wrong_answer(PERMUTED, rows, Policy("allclose"), 0, 0.01) is None
    assert wrong_answer(PERMUTED, np.array(2.5, dtype=np.float32), Policy("allclose"), 0, 0.01) is None, "0-d"
    finding = audit_tolerance(Policy("allclose"), _cases(constant, rows), 0.01)
    assert not finding.strong and not finding.weak
    assert [a.name for a in finding.unchecked] == [PERMUTED]
    permuted = finding.unchecked[0]
    assert permuted.derivable == 0 and permuted.rejected_by == ""
    assert finding.summary().startswith("UNCHECKED: the last axis permuted was checked nowhere: every expected array the "
                                        "tolerance applies to is constant along its last axis")
    all_constant = audit_tolerance(Policy("allclose"), _cases(constant), 0.01)
    assert {a.name for a in all_constant.unchecked} == {MEAN, PERMUTED}


def test_an_all_zero_expectation_has_no_zeros_or_noise_to_try():
    zero = np.zeros((2, 4), dtype=np.float32)
    assert wrong_answer(ZEROS, zero, Policy("allclose"), 0, 0.01) is None
    assert wrong_answer(NOISE, zero, Policy("allclose"), 0, 0.01) is None
    finding = audit_tolerance(Policy("allclose"), _cases(zero), 0.01)
    assert {a.name for a in finding.unchecked} == {ZEROS, MEAN, PERMUTED, "noise of 1% of RMS", REL_F32}
    assert finding.smallest_rejected is None and "no noise up to 1000x the RMS" in finding.summary()


def test_the_tokens_policy_audits_the_token_ids():
    ids = np.random.Generator(np.random.PCG64(4)).integers(0, 32000, (2, 16))
    expected = {"tokens": ids, "top2_margin": np.full((2, 16), 5.0)}
    tight = audit_tolerance(Policy("tokens", margin=0.1, max_excused=1), [Sample("case 'c'", "case", (expected,))], 0.01)
    assert tight.strong, tight
    ties = {"tokens": ids, "top2_margin": np.concatenate([np.full((2, 15), 0.01), np.full((2, 1), 5.0)], axis=1)}
    loose = audit_tolerance(Policy("tokens", margin=0.1, max_excused=40), [Sample("case 'c'", "case", (ties,))], 0.01)
    weak = " ".join(_passed(loose))
    assert PERMUTED not in weak and ZEROS not in weak, "the last position is never excused"


def test_the_tokens_policy_audits_the_logits_beside_the_ids_and_never_the_margins():
    """Under `tokens` the logits beside the ids are compared as allclose, so a too-wide atol on them is WEAK by
    itself, while exact ids would reject every wrong answer made in both at once."""
    ids = np.random.Generator(np.random.PCG64(4)).integers(0, 130, (32,))
    logits = _normal(5, (32, 130), scale=4.0)
    expected = {"tokens": ids, "logits": logits, "top2_margin": np.full((32,), 5.0)}
    sample = [Sample("case 'c'", "case", (expected,))]
    wide = audit_tolerance(Policy("tokens", margin=1e-4, max_excused=0, rtol=1.3e-6, atol=0.5), sample, 0.01)
    assert _passed(wide) == {f"{NOISE_1} in the result['logits']", f"{REL_F32} in the result['logits']"}, wide.summary()
    tight = audit_tolerance(Policy("tokens", margin=1e-4, max_excused=0, rtol=1.3e-6, atol=5e-5), sample, 0.01)
    assert tight.strong, tight.summary()
    margins_left = wrong_answer(ZEROS, expected, Policy("tokens", margin=1e-4, max_excused=0), 0, 0.01)
    assert margins_left["top2_margin"] is expected["top2_margin"]


# ---- the smallest noise rejected ---------------------------------------------------------------------------------

def _analytic(expected: np.ndarray, rtol: float, atol: float, number: int = 0) -> float:
    """For allclose, noise of level L moves element i by L × d_i (d: the sample's noise at level 1): it is first
    rejected at min_i (atol + rtol |e_i|) / |d_i|."""
    unit = wrong_answer(NOISE, expected, Policy("allclose", rtol=rtol, atol=atol), number, 1.0) - expected
    return float(np.min((atol + rtol * np.abs(expected)) / np.abs(unit)))


@pytest.mark.parametrize("rtol, atol", [(0.0, 1e-3), (1e-4, 1e-6), (0.05, 0.0), (0.02, 0.5)])
def test_the_smallest_noise_rejected_is_the_analytic_value_for_allclose(rtol, atol):
    expected = _normal(11, (6, 50), loc=2.0, dtype="float64")
    found = smallest_rejected(Policy("allclose", rtol=rtol, atol=atol), _cases(expected))
    exact = _analytic(expected, rtol, atol)
    assert found is not None and exact <= found <= exact * BISECTION_RATIO * (1 + 1e-9), (found, exact)


def test_the_smallest_noise_rejected_is_the_least_over_samples():
    samples = _cases(*(_normal(seed, (40,), loc=3.0, dtype="float64") for seed in range(6)))
    each = [_analytic(sample.references[0], 0.01, 0.0, number) for number, sample in enumerate(samples)]
    found = smallest_rejected(Policy("allclose", rtol=0.01, atol=0.0), samples)
    assert len(set(each)) == 6 and found is not None and min(each) <= found <= min(each) * BISECTION_RATIO * (1 + 1e-9)


def test_rejection_grows_with_the_noise_and_the_figure_with_the_tolerance():
    expected = _normal(5, (8, 32))
    sample = _cases(expected)[0]
    policy = Policy("allclose", rtol=1e-3, atol=1e-5)
    levels = np.geomspace(NOISE_FLOOR, NOISE_CEILING, 60)
    verdicts = [rejects(policy, sample, 0, float(level)) for level in levels]
    assert verdicts == sorted(verdicts) and verdicts[0] is False and verdicts[-1] is True, "once rejected, rejected above"
    figures = [smallest_rejected(Policy("allclose", rtol=0.0, atol=atol), [sample]) for atol in (1e-6, 1e-4, 1e-2, 1.0)]
    assert all(a is not None for a in figures) and figures == sorted(figures) and len(set(figures)) == 4, figures


def test_a_gate_that_rejects_no_noise_says_so():
    finding = audit_tolerance(Policy("allclose", rtol=0.0, atol=1e9), _cases(_normal(1, (8,))), 0.01)
    assert finding.smallest_rejected is None and finding.figures[0].relative is None
    assert finding.noise_figure() == ("float32: rejects no relative noise up to 1000x each element, no noise up to "
                                      "1000x the RMS")


def test_a_finding_round_trips_as_plain_data():
    finding = audit_tolerance(Policy("allclose", rtol=0.05, atol=1e-5), _cases(_normal(1, (8, 32), loc=10.0)), 0.01)
    data = json.loads(json.dumps(finding.to_data()))
    assert StrengthFinding.from_data(data) == finding


# ---- `strength:` in the gate file --------------------------------------------------------------------------------

BAD_STRENGTHS = [
    ("zero", "compare: {policy: allclose}\n    strength: 0", "strength: 0", "got int 0"),
    ("over-one", "compare: {policy: allclose}\n    strength: 2", "strength: 2", "a number in (0, 1] such as 0.01 for 1%"),
    ("text", "compare: {policy: allclose}\n    strength: 1%", "strength: 1%", "got str '1%' (YAML reads it as text"),
    ("negative", "compare: {policy: nmse, max: 1.0e-3}\n    strength: -0.01", "strength: -0.01", "got float -0.01"),
    ("nan", "compare: {policy: allclose}\n    strength: .nan", "strength: .nan", "got float nan"),
    ("bool", "compare: {policy: allclose}\n    strength: true", "strength: true", "got boolean True"),
    ("no-policy", "strength: 0.01", "strength: 0.01", "but the gate has no `compare:` policy: no tolerance to audit"),
    ("exact-policy", "compare: {policy: exact}\n    strength: 0.01", "strength: 0.01",
     "but the gate has `compare: {policy: exact}`: no tolerance to audit"),
]


@pytest.mark.parametrize("written, needle, says", [case[1:] for case in BAD_STRENGTHS], ids=[case[0] for case in BAD_STRENGTHS])
def test_a_bad_strength_is_a_definition_error_at_its_line(example, written, needle, says):
    example.edit("    oracle: example_row.oracle:counted_page_bytes\n",
                 f"    oracle: example_row.oracle:counted_page_bytes\n    {written}\n")
    result = example.gates("list")
    assert result.code == 3, result.text
    assert f"{GATE_FILE}:{example.line(needle)}:" in result.err and "gates[0].strength" in result.err, result.err
    assert says in result.err, result.err


def test_a_strength_loads_and_the_schema_takes_it(example):
    import jsonschema

    from _vllm_gates.definitions.gatefile import load_gate_file
    from _vllm_gates.values import value_agreement

    example.edit("    oracle: example_row.oracle:counted_page_bytes\n",
                 "    oracle: example_row.oracle:counted_page_bytes\n    compare: {policy: allclose}\n    strength: 0.001\n")
    gate = load_gate_file(example.root / GATE_FILE, example.root, None, ("cpu",)).gates[0]
    assert gate.strength == 0.001
    schema = json.loads((Path(value_agreement.__file__).parents[1] / "definitions" / "schema" / "gate-file.schema.json").read_text())
    strength = schema["properties"]["gates"]["items"]["properties"]["strength"]
    jsonschema.validate(0.001, strength)
    for bad in (0, 2, "1%", True):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, strength)


# ---- through a run and `gates audit` -----------------------------------------------------------------------------

IMPL = '''import numpy as np


def ramp(n, rows=2):
    """rows x n float32 values around 10 (rows each differ)."""
    return (10 + np.sin(np.arange(rows * n, dtype=np.float64)).reshape(rows, n)).astype(np.float32)


def ramp_off(n, rows=2):
    return ramp(n, rows) + np.float32(5.0)
'''
ORACLE = '''import numpy as np


def ramp(n, rows=2):
    return (10 + np.sin(np.arange(rows * n, dtype=np.float64)).reshape(rows, n)).astype(np.float32)
'''
STRATEGY = '''from hypothesis import strategies as st


def sizes():
    return st.fixed_dictionaries({"n": st.integers(2, 40)})
'''
GATE = """row: R-0
title: row
spec: spec/s.md
gates:
  - id: g
    impl: pkg.impl:ramp
    oracle: pkg.oracle:ramp
    compare: {compare}
    milestone: M1
    covers: [S-1.1]
    markers: [cpu]
    cases:
      seven: {{input: {{n: 7}}}}
      hundred: {{input: {{n: 100}}}}
    properties:
      strategy: pkg.strategy:sizes
      max_examples: 10
    known_bad:
      off-by-five: pkg.impl:ramp_off
"""


def _project(root: Path, compare: str) -> Path:
    root.mkdir(exist_ok=True)
    calls_ahead_project(root)
    (root / "pkg" / "impl.py").write_text(IMPL)
    (root / "pkg" / "oracle.py").write_text(ORACLE)
    (root / "pkg" / "strategy.py").write_text(STRATEGY)
    (root / "gates" / "rows" / "r0" / "gate.yaml").write_text(GATE.format(compare=compare))
    return root


def _gates(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `gates` command installed beside this Python, run in the project ``root``."""
    return subprocess.run([str(Path(sys.executable).parent / "gates"), *args], cwd=root, env=engine_env(),
                          capture_output=True, text=True, timeout=300)


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *args], cwd=root,
                          env=engine_env(), capture_output=True, text=True, timeout=300)


def test_gates_audit_shows_a_sane_tolerance_strong_and_a_wide_one_weak(tmp_path):
    """Widening the tolerance of a gate that passes makes `gates audit` exit 1 naming the wrong answer that passed,
    while the gate itself still passes its cases and known-bad."""
    sane = _project(tmp_path / "sane", "{policy: allclose}")
    ran = _gates(sane, "audit")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "tolerance" in ran.stdout and "rejects all 5 wrong answers; float32: rejects relative noise from " in ran.stdout, ran.stdout

    wide = _project(tmp_path / "wide", "{policy: allclose, rtol: 0.25, atol: 0.0}")
    ran = _gates(wide, "audit")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ("R-0::g tolerance: WEAK: the expected mean passes allclose (rtol 0.25, atol 0) on all 2 cases and 10 "
            "examples") in ran.stdout, ran.stdout
    assert "the last axis permuted passes" in ran.stdout and "zeros passes" not in ran.stdout, ran.stdout


def test_a_run_records_the_strength_audit_in_its_json_and_fails_a_weak_gate(tmp_path):
    root = _project(tmp_path, "{policy: allclose, rtol: 0.25, atol: 0.0}")
    (root / "out").mkdir()
    ran = _pytest(root, "--gates-json=out/run.json")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "FAILED gates/rows/r0/gate.yaml::g::strength" in ran.stdout, ran.stdout
    assert "gates/rows/r0/gate.yaml:5: gate g: WEAK: the expected mean passes" in ran.stdout, ran.stdout
    report = json.loads((root / "out" / "run.json").read_text())
    item = next(i for i in report["items"] if i["name"] == "strength")
    finding = StrengthFinding.from_data(item["strength"])
    assert item["kind"] == "strength" and item["outcome"] == "failed"
    assert finding.cases == 2 and finding.examples == 10 and finding.level == 0.01
    assert {a.name for a in finding.weak} == {MEAN, PERMUTED, "noise of 1% of RMS", REL_F32}
    assert finding.smallest_rejected is not None and 0.05 < finding.smallest_rejected < 0.5


def test_gates_audit_reuses_a_runs_strength_audit_from_evidence(tmp_path):
    root = _project(tmp_path, "{policy: allclose}\n    strength: 0.001")
    (root / "out").mkdir()
    ran = _pytest(root, "--gates-json=out/run.json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    audit = _gates(root, "audit", "--evidence", "out/run.json")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "from evidence (out/run.json): 1 gate(s) audited there" in audit.stdout, audit.stdout
    assert "rejects all 5 wrong answers; float32: rejects relative noise from" in audit.stdout and "no usable evidence" not in audit.stdout, audit.stdout
