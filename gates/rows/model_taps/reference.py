"""The decoder-taps gate's oracle (spec/model-taps.md MT-1.5, MT-4.1): the float64 taps of oracles/qwen3_reference.py
rounded once to the port's compute dtype (logits to float32), since a comparison policy never casts."""
from __future__ import annotations

from typing import Any, Mapping

import ml_dtypes
import numpy as np

from oracles.qwen3_reference import decoder_taps

ROUNDED_TO = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16),
              "float16": np.dtype(np.float16)}
"""The numpy dtype each compute dtype's taps are rounded to."""


def taps_in_port_dtype(config: Mapping[str, Any], weights: Mapping[str, Any], ids: Any, tp: int = 1,
                       dtype: str = "float32", feed: Mapping[str, Any] | None = None,
                       rank_partials: bool = False) -> dict[str, np.ndarray]:
    """decoder_taps(config, weights, ids, feed, tp, rank_partials) with every tap rounded once to ``dtype``'s numpy
    dtype, the logits to float32 (the port's logits are float32 at every dtype)."""
    taps = decoder_taps(config, weights, ids, feed=feed, dtype=dtype, tp=tp, rank_partials=rank_partials)
    rounded = ROUNDED_TO[dtype]
    return {name: value.astype(np.float32 if name == "logits" else rounded) for name, value in taps.items()}
