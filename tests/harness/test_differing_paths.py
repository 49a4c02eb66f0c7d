"""Where two plain results differ, first (docs/gate-files.md, "What a gate checks"): a mismatch of structured values
compared exactly lists the differing paths (at most ten, and how many more) before the two whole values, in the
order of strict equality's own walk and exactly where strict_equal says the sub-values differ; end to end in the
pytest report and the JSON report's detail."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _vllm_gates.run.checks import Mismatch
from _vllm_gates.run.items import _render_mismatch
from _vllm_gates.values.compare import COUNTED, differences, strict_equal
from _vllm_gates.values.render import MAX_PATHS, differing_paths

pytestmark = pytest.mark.cpu

HEADLINE = "impl does not return the expected value"


def _shown(actual, expected) -> list[str]:
    """The "differs" lines of a mismatch of these values, as the report prints their text."""
    paths = differing_paths(actual, expected)
    assert paths is not None, "the values differ in a structure: the report lists paths"
    assert all(label == "differs" for label, _ in paths.lines())
    return [text for _, text in paths.lines()]


def test_a_nested_map_with_two_differing_leaves_names_both_paths_in_the_order_of_the_walk():
    expected = {"ranks": [{"rank": 0, "vocab_range": [0, 128]}, {"rank": 1, "vocab_range": [128, 256]}], "world": 2}
    actual = {"ranks": [{"rank": 0, "vocab_range": [0, 192]}, {"rank": 1, "vocab_range": [192, 256]}], "world": 2}
    assert _shown(actual, expected) == ["result.ranks[0].vocab_range[1]: 192 where 128 is expected",
                                        "result.ranks[1].vocab_range[0]: 192 where 128 is expected"]
    assert differing_paths(actual, expected).headline(HEADLINE) == \
        f"{HEADLINE} at result.ranks[0].vocab_range[1]: 192 where 128 is expected (and 1 more path differs)"


def test_keys_that_are_not_identifiers_are_written_as_subscripts():
    assert _shown({"kv cache": {1: "a", "ok": [0]}}, {"kv cache": {1: "b", "ok": [1]}}) == [
        "result['kv cache'][1]: a where b is expected", "result['kv cache'].ok[0]: 0 where 1 is expected"]


def test_more_than_ten_differing_paths_shows_ten_and_counts_the_rest():
    actual, expected = {"blocks": list(range(1, 48))}, {"blocks": [0] * 47}
    shown = _shown(actual, expected)
    assert len(shown) == MAX_PATHS + 1
    assert shown[:MAX_PATHS] == [f"result.blocks[{i}]: {i + 1} where 0 is expected" for i in range(MAX_PATHS)]
    assert shown[-1] == "... and 37 more paths differ"


def test_a_count_past_the_walks_bound_says_at_least():
    """A result with more differing paths than a walk counts: the report says how many it counted, never more."""
    found = differences(list(range(1, COUNTED + 500)), [0] * (COUNTED + 499))
    assert not found.complete and found.count == COUNTED
    assert _shown(list(range(1, COUNTED + 500)), [0] * (COUNTED + 499))[-1] == \
        f"... and at least {COUNTED - MAX_PATHS} more paths differ"


def test_lists_of_different_lengths_name_both_lengths_then_compare_the_common_prefix():
    assert _shown({"layout": [4, 5, 7]}, {"layout": [4, 6, 7, 8]}) == [
        "result.layout: 3 items where 4 are expected", "result.layout[1]: 5 where 6 is expected"]
    assert _shown([[1, 2]], [[1]]) == ["result[0]: 2 items where 1 is expected"]
    assert _shown([1], [1, 2]) == ["result: 1 item where 2 are expected"], "the prefix agrees: the length is all"


def test_missing_and_unexpected_keys_are_named_at_their_paths():
    assert _shown({"a": 1, "extra": [1, 2], "b": 2}, {"a": 1, "b": 3, "num blocks": 12}) == [
        "result.b: 2 where 3 is expected", "result['num blocks']: missing where 12 is expected",
        "result.extra: [1, 2] where no such key is expected"]


@pytest.mark.parametrize("actual,expected,text", [
    (1, True, "1 (an int) where true (a bool) is expected"),
    (True, 1, "true (a bool) where 1 (an int) is expected"),
    (1, 1.0, "1 (an int) where 1.0 (a float) is expected"),
    (0.0, False, "0.0 (a float) where false (a bool) is expected"),
    ("1", 1, "'1' (a string) where 1 (an int) is expected"),
    (None, 0, "null where 0 (an int) is expected"),
    ([1], {"a": 1}, "[1] (a list) where {a: 1} (a map) is expected"),
])
def test_kinds_strict_equality_tells_apart_are_named_with_both_kinds(actual, expected, text):
    assert not strict_equal(actual, expected)
    assert _shown({"x": actual}, {"x": expected}) == [f"result.x: {text}"]


def test_values_strict_equality_holds_equal_are_not_listed():
    """NaN equals NaN, a list equals a tuple, keys match by strict equality: none of these is a difference."""
    actual = {"nan": float("nan"), "pair": (1, 2), "keys": {1: "int", 2.5: "float", float("nan"): 0}, "off": 3}
    expected = {"nan": float("nan"), "pair": [1, 2], "keys": {float("nan"): 0, 2.5: "float", 1: "int"}, "off": 4}
    assert strict_equal({k: v for k, v in actual.items() if k != "off"}, {k: v for k, v in expected.items() if k != "off"})
    assert _shown(actual, expected) == ["result.off: 3 where 4 is expected"]


def test_keys_of_another_kind_are_missing_and_unexpected():
    assert _shown({1: "a"}, {1.0: "a"}) == ["result[1.0]: missing where a is expected", "result[1]: a where no such key is expected"]
    assert _shown({"m": {True: 0}}, {"m": {1: 0}}) == ["result.m[1]: missing where 0 is expected",
                                                       "result.m[True]: 0 where no such key is expected"]


def test_arrays_are_compared_exactly_naming_the_first_differing_element_and_the_count():
    expected = np.arange(12, dtype=np.float32).reshape(3, 4)
    actual = expected.copy()
    actual[1, 2], actual[2, 0] = -1.0, 0.5
    assert _shown({"k": actual}, {"k": expected}) == [
        "result.k: 2 of 12 elements differ, the first at [1, 2]: -1.0 where 6.0 is expected"]
    signed = np.zeros(3, np.float32)
    signed[1] = -0.0
    assert _shown([signed], [np.zeros(3, np.float32)]) == [
        "result[0]: 1 of 3 elements differ, the first at [1]: -0.0 where 0.0 is expected"]
    bf16 = np.array([1, 2, 3], ml_dtypes.bfloat16)
    assert _shown(bf16, np.array([1, 2, 4], ml_dtypes.bfloat16)) == [
        "result: 1 of 3 elements differ, the first at [2]: 3.0 where 4.0 is expected"]
    assert differing_paths(np.arange(3, dtype=">i4"), np.arange(3, dtype="<i4")) is None, "byte order is the wire's"


def test_nans_of_other_bits_differ_and_show_their_bits():
    nan = np.array([0.0, np.nan], np.float32)
    other = nan.copy()
    other.view(np.uint32)[1] |= 1
    assert strict_equal(nan, nan.copy()) and not strict_equal(nan, other)
    assert _shown(nan, other) == [
        "result: 1 of 2 elements differ, the first at [1]: nan (bits 0x7fc00000) where nan (bits 0x7fc00001) is expected"]


def test_arrays_of_another_dtype_or_shape_or_a_list_for_an_array_name_both_kinds():
    assert _shown({"k": np.zeros(3)}, {"k": np.zeros(3, np.float32)}) == [
        "result.k: a float64 array of shape [3] where a float32 array of shape [3] is expected"]
    assert _shown([np.zeros((2, 3), np.int64)], [np.zeros((3, 2), np.int64)]) == [
        "result[0]: an int64 array of shape [2, 3] where an int64 array of shape [3, 2] is expected"]
    assert _shown({"k": [0, 0]}, {"k": np.zeros(2, np.uint8)}) == [
        "result.k: [0, 0] (a list) where a uint8 array of shape [2] is expected"]


def test_two_scalars_list_no_path_the_whole_values_say_it():
    assert differing_paths(3, 4) is None and differing_paths("a", "b") is None and differing_paths(1, 1.0) is None
    assert differing_paths([1], {"a": 1}) is None, "two kinds at the top: the two whole values show them"
    assert differing_paths({"a": [1]}, {"a": [1]}) is None, "equal values: nothing to list"


def test_a_long_value_in_a_path_line_is_cut():
    text = _shown({"s": "x" * 5000}, {"s": "y"})[0]
    assert len(text) < 250 and "more characters" in text


def test_the_report_shows_the_paths_before_the_two_whole_values():
    actual, expected = {"ranks": [[0, 192]]}, {"ranks": [[0, 128]]}
    paths = differing_paths(actual, expected)
    error = Mismatch(paths.headline(HEADLINE), "gate.yaml:9:7: gate plan, case 'two'", {"tp": 2},
                     [*paths.lines(), ("impl", "{ranks: [[0, 192]]}"), ("expected", "{ranks: [[0, 128]]}")])
    assert _render_mismatch(error, "node", "", "").splitlines() == [
        f"gate.yaml:9:7: gate plan, case 'two': {HEADLINE} at result.ranks[0][1]: 192 where 128 is expected",
        "  input   : {tp: 2}",
        "  differs : result.ranks[0][1]: 192 where 128 is expected",
        "  impl    : {ranks: [[0, 192]]}",
        "  expected: {ranks: [[0, 128]]}"]


# strict_equal and the differing paths are one walk: a path is listed exactly where strict_equal says the values differ
_LEAVES = st.one_of(st.integers(-2, 2), st.sampled_from([0.0, -0.0, 1.0, 1.5, math.nan, math.inf]), st.booleans(),
                    st.none(), st.sampled_from(["a", "b", "1"]))
_KEYS = st.one_of(st.sampled_from(["a", "b", "c d"]), st.integers(0, 2), st.booleans(), st.sampled_from([0.0, 1.0]))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
                                                          st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=12)


def _at(value, path: str, root: str = "result"):
    """The sub-value a listed path names (keys looked up by their repr or name in the map as it is)."""
    import re

    rest = path[len(root):]
    while rest:
        name = re.match(r"\.([A-Za-z_]\w*)|\[([^\]]+)\]", rest)
        assert name, rest
        rest = rest[name.end():]
        if isinstance(value, dict):
            value = next(v for k, v in value.items() if (repr(k) == name.group(2) if name.group(2) else k == name.group(1)))
        else:
            value = value[int(name.group(2))]
    return value


def _changed(value, data):
    """The value with at most one part, at a drawn depth, drawn again (containers copied on the way down)."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(list(value)))
        return {**value, key: _changed(value[key], data)}
    if isinstance(value, (list, tuple)) and value and data.draw(st.booleans()):
        items, at = list(value), data.draw(st.integers(0, len(value) - 1))
        items[at] = _changed(items[at], data)
        return type(value)(items)
    return data.draw(_VALUES) if data.draw(st.booleans()) else value


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.data())
def test_a_path_is_listed_exactly_where_strict_equal_says_the_values_differ(actual, data):
    expected = _changed(actual, data) if data.draw(st.booleans()) else data.draw(_VALUES)  # alike but for one part, or any
    found = differences(actual, expected, keep=100)
    assert (found.count == 0) == strict_equal(actual, expected)
    assert found.count == len(found.shown) and found.complete
    for difference in found.shown:
        if difference.what in ("value", "length", "elements"):
            assert not strict_equal(_at(actual, difference.path), _at(expected, difference.path)), difference
            assert _at(actual, difference.path) is difference.actual and _at(expected, difference.path) is difference.expected
        if difference.what == "value":
            both = (difference.actual, difference.expected)
            assert not all(isinstance(v, (list, tuple)) for v in both) and not all(isinstance(v, dict) for v in both), \
                "two lists or two maps are walked into, never listed whole"


