"""How far off a result is, as labelled report lines (docs/numeric-gates.md §3): per offending array its path, dtype and
shape, mismatched elements, max absolute error with its index and values, max relative error, NMSE, the worst
elements. Bounded however large the arrays: at most MAX_ARRAYS arrays and MAX_DIFFERENCES other differences.
"""
from __future__ import annotations

from _vllm_gates.values.tolerance import ArrayFinding, Comparison, Element, tolerances

MAX_ARRAYS = 8
MAX_DIFFERENCES = 8


def how_far_off(comparison: Comparison) -> list[tuple[str, str]]:
    """The report lines of a failing comparison (a passing one has only its policy line)."""
    policy = comparison.policy
    lines = [("policy", policy.describe())]
    for difference in comparison.differences[:MAX_DIFFERENCES]:
        lines.append(("differs", f"{difference.path}: {difference.text}"))
    if len(comparison.differences) > MAX_DIFFERENCES:
        lines.append(("differs", f"... and {len(comparison.differences) - MAX_DIFFERENCES} more differences"))
    failing = [found for found in comparison.arrays if not found.passed]
    for found in failing[:MAX_ARRAYS]:
        lines += _array_lines(comparison, found)
    if len(failing) > MAX_ARRAYS:
        lines.append(("array", f"... and {len(failing) - MAX_ARRAYS} more arrays out of tolerance"))
    return lines


def _array_lines(comparison: Comparison, found: ArrayFinding) -> list[tuple[str, str]]:
    policy = comparison.policy
    floating = found.dtype in ("float16", "bfloat16", "float32", "float64")
    ids = policy.name == "tokens" and not floating  # the token ids; a tokens gate's float arrays are under allclose
    tolerance = ""
    if policy.name in ("allclose", "tokens") and floating:
        rtol, atol = tolerances(policy, found.dtype)
        tolerance = f" (rtol {rtol:g}, atol {atol:g})"
    elif not ids and not floating:
        tolerance = " (compared exactly: not a float dtype)"
    head = f"{found.path}: {found.dtype}, shape {list(found.shape)}{tolerance}" + (f": {found.why}" if found.why else "")
    unit = "positions" if ids else "elements"
    lines = [("array", head), ("mismatched", f"{found.mismatched} of {found.total} {unit}")]
    if not ids:
        if found.max_abs is not None:
            lines.append(("max abs error", f"{_number(found.max_abs_error)} at {_index(found.max_abs)} "
                                           f"(actual {_number(found.max_abs.actual)}, expected {_number(found.max_abs.expected)})"))
        lines += [("max rel error", _number(found.max_rel_error)), ("NMSE", _number(found.nmse))]
    for element in found.worst:
        lines.append(("worst", _shown(element)))
    if ids:
        lines.append(("excused", f"{found.excused_count} near-tie positions (max_excused {policy.max_excused})"
                                 + "".join(f"; {_shown(element)}" for element in found.excused)))
    return lines


def _shown(element: Element) -> str:
    text = f"{_index(element)}: actual {_number(element.actual)}, expected {_number(element.expected)}"
    return text + (f", oracle margin {element.margin:.6g} nats" if element.margin is not None else "")


def _index(element: Element) -> str:
    return f"[{', '.join(map(str, element.index))}]"


def _number(value: object) -> str:
    """A value as a report prints it: floats to 9 significant digits (enough for float32), others as they are."""
    if isinstance(value, float):
        return f"{value:.9g}"
    return str(value)
