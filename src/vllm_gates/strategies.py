"""Hypothesis strategies of tensors for a gate's strategy module (docs/gate-files.md, "Tensors in
properties"): read-only numpy arrays of the dtypes the protocol carries (bfloat16 as ml_dtypes.bfloat16), built on
hypothesis.extra.numpy. Special values (signed zeros, subnormals, infinities, NaN, the largest magnitudes) are drawn
only when asked for; a NaN is always the one quiet NaN, so a failing example written as a case replays bit for bit.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
SPECIALS = ("zero_signs", "subnormal", "inf", "nan", "large")
FLOAT_BOUND = 1000.0  # a float tensor's elements lie in [-FLOAT_BOUND, FLOAT_BOUND] unless bounds are given
_WIDTH: dict[str, Literal[16, 32, 64]] = {"float16": 16, "bfloat16": 32, "float32": 32, "float64": 64}  # the width its elements are drawn at

Shape = int | Sequence[int] | st.SearchStrategy


def shapes(*, min_dims: int = 1, max_dims: int = 3, min_side: int = 1, max_side: int = 8) -> st.SearchStrategy:
    """Shapes (tuples of ints) of ``min_dims`` to ``max_dims`` dimensions, each of ``min_side`` to ``max_side``;
    they shrink towards fewer and smaller dimensions."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def tensors(dtype: str | Sequence[str] = "float32", shape: Shape | None = None, *, min_value: float | None = None,
            max_value: float | None = None, specials: Iterable[str] = ()) -> st.SearchStrategy:
    """Read-only numpy arrays of ``dtype`` (a name, or several to draw from) and ``shape`` (an int, a tuple, or a
    strategy of shapes; default ``shapes()``), elements in [min_value, max_value] (floats default to
    ±FLOAT_BOUND, ints to the dtype's range), plus the ``specials`` named (SPECIALS: "zero_signs" 0.0 and -0.0,
    "subnormal", "inf" ±inf, "nan" the quiet NaN, "large" the dtype's extremes). ValueError naming what is refused."""
    specials = (specials,) if isinstance(specials, str) else tuple(specials)
    unknown = [name for name in specials if name not in SPECIALS]
    if unknown:
        raise ValueError(f"tensors: unknown special value kinds {unknown} (known: {', '.join(SPECIALS)})")
    names = [dtype] if isinstance(dtype, str) else list(dtype)
    if not names or any(name not in DTYPES for name in names):
        raise ValueError(f"tensors: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    shape_strategy = shape if isinstance(shape, st.SearchStrategy) else shapes() if shape is None else st.just(
        (shape,) if isinstance(shape, int) else tuple(shape))
    made = [_arrays(name, shape_strategy, min_value, max_value, specials) for name in names]
    return made[0] if len(made) == 1 else st.one_of(made)


def _arrays(dtype: str, shape: st.SearchStrategy, low: float | None, high: float | None,
            specials: tuple[str, ...]) -> st.SearchStrategy:
    elements = _elements(dtype, low, high, specials)
    stored = numpy.float32 if dtype == "bfloat16" else numpy.dtype(dtype)
    arrays = hnp.arrays(stored, shape, elements=elements)
    if dtype == "bfloat16":
        import ml_dtypes

        return arrays.map(lambda array: _read_only(array.astype(ml_dtypes.bfloat16)))
    return arrays.map(_read_only)


def _elements(dtype: str, low: float | None, high: float | None, specials: tuple[str, ...]) -> st.SearchStrategy:
    if dtype == "bool":
        if low is not None or high is not None or specials:
            raise ValueError("tensors: a bool tensor takes no min_value, max_value or specials")
        return st.booleans()
    if dtype not in FLOATS:
        return _integers(dtype, low, high, specials)
    info = _finfo(dtype)
    low = -FLOAT_BOUND if low is None else low
    high = FLOAT_BOUND if high is None else high
    if not (_finite(low) and _finite(high) and -float(info.max) <= low <= high <= float(info.max)):
        raise ValueError(f"tensors: bounds [{low}, {high}] are not finite numbers, low <= high, within {dtype}'s "
                         f"range ±{float(info.max)}")
    regular = st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=_WIDTH[dtype])
    regular = regular.map(lambda x: x + 0.0)  # -0.0 only when asked for ("zero_signs")
    if dtype == "bfloat16":
        regular = regular.map(_to_bfloat16).filter(lambda x: low <= x <= high)
    found: list[float] = []
    for kind in specials:
        found += {"zero_signs": [0.0, -0.0], "nan": [math.nan], "inf": [math.inf, -math.inf],
                  "subnormal": [float(info.smallest_subnormal), -float(info.smallest_subnormal),
                                float(info.smallest_normal) - float(info.smallest_subnormal)],
                  "large": [float(info.max), -float(info.max), float(info.max) / 2]}[kind]
    return st.one_of(regular, st.sampled_from(found)) if found else regular


def _integers(dtype: str, low: float | None, high: float | None, specials: tuple[str, ...]) -> st.SearchStrategy:
    info = numpy.iinfo(dtype)
    refused = [kind for kind in specials if kind != "large"]
    if refused:
        raise ValueError(f"tensors: special values {refused} do not apply to {dtype} (only 'large' does)")
    low = int(info.min) if low is None else low
    high = int(info.max) if high is None else high
    if not (type(low) is int and type(high) is int and info.min <= low <= high <= info.max):
        raise ValueError(f"tensors: bounds [{low}, {high}] are not whole numbers, low <= high, within {dtype}'s range "
                         f"[{info.min}, {info.max}]")
    regular = st.integers(low, high)
    return st.one_of(regular, st.sampled_from([int(info.min), int(info.max)])) if specials else regular


def _finfo(dtype: str) -> Any:
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return numpy.finfo(dtype)


def _finite(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _to_bfloat16(value: float) -> float:
    """The bfloat16 nearest a float32 value, as a float (exact in float32)."""
    import ml_dtypes

    return float(numpy.float32(value).astype(ml_dtypes.bfloat16))


def _read_only(array: Any) -> Any:
    array.flags.writeable = False
    return array


__all__ = ["tensors", "shapes", "DTYPES", "SPECIALS", "FLOAT_BOUND"]
