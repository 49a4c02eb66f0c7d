"""The row's generated tensors, drawn judge-side for the strategies exactly as a case's `{tensor: {randn: ...}}`
spelling draws them (docs/gate-files.md, "Tensors in cases"): numpy's Generator(PCG64(seed)) normal draws in
float64, times ``scale``, plus ``mean``, cast to the dtype once, read-only. An example is thus told as randn."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

DTYPES: dict[str, Any] = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def randn(shape: tuple[int, ...], dtype: str, seed: int, scale: float = 1.0, mean: float = 0.0) -> np.ndarray:
    """mean + scale · N(0, 1) of ``shape`` in ``dtype`` (float32, float16 or bfloat16), as the randn spelling makes it."""
    wide = np.random.Generator(np.random.PCG64(seed)).standard_normal(int(np.prod(shape))) * scale + mean
    array = wide.astype(DTYPES[dtype]).reshape(shape)
    array.flags.writeable = False
    return array
