"""Field validation shared by the frozen spec and parameter dataclasses (MEM-1.4, MEM-2.8).

Each check raises with the owner, the field, the offending value and the accepted range, so a bad
parameter reads as ``FullAttentionSpec.block_size must be an int >= 1, got 0``.
"""
from __future__ import annotations

import math
from typing import Any


def check_int(owner: str, name: str, value: Any, *, minimum: int) -> int:
    """Return ``value`` if it is an int (not a bool) ``>= minimum``; raise naming the field (``owner.name``, or
    ``name`` alone for an empty owner) otherwise."""
    field = f"{owner}.{name}" if owner else name
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int >= {minimum}, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{field} must be an int >= {minimum}, got {value!r}")
    return value


def check_fields(owner: str, given: Any, known: tuple[str, ...], required: tuple[str, ...]) -> None:
    """Refuse a mapping ``given`` with a field outside ``known`` or without one of ``required``, naming the first
    (``owner has an unknown field 'x'; fields: ...``, ``owner.y is missing; fields: ...``)."""
    unknown = [name for name in given if name not in known]
    if unknown:
        raise ValueError(f"{owner} has an unknown field {unknown[0]!r}; fields: {', '.join(known)}")
    missing = [name for name in required if name not in given]
    if missing:
        raise ValueError(f"{owner}.{missing[0]} is missing; fields: {', '.join(known)}")


def check_optional_int(owner: str, name: str, value: Any, *, minimum: int) -> None:
    """Like :func:`check_int`, but ``None`` (unset) is accepted."""
    if value is not None:
        check_int(owner, name, value, minimum=minimum)


def check_choice(owner: str, name: str, value: Any, choices: tuple[Any, ...]) -> None:
    """Refuse ``value`` unless it is one of ``choices`` (bools never match ints)."""
    if isinstance(value, bool) or value not in choices:
        raise ValueError(f"{owner}.{name} must be one of {list(choices)}, got {value!r}")


def check_optional_str(owner: str, name: str, value: Any) -> None:
    """Refuse ``value`` unless it is a str or ``None``."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{owner}.{name} must be a str or None, got {value!r} ({type(value).__name__})")


def check_fraction(owner: str, name: str, value: Any) -> float:
    """Return ``value`` as a float if it is a finite real in (0, 1]; bools are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}.{name} must be a finite float in (0, 1], got {value!r} ({type(value).__name__})")
    if not math.isfinite(value) or not 0.0 < value <= 1.0:
        raise ValueError(f"{owner}.{name} must be a finite float in (0, 1], got {value!r}")
    return float(value)