# end to end: a wrong impl's structured result, in the pytest report and the JSON report's detail ------------------
PLAN = '''"""A toy shard plan: each rank's share of a vocabulary of 256 ids."""


def shard_plan(tp: int) -> dict:
    share = 256 // tp
    return {"world": tp, "ranks": [{"rank": r, "vocab_range": [r * share, (r + 1) * share]} for r in range(tp)]}


def off_by_half(tp: int) -> dict:
    """Each boundary moved by half a share where tp is 2 (the edge ranks right)."""
    share = 256 // tp
    moved = share // 2 if tp == 2 else 0
    return {"world": tp, "ranks": [{"rank": r, "vocab_range": [r * share + (moved if r else 0),
                                                               (r + 1) * share + (moved if r + 1 < tp else 0)]}
                                   for r in range(tp)]}


def every_bound_off(tp: int) -> dict:
    """Every boundary one too large."""
    return {"world": tp, "ranks": [{"rank": r, "vocab_range": [lo + 1, hi + 1]}
                                   for r, (lo, hi) in enumerate(d["vocab_range"] for d in shard_plan(tp)["ranks"])]}
'''
PLAN_GATE = '''  - id: shard-plan
    milestone: M1
    covers: [EX-1.1]
    markers: [cpu]
    impl: example_row.plan:off_by_half
    oracle: example_row.plan:shard_plan
    cases:
      two-ranks:
        input: {tp: 2}
        expect: {world: 2, ranks: [{rank: 0, vocab_range: [0, 128]}, {rank: 1, vocab_range: [128, 256]}]}
    properties:
      strategy: .plan_strategies:world_sizes
      max_examples: 20
    known_bad:
      every-bound-off: example_row.plan:every_bound_off
'''
PLAN_STRATEGIES = '''from hypothesis import strategies as st


def world_sizes():
    return st.fixed_dictionaries({"tp": st.sampled_from([1, 2, 4])})
'''


