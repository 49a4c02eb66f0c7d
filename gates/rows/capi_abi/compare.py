"""Compare functions of the CAPI-ABI gates: engine parameters, struct members and load verdicts, types included.

The judging process runs these on plain data only (the impl, oracle and known-bad targets answer with dicts,
lists and scalars: see ``subjects.py`` for the views), so this module imports neither ``impl`` nor ``oracles``,
nor any row module that does.
"""
from __future__ import annotations

from typing import Any, Mapping


def _strict(a: Any, b: Any) -> bool:
    """Equal and of the same exact type (1 != 1.0 != True); NaN equals NaN."""
    return type(a) is type(b) and (a == b or (a != a and b != b))


def same_engine_params(actual: Any, expected: Any) -> bool:
    """Two EngineParams views (``subjects.describe``: every field plus ``gpu_memory_utilization_is_explicit``)
    agree field by field, types included; an expected mapping may name only the fields to check."""
    if not isinstance(actual, Mapping) or not isinstance(expected, Mapping) or not set(expected) <= set(actual):
        return False
    return all(_strict(actual[key], expected[key]) for key in expected)


def same_members(actual: Any, expected: Any) -> bool:
    """Two member mappings (``subjects.member_values``) have exactly the same members and values, types included."""
    if not isinstance(actual, Mapping) or not isinstance(expected, Mapping):
        return False
    return actual.keys() == expected.keys() and all(_strict(actual[k], expected[k]) for k in actual)


def verdicts_agree(actual: Any, expected: Any) -> bool:
    """``actual`` has every key of ``expected`` with an equal value (types included; a case may name a subset)."""
    if not isinstance(actual, Mapping) or not isinstance(expected, Mapping) or not set(expected) <= set(actual):
        return False
    return all(verdicts_agree(actual[k], v) if isinstance(v, Mapping) else _strict(actual[k], v)
               for k, v in expected.items())
