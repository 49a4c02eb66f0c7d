"""The plain-data encoding of the worker protocol: exact round trips, refusals by type name, strict key comparison."""
from __future__ import annotations

import ctypes
import dataclasses
import enum
import math

import pytest

from _vllm_gates.values.compare import strict_equal
from _vllm_gates.wire.plain import (MAX_DEPTH, WRONG, MapKeyCollision, NotPlain, ProtocolError, WrongEverywhere, decode, dumps,
                                    encode, loads)

pytestmark = pytest.mark.cpu

MOD = __name__


def _same(a: object, b: object) -> bool:
    """Identical plain values: same types all the way down (dict order included), NaN equal to NaN, -0.0 not 0.0."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return len(a) == len(b) and all(_same(ka, kb) and _same(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    return a is b or a == b


ROUND_TRIPS = {
    "none": None, "true": True, "false": False, "zero": 0, "negative": -7,
    "big-int": 2 ** 200, "big-negative-int": -(2 ** 64) - 1, "beyond-2^53": 2 ** 53 + 1,
    "float": 1.5, "integral-float": 1.0, "negative-zero": -0.0, "tiny": 5e-324, "huge": 1.7976931348623157e308,
    "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "str": "page", "unicode": "é✓\U0001f600", "empty-str": "",
    "list": [1, 1.0, True, None, "1"], "empty-list": [], "tuple": (1, 2), "empty-tuple": (), "one-tuple": (1,),
    "nested-tuples": ((1, (2.0, (True,))), [()]),
    "map": {"a": 1, "b": [1.0]}, "empty-map": {},
    "typed-keys": {2: "int", 1.5: "float", True: "bool", None: "none", "1": "str", (1, "x", None, (2.0,)): "tuple"},
    "nan-key": {math.nan: 1},
    "nested-maps": {"outer": {(1, 2): {False: [{}]}}},
    "layout": [[i] for i in range(64)],
}


@pytest.mark.parametrize("value", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_every_plain_kind_round_trips_exactly(value):
    assert _same(decode(encode(value)), value)
    assert _same(loads(dumps(value)), value)


def test_the_wire_text_keeps_ints_floats_and_tags_apart():
    assert dumps([1, 1.0, -0.0, 1e16, 2 ** 64]) == b'[1,1.0,-0.0,1e+16,18446744073709551616]'
    assert dumps([math.nan, math.inf, -math.inf]) == b'[{"$float":"nan"},{"$float":"inf"},{"$float":"-inf"}]'
    assert dumps({(1,): "é"}) == '{"$map":[[{"$tuple":[1]},"é"]]}'.encode("utf-8")
    assert dumps(WRONG) == b'{"$wrong":true}'


def test_map_order_is_kept():
    value = {"z": 1, "a": 2, 3: 3}
    assert list(loads(dumps(value))) == ["z", "a", 3]


def test_distinct_nan_keys_stay_distinct():
    value = {float("nan"): 1, float("nan"): 2}
    back = loads(dumps(value))
    assert len(back) == 2 and sorted(back.values()) == [1, 2]


def test_wrong_decodes_to_the_sentinel_equal_to_nothing():
    back = loads(b'[{"$wrong":true}]')
    assert back[0] is WRONG and isinstance(WRONG, WrongEverywhere)
    assert not strict_equal(back, back)


class LyingInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class Colour(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    LOW = 1


class Name(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int)]


REFUSED = {
    "lying-int": (LyingInt(3), f"{MOD}.LyingInt"),
    "int-enum": (Level.LOW, f"{MOD}.Level"),
    "enum": (Colour.RED, f"{MOD}.Colour"),
    "str-subclass": (Name("x"), f"{MOD}.Name"),
    "dataclass": (Point(1), f"{MOD}.Point"),
    "ctypes-struct": (Pair(1), f"{MOD}.Pair"),
    "set": ({1}, "set"),
    "frozenset": (frozenset(), "frozenset"),
    "bytes": (b"x", "bytes"),
    "bytearray": (bytearray(b"x"), "bytearray"),
    "complex": (1j, "complex"),
    "object": (object(), "object"),
}


@pytest.mark.parametrize("value, name", REFUSED.values(), ids=REFUSED.keys())
def test_non_plain_values_are_refused_by_type_name(value, name):
    with pytest.raises(NotPlain) as top:
        encode(value)
    assert str(top.value) == f"result is not plain data: {name} at result"
    assert (top.value.type_path, top.value.where) == (name, "result")
    with pytest.raises(NotPlain) as nested:
        dumps([0, {"key": (1, value)}])
    assert str(nested.value) == f'result is not plain data: {name} at result[1]["key"][1]'


def test_a_non_plain_key_is_named_by_its_position():
    with pytest.raises(NotPlain) as caught:
        encode({"a": 1, (1, Level.LOW): 2})
    assert str(caught.value) == f"result is not plain data: {MOD}.Level at result.<key 1>[1]"


def test_the_root_can_be_named():
    with pytest.raises(NotPlain, match=r"^input is not plain data: set at input\[0\]$"):
        encode([set()], root="input")


def test_a_lying_int_subclass_is_refused_without_calling_it():
    class Trap(int):
        def __eq__(self, other):
            raise AssertionError("__eq__ called")

        def __hash__(self):
            raise AssertionError("__hash__ called")

        def __repr__(self):
            raise AssertionError("__repr__ called")

    with pytest.raises(NotPlain, match=r"Trap at result\[0\]$"):
        encode([Trap(1)])


def test_a_metaclass_cannot_run_code_for_the_type_name():
    class Meta(type):
        def __getattribute__(cls, name):
            raise AssertionError("metaclass code ran")

    class Odd(metaclass=Meta):
        pass

    with pytest.raises(NotPlain, match=r"Odd at result$"):
        encode(Odd())


def test_numpy_scalars_and_arrays_of_other_dtypes_are_refused():
    """numpy arrays are tensors now (tests/harness/test_tensor_values.py); a dtype the protocol lacks, and numpy's
    scalars, are still not plain data."""
    np = pytest.importorskip("numpy")
    with pytest.raises(NotPlain) as array:
        encode([np.zeros(3, dtype=np.complex64)])
    assert str(array.value).startswith("result is not plain data: numpy.ndarray of dtype complex64, which the protocol "
                                       "does not carry (it carries bool, uint8,")
    assert str(array.value).endswith(" at result[0]")
    with pytest.raises(NotPlain) as scalar:
        encode({"n": np.int64(3)})
    assert str(scalar.value) == 'result is not plain data: numpy.int64 at result["n"]'
    with pytest.raises(NotPlain, match=r"numpy\.float64 at result$"):
        encode(np.float64(1.0))  # a float subclass: still not exactly a float


def test_torch_dtypes_are_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(NotPlain, match=r"^result is not plain data: torch\.dtype at result\[0\]$"):
        encode([torch.float16])


def test_a_cycle_is_refused_not_followed():
    looped: list = [1]
    looped.append(looped)
    with pytest.raises(NotPlain, match=r"^result is not plain data: list that contains itself at result\[1\]$"):
        encode(looped)
    mapping: dict = {}
    mapping["self"] = [mapping]
    with pytest.raises(NotPlain, match=r'dict that contains itself at result\["self"\]\[0\]$'):
        encode(mapping)


def test_a_shared_value_is_not_a_cycle():
    row = [1, 2]
    assert loads(dumps([row, row, (row,)])) == [[1, 2], [1, 2], ([1, 2],)]


def _nested(levels: int) -> object:
    value: object = 0
    for i in range(levels):
        value = [value] if i % 3 == 0 else ((value,) if i % 3 == 1 else {"k": value})
    return value


def test_nesting_is_limited_on_both_sides():
    deepest = _nested(MAX_DEPTH)
    assert _same(loads(dumps(deepest)), deepest)
    with pytest.raises(NotPlain, match=rf"nested deeper than {MAX_DEPTH} levels at result"):
        encode(_nested(MAX_DEPTH + 1))
    text = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    with pytest.raises(ProtocolError, match=rf"nesting deeper than {MAX_DEPTH} levels"):
        loads(text)
    with pytest.raises(ProtocolError, match="not UTF-8 JSON"):
        loads(b"[" * 100_000 + b"]" * 100_000)


def test_ints_beyond_the_digit_limit_and_lone_surrogates_are_refused():
    with pytest.raises(NotPlain, match=r"^result is not plain data: int with more than 4300 digits at result\[0\]$"):
        encode([10 ** 4300])
    assert loads(dumps(10 ** 4300 - 1)) == 10 ** 4300 - 1
    with pytest.raises(NotPlain, match=r"^result is not plain data: str with a lone surrogate at result$"):
        encode("\ud800")
    with pytest.raises(ProtocolError, match="lone surrogate"):
        loads(b'"\\ud800"')


@pytest.mark.parametrize("pairs, text", [
    ("[[1,\"a\"],[true,\"b\"]]", "key True collides with the key 1"),
    ("[[1,\"a\"],[1.0,\"b\"]]", "key 1.0 collides with the key 1"),
    ("[[0.0,\"a\"],[-0.0,\"b\"]]", "key -0.0 collides with the key 0.0"),
    ("[[{\"$tuple\":[1]},\"a\"],[{\"$tuple\":[true]},\"b\"]]", "key (True,) collides with the key (1,)"),
    ("[[\"k\",1],[\"k\",2]]", 'key "k" collides with the key "k"'),
])
def test_colliding_map_keys_are_refused_not_merged(pairs, text):
    with pytest.raises(MapKeyCollision) as caught:
        loads(('{"$map":' + pairs + '}').encode())
    assert isinstance(caught.value, ProtocolError)
    assert str(caught.value) == f"result is not plain data: {text} (a Python dict merges them) at result.<key 1>"


MALFORMED = {
    "unknown-tag": (b'{"$set":[1]}', r'an object with keys \["\$set"\], not one of the tags'),
    "plain-object": (b'{"a":1}', r'an object with keys \["a"\]'),
    "empty-object": (b'[{}]', r"an object with keys \[\], not one of the tags .* at result\[0\]$"),
    "extra-key": (b'{"$float":"nan","x":1}', r'an object with keys \["\$float", "x"\]'),
    "repeated-key": (b'{"$float":"nan","$float":"inf"}', r'a JSON object repeats a key: "\$float", "\$float"'),
    "bad-float-tag": (b'{"$float":"NaN"}', r'\$float of a string, not "nan", "inf" or "-inf"'),
    "float-tag-number": (b'{"$float":1}', r"\$float of a number"),
    "tuple-not-array": (b'{"$tuple":{"$map":[]}}', r"\$tuple of an object, not an array"),
    "map-entry-not-pair": (b'{"$map":[[1]]}', r"a \$map entry that is an array, not a \[key, value\] array at result\.<key 0>$"),
    "map-entries-not-array": (b'{"$map":{}}', r"\$map of an object, not an array"),
    "wrong-not-true": (b'{"$wrong":1}', r"\$wrong of a number, not true"),
    "list-key": (b'{"$map":[[[1],2]]}', r"a list as a map key at result\.<key 0>$"),
    "list-in-tuple-key": (b'{"$map":[[{"$tuple":[[1]]},2]]}', r"a list as a map key at result\.<key 0>\[0\]$"),
    "map-key": (b'{"$map":[[{"$map":[]},2]]}', r"a \$map as a map key"),
    "wrong-key": (b'{"$map":[[{"$wrong":true},2]]}', r"\$wrong as a map key"),
    "nan-token": (b"[NaN]", r"NaN is not JSON"),
    "infinity-token": (b'{"$map":[["k",-Infinity]]}', r"-Infinity is not JSON"),
    "not-json": (b"[1,", r"not UTF-8 JSON"),
    "not-utf8": (b'"\xe9"', r"not UTF-8 JSON: UnicodeDecodeError"),
}


@pytest.mark.parametrize("text, message", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_wire_data_is_a_protocol_error(text, message):
    with pytest.raises(ProtocolError, match=message):
        loads(text)


@pytest.mark.parametrize("data, message", [
    ((1, 2), r"a tuple, which JSON does not have"),
    ([math.nan], r"a bare non-finite float .* at result\[0\]$"),
    ({1: 2}, r"an object with keys \[int\]"),
    ([b"x"], r"a bytes, which JSON does not have"),
])
def test_decode_takes_only_what_json_can_hold(data, message):
    with pytest.raises(ProtocolError, match=message):
        decode(data)


@pytest.mark.parametrize("actual, expected", [
    ({1: "a"}, {True: "a"}),
    ({1: "a"}, {1.0: "a"}),
    ({True: "a"}, {1.0: "a"}),
    ({(1, 2): "a"}, {(1, True): "a"}),
    ({0: "a", 1: "b"}, {False: "a", True: "b"}),
    ({"a": 1}, {"a": 1.0}),
    ({"a": 1}, {"a": 1, "b": 2}),
], ids=["int-bool", "int-float", "bool-float", "tuple-keys", "two-keys", "values", "sizes"])
def test_strict_equal_tells_key_types_apart(actual, expected):
    assert not strict_equal(actual, expected)
    assert not strict_equal(expected, actual)


def test_strict_equal_keeps_its_other_rules():
    assert strict_equal({1: [1, 2], "b": (1.5,)}, {"b": [1.5], 1: (1, 2)})  # order aside, lists equal tuples
    assert strict_equal({math.nan: 1, float("nan"): 2}, {float("nan"): 2, math.nan: 1})
    assert strict_equal({(1, math.nan): [math.nan]}, {(1, float("nan")): (float("nan"),)})
    assert not strict_equal({math.nan: 1, float("nan"): 2}, {float("nan"): 1, math.nan: 1})
    assert not strict_equal([WRONG], [WRONG]) and not strict_equal(1, True) and not strict_equal(1, 1.0)


def test_strict_equal_on_int_layouts():
    layout = [[i] for i in range(4096)] * 6
    assert strict_equal(layout, [list(row) for row in layout])
    assert not strict_equal(layout, layout[:-1] + [[4095.0]])
    assert not strict_equal(layout, layout[:-1] + [[True]])
    assert not strict_equal([[1]], [[True]]) and not strict_equal([1, 0], [True, False])
    assert strict_equal([[1], [2]], [(1,), [2]]) and strict_equal([1, 2], (1, 2))
    assert strict_equal(loads(dumps(layout)), layout)
