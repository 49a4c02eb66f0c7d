"""How results are compared by default: strict equality that tells int from float from bool, and tensors bit for bit;
the same walk, asked where two results differ, lists the paths of the sub-values that differ (docs/gate-files.md).
Both are visitors over the shared walk of valuewalk.py."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from _vllm_gates.values.valuewalk import ABSENT, item_path, key_path, key_token, pair_keys, visit
from _vllm_gates.wire.plain import WrongEverywhere
from _vllm_gates.wire.tensors import arrays_equal, is_array, wire_name

COUNTED = 100_000  # the most differing paths a walk counts before it stops: a report's cost stays bounded


@dataclass(frozen=True)
class PathDifference:
    """One place where two results differ: its path ("result.ranks[0].vocab_range[1]"), what differs there, and
    both sub-values. ``what``: "value" (the sub-values, of the same kind or not), "length" (two lists; their common
    prefix is compared too), "missing" / "unexpected" (a key of one map only; the other side is None), "elements"
    (two arrays of one dtype and shape: ``count`` elements differ, the first at ``first``), "keys" (maps whose keys
    compare equal among themselves, NaN keys, matched by value as a whole)."""

    path: str
    what: str
    actual: Any
    expected: Any
    count: int = 0
    first: tuple[int, ...] = ()


@dataclass
class PathDifferences:
    """The differences a walk found, in the order of the walk: the first ``keep`` of them, and how many in all
    (``complete``: False where the walk stopped at COUNTED)."""

    keep: int
    shown: list[PathDifference] = field(default_factory=list)
    count: int = 0
    complete: bool = True

    def note(self, difference: PathDifference) -> None:
        self.count += 1
        if len(self.shown) < self.keep:
            self.shown.append(difference)

    @property
    def full(self) -> bool:
        return self.count >= COUNTED


def strict_equal(actual: Any, expected: Any) -> bool:
    """Equality where 1 != 1.0 != True (values and keys), lists equal tuples, NaN equals NaN, mappings key by key,
    tensors (numpy arrays) by dtype, shape and element bytes (docs/worker-protocol.md §7.4)."""
    return visit(_EQUAL, "", actual, expected)


def differences(actual: Any, expected: Any, keep: int = 10, root: str = "result") -> PathDifferences:
    """Where ``actual`` and ``expected`` differ under strict_equal, in the order of the walk: a path is listed where
    strict_equal says its sub-values differ and no path below it does; a list's length and a map's missing or
    unexpected keys are listed at the list or the map, beside its differing items. Values are not copied."""
    found = PathDifferences(keep)
    visit(_Noting(found), root, actual, expected)
    return found


class _Equal:
    """strict_equal over the shared walk: whether two values are strictly equal, stopping at the first difference."""

    def arrays(self, path: str, actual: Any, expected: Any) -> bool:
        return arrays_equal(actual, expected)  # same dtype, shape and bytes; a tensor never equals a list

    def lists(self, path: str, actual: Any, expected: Any) -> bool:
        if _int_rows(actual) and _int_rows(expected):
            return actual == expected  # exact ints only: == is already strict, and runs in C
        return len(actual) == len(expected) and all(map(self._item, actual, expected))

    def maps(self, path: str, actual: dict[Any, Any], expected: dict[Any, Any]) -> bool:
        return _maps_equal(actual, expected)

    def leaves(self, path: str, actual: Any, expected: Any) -> bool:
        return _leaves_equal(actual, expected)

    def _item(self, actual: Any, expected: Any) -> bool:
        return visit(self, "", actual, expected)


_EQUAL = _Equal()


@dataclass
class _Noting:
    """differences over the shared walk: it goes on past the first difference and notes each one at its path,
    walking into a pair only where strict equality fails on it."""

    found: PathDifferences

    def arrays(self, path: str, actual: Any, expected: Any) -> bool:
        return arrays_equal(actual, expected) or _arrays_differ(self.found, path, actual, expected)

    def lists(self, path: str, actual: Any, expected: Any) -> bool:
        """Two lists item by item over their common prefix, their lengths first."""
        found = self.found
        same = len(actual) == len(expected) or _differ(found, path, "length", actual, expected)
        for index, (a, e) in enumerate(zip(actual, expected, strict=False)):
            if found.full:
                found.complete = False
                return False
            if not strict_equal(a, e):
                same = visit(self, item_path(path, index), a, e)  # False: it notes where below
        return same

    def maps(self, path: str, actual: dict[Any, Any], expected: dict[Any, Any]) -> bool:
        """Two maps key by key, in the expected map's order, then the actual map's keys the expected one lacks."""
        found = self.found
        keys = pair_keys(actual, expected)
        if not keys.distinct:  # keys equal among themselves: matched by value
            return _maps_equal(actual, expected) or _differ(found, path, "keys", actual, expected)
        same = True
        for _, ours, theirs in keys.entries():
            if found.full:
                found.complete = False
                return False
            inner = key_path(path, ours if theirs is ABSENT else theirs)
            if ours is ABSENT:
                same = _differ(found, inner, "missing", None, expected[theirs])
            elif theirs is ABSENT:
                same = _differ(found, inner, "unexpected", actual[ours], None)
            elif not strict_equal(actual[ours], expected[theirs]):
                same = visit(self, inner, actual[ours], expected[theirs])  # False: it notes where below
        return same

    def leaves(self, path: str, actual: Any, expected: Any) -> bool:
        return _leaves_equal(actual, expected) or _differ(self.found, path, "value", actual, expected)


def _leaves_equal(actual: Any, expected: Any) -> bool:
    """Two values that are not both lists, maps or arrays: bools only equal bools, ints ints, floats floats (NaN
    equals NaN); the stand-in nothing."""
    if isinstance(actual, WrongEverywhere) or isinstance(expected, WrongEverywhere):
        return False
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(actual, int) and isinstance(expected, int):
        return actual == expected
    if isinstance(actual, float) and isinstance(expected, float):
        return actual == expected or (math.isnan(actual) and math.isnan(expected))
    if isinstance(actual, (int, float)) or isinstance(expected, (int, float)):
        return False
    return bool(actual == expected)


def _differ(found: PathDifferences, path: str, what: str, actual: Any, expected: Any, count: int = 0,
            first: tuple[int, ...] = ()) -> bool:
    """Not equal: noted at ``path``."""
    found.note(PathDifference(path, what, actual, expected, count, first))
    return False


def _arrays_differ(found: PathDifferences, path: str, actual: Any, expected: Any) -> bool:
    """Arrays that arrays_equal found different: of one dtype and shape, how many elements differ (bitwise, as
    arrays_equal compares them) and the first of them; else their kinds differ (dtype, shape, or not an array)."""
    if is_array(actual) and is_array(expected) and actual.shape == expected.shape and actual.dtype.kind != "O" \
            and (wire_name(actual.dtype) or str(actual.dtype)) == (wire_name(expected.dtype) or str(expected.dtype)):
        return _differ(found, path, "elements", actual, expected, *_elements_differing(actual, expected))
    return _differ(found, path, "value", actual, expected)


CHUNK = 1 << 20  # elements compared at a time when counting the differing ones


def _elements_differing(actual: Any, expected: Any) -> tuple[int, tuple[int, ...]]:
    """How many elements of two arrays of one dtype and shape differ in their bytes, and the index of the first."""
    import numpy

    def rows(array: Any) -> Any:
        flat = numpy.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).reshape(-1)
        return flat.view(numpy.uint8).reshape(flat.size, flat.dtype.itemsize)

    left, right = rows(actual), rows(expected)
    count, first = 0, -1
    for start in range(0, left.shape[0], CHUNK):
        differing = numpy.flatnonzero((left[start:start + CHUNK] != right[start:start + CHUNK]).any(axis=1))
        if differing.size and first < 0:
            first = start + int(differing[0])
        count += int(differing.size)
    return count, tuple(int(i) for i in numpy.unravel_index(first, actual.shape)) if first >= 0 else ()


def _int_rows(value: Any) -> bool:
    """A list of exact ints, or a list of such lists (a layout): bools, floats and subclasses fall to the slow path."""
    if type(value) is not list:
        return False
    kinds = set(map(type, value))  # the type checks run in C: no per-item Python frame
    if kinds <= {int}:
        return True
    return kinds == {list} and set(map(type, chain.from_iterable(value))) <= {int}


def _maps_equal(actual: dict[Any, Any], expected: dict[Any, Any]) -> bool:
    """Each actual entry takes a distinct expected entry with a strictly equal key and value."""
    if len(actual) != len(expected):
        return False
    by_key: dict[Any, list[Any]] = {}
    for key, value in expected.items():
        by_key.setdefault(key_token(key), []).append(value)  # several values only under distinct NaN keys
    for key, value in actual.items():
        candidates = by_key.get(key_token(key), [])
        match = next((i for i, e in enumerate(candidates) if strict_equal(value, e)), None)
        if match is None:
            return False
        del candidates[match]
    return True
