"""How results are compared by default: strict equality that tells int from float from bool."""
from __future__ import annotations

import math
from typing import Any


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
    """Equality where 1 != 1.0 != True, lists equal tuples, NaN equals NaN, mappings compare key by key."""
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
        return len(actual) == len(expected) and all(strict_equal(a, e) for a, e in zip(actual, expected))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(strict_equal(actual[k], expected[k]) for k in actual)
    return bool(actual == expected)
