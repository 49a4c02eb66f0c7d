"""Hypothesis strategies of LAYERS-NORM-ROPE case inputs (spec/layers-norm-rope.md): shapes, dtypes, scales and seeds
are drawn, and the tensors made from them judge-side (tensors.randn, the randn spelling's numbers), so every
example reaches the implementation as tensors, as a named case does."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from .tensors import randn

SEEDS = st.integers(0, 2**31 - 1)
HIDDEN = st.sampled_from([1, 2, 7, 64, 128, 1000, 4096]) | st.integers(1, 300)
WEIGHT_SPREAD = 0.1  # weight = 1 + 0.1 N(0, 1), as the named cases' weights


@st.composite
def _rms(draw: Any, dtypes: list[str]) -> dict[str, Any]:
    """x [tokens, hidden], a weight or None, a residual or None, eps: seeds 10·seed + 0, 1, 2 as in the named cases."""
    tokens, hidden, dtype = draw(st.integers(1, 4)), draw(HIDDEN), draw(st.sampled_from(dtypes))
    seed, scale = draw(SEEDS), draw(st.sampled_from([1e-3, 0.1, 1.0, 10.0, 100.0]))
    eps, weighted, fused = draw(st.sampled_from([1e-6, 1e-5, 0.1])), draw(st.booleans()), draw(st.booleans())
    return {"x": randn((tokens, hidden), dtype, 10 * seed, scale),
            "weight": randn((hidden,), dtype, 10 * seed + 1, WEIGHT_SPREAD, 1.0) if weighted else None,
            "eps": eps, "residual": randn((tokens, hidden), dtype, 10 * seed + 2, scale) if fused else None}


def rms_float32_bfloat16() -> Any:
    """RMSNorm inputs in float32 and bfloat16 (judged at their per-dtype defaults)."""
    return _rms(["float32", "bfloat16"])


def rms_float16() -> Any:
    """RMSNorm inputs in float16 (judged at rtol 2e-3: the two roundings after the float32 scale)."""
    return _rms(["float16"])


@st.composite
def rope_cases(draw: Any) -> dict[str, Any]:
    """RoPE inputs: dtype, style, head size and a rotary_dim up to it, a table length, positions drawn in it, query
    and key of [tokens, heads · head_size] (no key when kv_heads is 0)."""
    head_size = draw(st.sampled_from([2, 8, 64, 80, 128, 256]) | st.integers(1, 64).map(lambda k: 2 * k))
    rotary_dim = draw(st.sampled_from([head_size, head_size // 2 + head_size // 2 % 2, 2])
                      | st.integers(1, head_size // 2).map(lambda k: 2 * k))
    tokens, heads, kv_heads = draw(st.integers(1, 8)), draw(st.integers(1, 4)), draw(st.integers(0, 2))
    max_position = draw(st.sampled_from([1, 64, 4096, 8192]) | st.integers(1, 8192))
    positions = draw(st.lists(st.integers(0, max_position - 1), min_size=tokens, max_size=tokens))
    dtype, seed, scale = (draw(st.sampled_from(["float32", "float16", "bfloat16"])), draw(SEEDS),
                          draw(st.sampled_from([1.0, 3.0, 30.0])))
    return {"positions": np.asarray(positions, dtype=np.int64),
            "query": randn((tokens, heads * head_size), dtype, 10 * seed + 4, scale),
            "key": randn((tokens, kv_heads * head_size), dtype, 10 * seed + 5, scale) if kv_heads else None,
            "head_size": head_size, "rotary_dim": max(2, rotary_dim), "max_position": max_position,
            "base": draw(st.sampled_from([100.0, 10000.0, 500000.0, 1000000.0])), "neox": draw(st.booleans())}


def cache_cases() -> Any:
    """Table shapes: an even rotary_dim up to 256, up to 8192 positions (the cache gate's atol assumes at most 8192)."""
    return st.fixed_dictionaries(
        {"rotary_dim": st.integers(1, 128).map(lambda k: 2 * k),
         "max_position": st.sampled_from([1, 2, 8192]) | st.integers(1, 8192),
         "base": st.sampled_from([100.0, 10000.0, 500000.0, 1000000.0])})
