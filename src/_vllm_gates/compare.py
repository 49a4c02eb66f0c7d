"""How results are compared by default: strict equality that tells int from float from bool, and tensors bit for bit."""
from __future__ import annotations

import math
from itertools import chain
from typing import Any

from _vllm_gates.tensors import arrays_equal, is_array


class WrongEverywhere:
    """What the audit's stand-in returns: a value equal to nothing, not even itself."""

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "<wrong-everywhere stand-in result>"


def strict_equal(actual: Any, expected: Any) -> bool:
    """Equality where 1 != 1.0 != True (values and keys), lists equal tuples, NaN equals NaN, mappings key by key,
    tensors (numpy arrays) by dtype, shape and element bytes (docs/worker-protocol.md §7.4)."""
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
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if _int_rows(actual) and _int_rows(expected):
            return actual == expected  # exact ints only: == is already strict, and runs in C
        return len(actual) == len(expected) and all(strict_equal(a, e) for a, e in zip(actual, expected))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return _maps_equal(actual, expected)
    if is_array(actual) or is_array(expected):  # same dtype, shape and bytes; a tensor never equals a list
        return arrays_equal(actual, expected)
    return bool(actual == expected)


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
