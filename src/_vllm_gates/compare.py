"""How results are compared by default: strict equality that tells int from float from bool, and tensors bit for bit;
the same walk, asked where two results differ, lists the paths of the sub-values that differ (docs/gate-files.md)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from _vllm_gates.tensors import arrays_equal, is_array, wire_name

COUNTED = 100_000  # the most differing paths a walk counts before it stops: a report's cost stays bounded


class WrongEverywhere:
    """What the audit's stand-in returns: a value equal to nothing, not even itself."""

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "<wrong-everywhere stand-in result>"


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
    return _walk(actual, expected)


def differences(actual: Any, expected: Any, keep: int = 10, root: str = "result") -> PathDifferences:
    """Where ``actual`` and ``expected`` differ under strict_equal, in the order of the walk: a path is listed where
    strict_equal says its sub-values differ and no path below it does; a list's length and a map's missing or
    unexpected keys are listed at the list or the map, beside its differing items. Values are not copied."""
    found = PathDifferences(keep)
    _walk(actual, expected, found, root)
    return found


def _walk(actual: Any, expected: Any, found: PathDifferences | None = None, path: str = "") -> bool:
    """strict_equal's one walk: whether the values are strictly equal; with ``found``, it goes on past the first
    difference and notes each one at its path (walking into a pair only where strict equality fails on it)."""
    if isinstance(actual, WrongEverywhere) or isinstance(expected, WrongEverywhere):
        return _differ(found, path, "value", actual, expected)
    if isinstance(actual, bool) or isinstance(expected, bool):
        return (type(actual) is type(expected) and actual == expected) or _differ(found, path, "value", actual, expected)
    if isinstance(actual, int) and isinstance(expected, int):
        return actual == expected or _differ(found, path, "value", actual, expected)
    if isinstance(actual, float) and isinstance(expected, float):
        return actual == expected or (math.isnan(actual) and math.isnan(expected)) or \
            _differ(found, path, "value", actual, expected)
    if isinstance(actual, (int, float)) or isinstance(expected, (int, float)):
        return _differ(found, path, "value", actual, expected)
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if found is None:
            if _int_rows(actual) and _int_rows(expected):
                return actual == expected  # exact ints only: == is already strict, and runs in C
            return len(actual) == len(expected) and all(map(_walk, actual, expected))
        return _lists(actual, expected, found, path)
    if isinstance(actual, dict) and isinstance(expected, dict):
        return _maps_equal(actual, expected) if found is None else _maps(actual, expected, found, path)
    if is_array(actual) or is_array(expected):  # same dtype, shape and bytes; a tensor never equals a list
        return arrays_equal(actual, expected) or _arrays_differ(found, path, actual, expected)
    return bool(actual == expected) or _differ(found, path, "value", actual, expected)


def _differ(found: PathDifferences | None, path: str, what: str, actual: Any, expected: Any, count: int = 0,
            first: tuple[int, ...] = ()) -> bool:
    """Not equal: noted at ``path`` where differences are asked for."""
    if found is not None:
        found.note(PathDifference(path, what, actual, expected, count, first))
    return False


def _lists(actual: Any, expected: Any, found: PathDifferences, path: str) -> bool:
    """Two lists item by item over their common prefix, their lengths first."""
    same = len(actual) == len(expected) or _differ(found, path, "length", actual, expected)
    for index, (a, e) in enumerate(zip(actual, expected, strict=False)):
        if found.full:
            found.complete = False
            return False
        if not _walk(a, e):
            same = _walk(a, e, found, f"{path}[{index}]")  # False: it notes where below
    return same


def _maps(actual: dict[Any, Any], expected: dict[Any, Any], found: PathDifferences, path: str) -> bool:
    """Two maps key by key, in the expected map's order, then the actual map's keys the expected one lacks."""
    ours = {_key_token(key): key for key in actual}
    theirs = {_key_token(key): key for key in expected}
    if len(ours) != len(actual) or len(theirs) != len(expected):  # keys equal among themselves: matched by value
        return _maps_equal(actual, expected) or _differ(found, path, "keys", actual, expected)
    same = True
    for token, key in chain(theirs.items(), ((t, k) for t, k in ours.items() if t not in theirs)):
        if found.full:
            found.complete = False
            return False
        inner = f"{path}.{key}" if isinstance(key, str) and key.isidentifier() else f"{path}[{key!r}]"
        if token not in ours:
            same = _differ(found, inner, "missing", None, expected[key])
        elif token not in theirs:
            same = _differ(found, inner, "unexpected", actual[key], None)
        elif not _walk(actual[ours[token]], expected[key]):
            same = _walk(actual[ours[token]], expected[key], found, inner)  # False: it notes where below
    return same


def _arrays_differ(found: PathDifferences | None, path: str, actual: Any, expected: Any) -> bool:
    """Arrays that arrays_equal found different: of one dtype and shape, how many elements differ (bitwise, as
    arrays_equal compares them) and the first of them; else their kinds differ (dtype, shape, or not an array)."""
    if found is None:
        return False
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


def _key_token(key: Any) -> Any:
    """A key as strict_equal sees it: equal tokens exactly when the keys are strictly equal (1, 1.0, True differ)."""
    if isinstance(key, bool):
        return ("bool", key)
    if isinstance(key, int):
        return ("int", key)
    if isinstance(key, float):
        return ("float", "nan") if math.isnan(key) else ("float", key)
    if isinstance(key, (list, tuple)):
        return ("seq", tuple(_key_token(k) for k in key))
    return ("other", key)


def _maps_equal(actual: dict[Any, Any], expected: dict[Any, Any]) -> bool:
    """Each actual entry takes a distinct expected entry with a strictly equal key and value."""
    if len(actual) != len(expected):
        return False
    by_key: dict[Any, list[Any]] = {}
    for key, value in expected.items():
        by_key.setdefault(_key_token(key), []).append(value)  # several values only under distinct NaN keys
    for key, value in actual.items():
        candidates = by_key.get(_key_token(key), [])
        match = next((i for i, e in enumerate(candidates) if strict_equal(value, e)), None)
        if match is None:
            return False
        del candidates[match]
    return True
