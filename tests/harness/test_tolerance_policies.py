"""Comparison policies on arrays in results (issue 29 item 3): each policy's pass and fail edges, the allclose
defaults against torch.testing.assert_close on the same data, the Numbers rule (zeros, a constant equal to the mean
and a permuted last axis all fail; zero elements compared is never a pass), dtype and shape mismatches named, NaN
with and without equal_nan, bfloat16 through ml_dtypes, and the memory a huge comparison holds."""
from __future__ import annotations

import math
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
import torch

from _vllm_gates.values.policies import ALLCLOSE_DEFAULTS, Policy
from _vllm_gates.values.tolerance import compare_under

pytestmark = pytest.mark.cpu

FLOATS = ("float16", "bfloat16", "float32", "float64")
NP_DTYPE = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}
TORCH_DTYPE = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor as the read-only array the judge decodes (bfloat16 bit for bit through an int16 view)."""
    if tensor.dtype == torch.bfloat16:
        array = tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    else:
        array = tensor.numpy()
    array = array.copy()
    array.flags.writeable = False
    return array


def verdict(policy: Policy, actual, expected) -> bool:
    found = compare_under(policy, actual, expected)
    assert not found.problem, found.problem
    return found.passed


# ---- allclose: torch.testing.assert_close's defaults, on the same data ----------------------------------------------

def test_the_defaults_are_torchs():
    assert ALLCLOSE_DEFAULTS == {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                                 "float64": (1e-7, 1e-7)}


def _torch_passes(actual: torch.Tensor, expected: torch.Tensor, **tols) -> bool:
    try:
        torch.testing.assert_close(actual, expected, **tols)
        return True
    except AssertionError:
        return False


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("explicit", [False, True], ids=["defaults", "rtol-atol"])
def test_allclose_agrees_with_assert_close_row_by_row(dtype, explicit):
    """200 rows perturbed around the tolerance's edge (relative steps from 0.1x to 10x of rtol, absolute near
    atol, zeros, infinities): each row passes here exactly when torch.testing.assert_close passes it."""
    generator = torch.Generator().manual_seed(29)
    rtol, atol = (2e-2, 3e-3) if explicit else ALLCLOSE_DEFAULTS[dtype]
    expected = (torch.randn(200, 8, generator=generator, dtype=torch.float64) * 3).to(TORCH_DTYPE[dtype])
    expected[5, :] = 0.0
    expected[6, 0] = math.inf
    factors = torch.logspace(-1, 1, 200, dtype=torch.float64)[:, None]
    noise = torch.randn(200, 8, generator=generator, dtype=torch.float64).sign()
    wide = expected.to(torch.float64)
    actual = (wide + noise * factors * (rtol * wide.abs() + atol)).to(TORCH_DTYPE[dtype])
    actual[6, 0] = math.inf
    policy = Policy("allclose", rtol, atol) if explicit else Policy("allclose")
    tols = {"rtol": rtol, "atol": atol} if explicit else {}
    ours = [verdict(policy, as_numpy(actual[i]), as_numpy(expected[i])) for i in range(200)]
    theirs = [_torch_passes(actual[i], expected[i], **tols) for i in range(200)]
    assert ours == theirs
    assert 20 < sum(ours) < 180, "the rows straddle the edge: some pass, some fail"


def test_allclose_edge_in_float64():
    expected = np.linspace(-4, 4, 101)
    allowed = 1e-6 + 1e-3 * np.abs(expected)
    policy = Policy("allclose", 1e-3, 1e-6)
    assert verdict(policy, expected + allowed * (1 - 1e-9), expected)
    assert verdict(policy, expected - allowed * (1 - 1e-9), expected)
    worse = expected.copy()
    worse[50] += allowed[50] * (1 + 1e-6)
    assert not verdict(policy, worse, expected)


def test_allclose_compares_integer_and_bool_arrays_exactly():
    ints = np.array([1, 2, 3], dtype=np.int32)
    assert verdict(Policy("allclose", 1.0, 10.0), ints.copy(), ints)
    assert not verdict(Policy("allclose", 1.0, 10.0), ints + np.array([0, 0, 1], dtype=np.int32), ints)
    assert not verdict(Policy("allclose"), np.array([True, False]), np.array([True, True]))


# ---- nmse, ulp, exact: edges --------------------------------------------------------------------------------------

def test_nmse_edge():
    expected = np.random.default_rng(1).standard_normal(4096)
    assert verdict(Policy("nmse", max=5e-4), expected * (1 + 0.02), expected)  # NMSE 4e-4
    assert not verdict(Policy("nmse", max=5e-4), expected * (1 + 0.023), expected)  # NMSE 5.29e-4
    found = compare_under(Policy("nmse", max=5e-4), expected * 1.02, expected)
    assert found.used == pytest.approx(0.8)


def test_nmse_of_an_all_zero_expectation_is_exact_or_infinite():
    zero = np.zeros(8)
    assert verdict(Policy("nmse", max=0.5), zero.copy(), zero)
    assert not verdict(Policy("nmse", max=0.5), zero + 1e-30, zero)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_ulp_edge(dtype):
    expected = np.array([1.0, -3.5, 1e-3, 0.0], dtype=dtype)
    two, three = expected.copy(), expected.copy()
    for _ in range(2):
        two = np.nextafter(two, np.array(np.inf, dtype=dtype))
    for _ in range(3):
        three = np.nextafter(three, np.array(np.inf, dtype=dtype))
    assert verdict(Policy("ulp", max=2), two, expected)
    assert not verdict(Policy("ulp", max=2), three, expected)
    assert compare_under(Policy("ulp", max=4), two, expected).used == pytest.approx(0.5)


def test_ulp_counts_across_zero_and_treats_signed_zeros_as_equal():
    tiny = np.array([np.nextafter(0.0, 1.0)])
    assert verdict(Policy("ulp", max=2), -tiny, tiny)  # -min subnormal to +min subnormal: 2 units
    assert not verdict(Policy("ulp", max=1), -tiny, tiny)
    assert verdict(Policy("ulp", max=0), np.array([-0.0]), np.array([0.0]))
    assert not verdict(Policy("ulp", max=10**6), np.array([np.inf]), np.array([np.finfo(np.float64).max]))


def test_ulp_in_bfloat16_by_its_bits():
    expected = np.array([1.0, 2.5, -7.0], dtype=ml_dtypes.bfloat16)
    bits = expected.view(np.uint16)
    assert verdict(Policy("ulp", max=1), (bits + 1).astype(np.uint16).view(ml_dtypes.bfloat16), expected)
    assert not verdict(Policy("ulp", max=1), (bits + 2).astype(np.uint16).view(ml_dtypes.bfloat16), expected)


def test_exact_is_bitwise():
    nan = np.array([np.nan])
    other_nan = np.array([0x7FF8000000000001], dtype=np.uint64).view(np.float64)
    assert verdict(Policy("exact"), nan.copy(), nan)
    assert not verdict(Policy("exact"), other_nan, nan)
    assert not verdict(Policy("exact"), np.array([-0.0]), np.array([0.0]))
    assert not verdict(Policy("exact"), np.array([1.0 + 2**-52]), np.array([1.0]))


# ---- the Numbers rule: zeros, the mean as a constant, a permuted last axis -----------------------------------------

WRONG_ANSWERS = {
    "zeros": lambda e: np.zeros_like(e),
    "constant-mean": lambda e: np.full_like(e, e.astype(np.float64).mean()),
    "permuted-last-axis": lambda e: e[..., np.random.default_rng(3).permutation(e.shape[-1])],
}
POLICIES = [Policy("exact"), Policy("allclose"), Policy("nmse", max=5e-4), Policy("ulp", max=2)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
@pytest.mark.parametrize("wrong", sorted(WRONG_ANSWERS))
def test_each_policy_fails_the_wrong_answers(policy, wrong, dtype):
    expected = (np.random.default_rng(2).standard_normal((4, 64)) + 1.0).astype(NP_DTYPE[dtype])  # mean ~1: not symmetric
    assert verdict(policy, expected.copy(), expected), "the right answer passes"
    assert not verdict(policy, WRONG_ANSWERS[wrong](expected).astype(expected.dtype), expected)


def _token_result(tokens, margins=None):
    return {"tokens": np.asarray(tokens, dtype=np.int64), **({"top2_margin": np.asarray(margins)} if margins is not None else {})}


@pytest.mark.parametrize("wrong", sorted(WRONG_ANSWERS))
def test_tokens_fail_the_wrong_answers(wrong):
    tokens = np.random.default_rng(4).integers(1, 32000, size=(2, 16))
    expected = _token_result(tokens, np.full(tokens.shape, 3.0))
    policy = Policy("tokens", margin=0.05, max_excused=2)
    assert verdict(policy, _token_result(tokens), expected)
    assert not verdict(policy, _token_result(WRONG_ANSWERS[wrong](tokens.astype(np.float64)).astype(np.int64)), expected)


# ---- tokens: excused near-ties, the cap, a case that shows nothing -------------------------------------------------

def test_tokens_excuse_near_ties_up_to_the_cap():
    expected = _token_result([5, 6, 7, 8], [1.0, 0.01, 0.02, 1.0])
    policy = Policy("tokens", margin=0.05, max_excused=1)
    one = compare_under(policy, _token_result([5, 9, 7, 8]), expected)
    assert one.passed and one.excused == 1 and one.used == 1.0
    assert compare_under(policy, _token_result([5, 6, 7, 8]), expected).used == 0.0
    assert not verdict(policy, _token_result([5, 9, 9, 8]), expected), "two excused, more than max_excused 1"
    assert not verdict(Policy("tokens", margin=0.05, max_excused=4), _token_result([9, 6, 7, 8]), expected), \
        "a position whose margin is at the band or above is never excused"


def test_tokens_every_position_within_the_band_is_an_error():
    found = compare_under(Policy("tokens", margin=0.5, max_excused=8), _token_result([1, 2]),
                          _token_result([3, 4], [0.1, 0.2]))
    assert not found.passed and "any answer would be excused" in found.problem


def test_tokens_margins_must_be_finite_and_not_negative():
    found = compare_under(Policy("tokens", margin=0.5, max_excused=8), _token_result([1, 2]),
                          _token_result([1, 2], [1.0, -0.5]))
    assert "margins are finite numbers >= 0" in found.problem and "[1]" in found.problem


def test_tokens_judge_the_float_arrays_beside_the_ids_under_allclose():
    """A greedy decode's logits travel with its ids: allclose at the float32 defaults, or the rtol/atol given."""
    logits = np.random.default_rng(5).standard_normal((4, 130)).astype(np.float32) * 4
    expected = {**_token_result([5, 6, 7, 8], [1.0, 0.5, 0.5, 1.0]), "logits": logits}
    near = (logits + np.float32(5e-6)).astype(np.float32)
    off = (logits + np.float32(4e-5)).astype(np.float32)
    policy = Policy("tokens", margin=0.05, max_excused=0)
    assert verdict(policy, {**_token_result([5, 6, 7, 8]), "logits": near}, expected), "within float32's default atol 1e-5"
    failed = compare_under(policy, {**_token_result([5, 6, 7, 8]), "logits": off}, expected)
    assert not failed.passed and [found.path for found in failed.arrays if not found.passed] == ["result.logits"]
    assert verdict(Policy("tokens", margin=0.05, max_excused=0, rtol=1.3e-6, atol=5e-5),
                   {**_token_result([5, 6, 7, 8]), "logits": off}, expected), "within the atol given"
    assert not verdict(Policy("tokens", margin=0.05, max_excused=0, rtol=1.3e-6, atol=5e-5),
                       {**_token_result([5, 9, 7, 8]), "logits": logits}, expected), "the ids stay exact above the band"


