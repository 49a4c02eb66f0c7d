"""The reductions behind a verdict hold at every scale (docs/gate-files.md, `nmse`): NMSE's sums are taken as shares of
the largest magnitude, so a zero, constant or permuted answer fails, and the exact answer passes, wherever in
float64's range the values lie, subnormals included; checked against the exact NMSE in rational arithmetic. The RMS
and the mean the strength audit derives its wrong answers from are taken the same way."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _vllm_gates.values.policies import Policy
from _vllm_gates.values.tolerance import compare_under
from _vllm_gates.values.wrong_answers import MEAN, PERMUTED, ZEROS, rms, wrong_answer

pytestmark = pytest.mark.cpu

BOUND = 1e-6


def _exact_nmse(actual: np.ndarray, expected: np.ndarray) -> Fraction | None:
    """Σ(a-e)² / Σe² in exact rational arithmetic (None for an all-zero expectation)."""
    error = sum((Fraction(float(a)) - Fraction(float(e))) ** 2 for a, e in zip(actual.ravel(), expected.ravel()))
    energy = sum(Fraction(float(e)) ** 2 for e in expected.ravel())
    return error / energy if energy else None


@st.composite
def scaled(draw: st.DrawFn) -> np.ndarray:
    """A float64 array of 2..48 values of mixed signs at a binary exponent from the subnormals' (-1074) to the
    largest (1023), with at least two distinct values."""
    exponent = draw(st.integers(-1074, 1023))
    size = draw(st.integers(2, 48))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    base = np.random.Generator(np.random.PCG64(seed)).standard_normal(size) / 4  # |values| mostly under 1
    with np.errstate(over="ignore", under="ignore"):
        values = np.ldexp(base, exponent)
    values = np.where(np.isfinite(values), values, np.nextafter(np.inf, 0) * np.sign(values))
    finite = values[np.isfinite(values)]
    from hypothesis import assume

    assume(finite.size == values.size and len(set(finite.tolist())) >= 2)
    return values


@settings(max_examples=300, deadline=None)
@given(scaled())
def test_nmse_judges_zero_constant_and_permuted_answers_as_the_exact_arithmetic_does(expected):
    policy = Policy("nmse", max=BOUND)
    exact_pass = compare_under(policy, expected.copy(), expected)
    assert exact_pass.passed and exact_pass.arrays[0].used == 0.0
    for name in (ZEROS, MEAN, PERMUTED):
        wrong = wrong_answer(name, expected, policy, 0, 0.01)
        if wrong is None:
            continue  # equal to the expectation: no wrong answer
        truth = _exact_nmse(wrong, expected)
        found = compare_under(policy, wrong, expected)
        assert not found.problem, found.problem
        assert found.passed == (truth is not None and truth <= BOUND), (name, float(truth or 0), found)
        if not found.passed:
            measured = compare_under(policy, wrong, expected, describe=True).arrays[0].nmse
            assert math.isclose(measured, float(truth), rel_tol=1e-9), (name, measured, float(truth))


@settings(max_examples=200, deadline=None)
@given(scaled())
def test_the_rms_and_the_mean_hold_at_every_scale(expected):
    top = Fraction(float(np.max(np.abs(expected))))  # the exact mean square taken relative to it stays a normal float
    exact = float(top) * math.sqrt(sum((Fraction(float(v)) / top) ** 2 for v in expected) / expected.size)
    assert math.isclose(rms(expected), exact, rel_tol=1e-12)
    mean = wrong_answer(MEAN, expected, Policy("nmse", max=BOUND), 0, 0.01)
    if mean is not None:
        truth = float(sum(Fraction(float(v)) for v in expected) / expected.size)
        assert math.isclose(float(mean[0]), truth, rel_tol=1e-9, abs_tol=5e-324), (float(mean[0]), truth)


@pytest.mark.parametrize("scale", [5e-324, 1e-310, 1e-200, 1.0, 1e200, 1e307])
def test_a_zero_answer_fails_at_every_magnitude(scale):
    """Naive float64 sums of squares underflow to 0 below ~1e-162 and overflow to inf above ~1e154, where 0/0 or
    x/inf would read as a perfect match."""
    expected = np.array([1.0, -3.0, 2.0, 7.0]) * scale
    found = compare_under(Policy("nmse", max=0.5), np.zeros(4), expected)
    assert not found.passed and math.isclose(found.arrays[0].nmse, 1.0), found.arrays[0]
    assert compare_under(Policy("nmse", max=0.0), expected.copy(), expected).passed


def test_a_bound_of_zero_refuses_a_difference_too_small_for_float64_to_measure():
    expected = np.array([1e300, 1.0])
    actual = np.array([1e300, 1.0 + 2.0 ** -52])
    found = compare_under(Policy("nmse", max=0.0), actual, expected)
    assert not found.passed and "max 0" in found.arrays[0].why, found.arrays[0]
