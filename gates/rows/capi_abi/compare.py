"""Compare functions of the CAPI-ABI gates: engine parameters, struct members and load verdicts, types included."""
from __future__ import annotations

import ctypes
from dataclasses import fields
from typing import Any, Mapping

from impl.entrypoints.model_loader import EngineParams


def describe(params: EngineParams) -> dict[str, Any]:
    """Every field of ``params`` plus whether the utilization was chosen (``==`` alone cannot tell)."""
    view = {f.name: getattr(params, f.name) for f in fields(params)}
    view["gpu_memory_utilization"] = float(params.gpu_memory_utilization)
    view["gpu_memory_utilization_is_explicit"] = params.gpu_memory_utilization_is_explicit
    return view


def _strict(a: Any, b: Any) -> bool:
    return type(a) is type(b) and (a == b or (a != a and b != b))


def same_engine_params(actual: Any, expected: Any) -> bool:
    """Two EngineParams agree field by field (types included) and in explicitness; a mapping names the
    fields to check, by :func:`describe` keys."""
    if not isinstance(actual, EngineParams):
        return False
    view = describe(actual)
    wanted = describe(expected) if isinstance(expected, EngineParams) else expected
    if not isinstance(wanted, Mapping) or not set(wanted) <= set(view):
        return False
    return all(_strict(view[key], wanted[key]) for key in wanted)


def member_values(struct: Any) -> dict[str, Any]:
    """A struct's members as plain values (strings decoded as UTF-8); a mapping passes through."""
    if isinstance(struct, Mapping):
        return dict(struct)
    if not isinstance(struct, ctypes.Structure):
        raise TypeError(f"expected a ctypes struct or a mapping of members, got {type(struct).__name__}")
    values = {name: getattr(struct, name) for name, _ in struct._fields_}
    return {k: v.decode("utf-8") if isinstance(v, bytes) else v for k, v in values.items()}


def same_members(actual: Any, expected: Any) -> bool:
    """A struct (or member mapping) has exactly the expected members and values, types included."""
    if not all(isinstance(v, (ctypes.Structure, Mapping)) for v in (actual, expected)):
        return False
    got, want = member_values(actual), member_values(expected)
    return got.keys() == want.keys() and all(_strict(got[k], want[k]) for k in got)


def verdicts_agree(actual: Any, expected: Any) -> bool:
    """``actual`` has every key of ``expected`` with an equal value (types included; a case may name a subset)."""
    if not isinstance(actual, Mapping) or not isinstance(expected, Mapping) or not set(expected) <= set(actual):
        return False
    return all(verdicts_agree(actual[k], v) if isinstance(v, Mapping) else _strict(actual[k], v)
               for k, v in expected.items())