def test_tokens_need_a_token_map():
    found = compare_under(Policy("tokens", margin=0.5, max_excused=1), {"ids": np.arange(3)}, {"ids": np.arange(3)})
    assert "needs a map with keys 'tokens' and 'top2_margin'" in found.problem


# ---- nothing compared, mismatched dtypes and shapes, the parts that are not arrays ---------------------------------

def test_zero_elements_compared_is_a_problem_not_a_pass():
    empty = np.zeros((3, 0), dtype=np.float32)
    found = compare_under(Policy("allclose"), {"out": empty}, {"out": empty.copy()})
    assert not found.passed and found.problem.startswith("nothing compared") and "zero elements" in found.problem


def test_a_result_without_arrays_is_a_problem():
    found = compare_under(Policy("nmse", max=1e-3), {"n": 3}, {"n": 3})
    assert not found.passed and "holds no array" in found.problem


def test_dtype_and_shape_mismatches_name_both_and_never_cast():
    expected = np.ones((2, 3), dtype=np.float32)
    dtype = compare_under(Policy("allclose", 1.0, 1.0), expected.astype(np.float64), expected)
    assert not dtype.passed
    assert dtype.differences[0].text == "a float64 array of shape [2, 3] where a float32 array of shape [2, 3] is expected (never cast)"
    shape = compare_under(Policy("allclose"), expected.reshape(3, 2), expected)
    assert "shape [3, 2] where a float32 array of shape [2, 3]" in shape.differences[0].text
    listed = compare_under(Policy("allclose"), expected.tolist(), expected)
    assert listed.differences[0].text == "a list where a float32 array of shape [2, 3] is expected"


