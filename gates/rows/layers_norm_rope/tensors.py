"""Seeded tensors made in the worker from a case's small plain input (issue 29 item 7): numpy arrays, cast to the
case's dtype; ``vllm_gates.as_torch`` turns them into torch tensors for the impl, the known-bads and upstream."""
from __future__ import annotations

from typing import Any, Mapping

import ml_dtypes
import numpy as np

DTYPES: dict[str, Any] = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def dtype_of(case: Mapping[str, Any]) -> Any:
    """The case's ``dtype`` (float32, float16 or bfloat16); a ValueError naming the value otherwise."""
    name = case.get("dtype", "float32")
    if name not in DTYPES:
        raise ValueError(f"input.dtype={name!r} is not one of {', '.join(DTYPES)}")
    return DTYPES[name]


def generator(case: Mapping[str, Any], stream: int) -> np.random.Generator:
    """The case's seeded generator for one of its tensors (``stream`` keeps the tensors of one seed independent)."""
    return np.random.Generator(np.random.PCG64([int(case.get("seed", 0)), stream]))


def normal(case: Mapping[str, Any], stream: int, shape: tuple[int, ...], scale: float, mean: float = 0.0) -> np.ndarray:
    """mean + scale · N(0, 1) of ``shape``, drawn in float32 and rounded to the case's dtype."""
    values = mean + scale * generator(case, stream).standard_normal(shape, dtype=np.float32)
    return np.asarray(values, dtype=np.float32).astype(dtype_of(case))  # a 0-d array, not a scalar, for shape ()