def test_a_wrong_structured_result_names_its_differing_paths_in_pytest_and_the_json_report(example):
    example.write("example_row/plan.py", PLAN)
    example.write("gates/rows/example/plan_strategies.py", PLAN_STRATEGIES)
    example.write("gates/rows/example/gate.yaml", example.read() + PLAN_GATE)
    first = "result.ranks[0].vocab_range[1]: 192 where 128 is expected"
    second = "result.ranks[1].vocab_range[0]: 192 where 128 is expected"

    result = example.pytest("gates/rows/example/gate.yaml::shard-plan::two-ranks")
    result.assert_outcomes(failed=1)
    lines = result.outlines
    at = next(i for i, line in enumerate(lines) if "gate shard-plan, case 'two-ranks': " in line)
    assert lines[at].endswith(f": {HEADLINE} at {first} (and 1 more path differs)"), lines[at]
    assert lines[at + 1:at + 5] == ["  input   : {tp: 2}", f"  differs : {first}", f"  differs : {second}",
                                    "  impl    : {world: 2, ranks: [{rank: 0, vocab_range: [0, 192]}, {rank: 1, vocab_range: [192, 256]}]}"]
    assert [line.split(":", 1)[0] for line in lines[at + 5:at + 7]] == ["  expected", "  oracle  "], "the whole values follow"

    ran, report = example.run_json("EXAMPLE-ROW", "--gate", "shard-plan")
    assert ran.code == 1, ran.text
    items = {item["name"]: item for item in report["items"] if item["gate"] == "shard-plan"}
    assert items["two-ranks"]["outcome"] == "failed"
    assert items["two-ranks"]["detail"].endswith(f"{HEADLINE} at {first} (and 1 more path differs)"), items["two-ranks"]
    assert f"  differs : {second}" in ran.out
    assert items["properties"]["detail"].endswith(
        f"impl disagrees with the oracle on a generated input at {first} (and 1 more path differs)"), items["properties"]
    shrunk = ran.out[ran.out.index("gate shard-plan, properties: "):]
    assert shrunk.splitlines()[1:3] == ["  input  : {tp: 2}", f"  differs: {first}"], "the shrunk example's paths first"
    rejected = items["known_bad[every-bound-off]"]
    assert rejected["outcome"] == "passed"
    assert rejected["detail"] == (f"case 'two-ranks': {HEADLINE} at result.ranks[0].vocab_range[0]: 1 where 0 is expected "
                                  f"(and 3 more paths differ)"), rejected