def test_the_rest_of_the_result_is_compared_exactly():
    array = np.ones(4)
    assert verdict(Policy("allclose"), {"y": array, "n": 3, "name": "x"}, {"y": array, "n": 3, "name": "x"})
    found = compare_under(Policy("allclose"), {"y": array, "n": 3.0}, {"y": array, "n": 3})
    assert [(d.path, d.text) for d in found.differences] == [("result.n", "3.0 where 3 is expected")]
    keys = compare_under(Policy("allclose"), {"y": array}, {"y": array, "z": 1})
    assert "missing 'z'" in keys.differences[0].text
    assert not verdict(Policy("allclose"), [array, 1], [array, 1, 2])


def test_a_differing_range_and_a_list_of_another_length_show_both_sides():
    """A short list of ints (a [begin, end) range) is one value: both ranges on one line, not an endpoint each; a list
    of another length shows both lists (cut), not only the counts."""
    array = np.ones(2)
    found = compare_under(Policy("allclose"), {"y": array, "rows": [24, 48], "flag": [True]},
                          {"y": array, "rows": [0, 24], "flag": [False]})
    assert [(d.path, d.text) for d in found.differences] == [("result.rows", "[24, 48] where [0, 24] is expected"),
                                                               ("result.flag[0]", "true where false is expected")]
    same_start = compare_under(Policy("allclose"), [array, [0, 23]], [array, [0, 24]])
    assert same_start.differences[0].text == "[0, 23] where [0, 24] is expected"
    longer = compare_under(Policy("allclose"), [array, [{"rows": [0, 1]}, {"rows": [2, 3]}]], [array, [{"rows": [0, 2]}]])
    assert [(d.path, d.text) for d in longer.differences] == [
        ("result[1]", "2 items where 1 is expected: [{rows: [0, 1]}, {rows: [2, 3]}] where [{rows: [0, 2]}] is expected")]
    many = compare_under(Policy("allclose"), [array, list(range(9))], [array, [0] * 9])
    assert [d.path for d in many.differences][:2] == ["result[1][1]", "result[1][2]"]  # not a short range: per element


