"""The error figures of one tap against the reference's (docs/divergence.md): max abs, RMS, relative L2 and cosine,
in float64 over chunks, their square sums scaled (tolerance.SquareSums) so none under- or overflows."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from _vllm_gates.values.tolerance import CHUNK, SquareSums


@dataclass(frozen=True)
class Figures:
    """How far an array is from the reference's: the largest absolute difference, the root mean square of the
    differences, ||a - e|| / ||e|| and the cosine of the two as vectors; ``non_finite``: elements where one side is
    NaN or infinite and the two differ (the figures are then taken over the rest, and max abs is infinite)."""

    max_abs: float
    rms: float
    rel_l2: float
    cosine: float
    non_finite: int = 0


def figures(actual: Any, expected: Any) -> Figures:
    """The figures of ``actual`` against ``expected`` (same shape; any float dtypes), computed in float64."""
    import numpy as np

    a_flat, e_flat = np.ravel(actual), np.ravel(expected)
    errors, actuals = SquareSums(), SquareSums()  # the same data, so the same scale: Σ(a-e)², Σe² and Σa² comparable
    max_abs, non_finite, dot_terms = 0.0, 0, 0
    for start in range(0, a_flat.size, CHUNK):
        a = a_flat[start:start + CHUNK].astype(np.float64)
        e = e_flat[start:start + CHUNK].astype(np.float64)
        finite = np.isfinite(a) & np.isfinite(e)
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        non_finite += int(np.count_nonzero(~finite & ~same))
        a, e = a[finite], e[finite]
        if a.size:
            max_abs = max(max_abs, float(np.max(np.abs(a - e))))
        errors.add(a, e)
        actuals.add(e, a)
        dot_terms += a.size
    if non_finite:
        max_abs = math.inf
    scale = errors.scale
    rms = scale * math.sqrt(errors.error / dot_terms) if dot_terms else 0.0
    rel_l2 = math.sqrt(errors.nmse())
    return Figures(max_abs, rms, rel_l2, _cosine(errors.error, errors.expected, actuals.expected), non_finite)


def _cosine(squared_error: float, squared_expected: float, squared_actual: float) -> float:
    """a·e / (|a| |e|) from the scaled sums: a·e = (Σa² + Σe² - Σ(a-e)²) / 2; 1 for two zero vectors, 0 for one."""
    if squared_expected == 0.0 or squared_actual == 0.0:
        return 1.0 if squared_expected == squared_actual else 0.0
    dot = (squared_actual + squared_expected - squared_error) / 2.0
    return max(-1.0, min(1.0, dot / math.sqrt(squared_actual * squared_expected)))