# ---- NaN --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["allclose", "nmse", "ulp"])
def test_nan_equals_nan_only_with_equal_nan(name):
    options = {"max": 1e-3 if name == "nmse" else 2} if name != "allclose" else {}
    expected = np.array([1.0, np.nan, 2.0], dtype=np.float32)
    assert not verdict(Policy(name, **options), expected.copy(), expected)
    assert verdict(Policy(name, equal_nan=True, **options), expected.copy(), expected)
    assert not verdict(Policy(name, equal_nan=True, **options), np.array([1.0, 5.0, 2.0], dtype=np.float32), expected)
    assert not verdict(Policy(name, equal_nan=True, **options), np.array([np.nan, np.nan, 2.0], dtype=np.float32), expected)


def test_nan_agrees_with_assert_close_equal_nan():
    expected = torch.tensor([1.0, math.nan, -2.0])
    for equal_nan in (False, True):
        ours = verdict(Policy("allclose", equal_nan=equal_nan), as_numpy(expected.clone()), as_numpy(expected))
        assert ours == _torch_passes(expected.clone(), expected, equal_nan=equal_nan) == equal_nan


# ---- bfloat16 -----------------------------------------------------------------------------------------------------

def test_bfloat16_arrays_compare_as_the_floats_they_are():
    expected = np.array([1.0, 100.0, -0.5], dtype=ml_dtypes.bfloat16)
    near = np.array([1.0078125, 101.0, -0.5], dtype=ml_dtypes.bfloat16)  # one bfloat16 step at 1.0, 1% at 100
    assert verdict(Policy("allclose"), near, expected)
    assert not verdict(Policy("allclose"), np.array([1.0, 104.0, -0.5], dtype=ml_dtypes.bfloat16), expected)
    found = compare_under(Policy("exact"), near, expected)
    assert found.arrays[0].worst[0].actual == 101.0 and isinstance(found.arrays[0].worst[0].actual, float)


# ---- memory -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", POLICIES[1:], ids=lambda p: p.name)
def test_a_huge_comparison_holds_only_chunk_sized_temporaries(policy):
    """Two 64 MiB float32 arrays, one element off: judging and describing them holds a few float64 chunks at a
    time (under 256 MiB in all), never array-sized float64 copies (128 MiB each, 700 MiB and more in all)."""
    size = 16 * 1024 * 1024
    expected = np.random.default_rng(5).standard_normal(size, dtype=np.float32)
    actual = expected.copy()
    actual[size // 2] += 1.0
    tracemalloc.start()
    try:
        found = compare_under(policy, actual, expected)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found.arrays[0].total == size
    assert peak < 256 * 2**20, f"peak {peak / 2**20:.0f} MiB"
